package coordinator

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
)

// fakeClock is a Clock whose time moves only on Advance. Due timers fire in
// deadline order (ties in registration order), synchronously in Advance,
// with the clock's time set to each timer's deadline while it runs.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	when  time.Time
	seq   int
	f     func()
	state int // 0 pending, 1 fired, 2 stopped
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc registers f to run once the clock reaches now+d. Like
// time.AfterFunc, a non-positive d runs f at once in its own goroutine.
func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	if d <= 0 {
		t.state = 1
		go f()
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.state != 0 {
		return false
	}
	t.state = 2
	return true
}

// Advance moves the clock by d, firing every timer that falls due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.state == 0 {
				live = append(live, t)
			}
		}
		c.timers = live
		sort.Slice(c.timers, func(i, j int) bool {
			a, b := c.timers[i], c.timers[j]
			if !a.when.Equal(b.when) {
				return a.when.Before(b.when)
			}
			return a.seq < b.seq
		})
		if len(c.timers) == 0 || c.timers[0].when.After(target) {
			if target.After(c.now) { // an Advance running meanwhile may have gone further
				c.now = target
			}
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		t.state = 1
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.mu.Unlock()
		t.f()
	}
}

func TestFakeClockFiresInDeadlineOrder(t *testing.T) {
	c := newFakeClock()
	start := c.Now()
	var got []string
	var at []time.Duration
	rec := func(name string) func() {
		return func() { got = append(got, name); at = append(at, c.Now().Sub(start)) }
	}
	c.AfterFunc(3*time.Second, rec("c"))
	c.AfterFunc(time.Second, rec("a"))
	stopped := c.AfterFunc(2*time.Second, rec("stopped"))
	c.AfterFunc(2*time.Second, func() {
		rec("b")()
		c.AfterFunc(500*time.Millisecond, rec("b2")) // re-armed from inside a timer
	})
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	c.Advance(2500 * time.Millisecond)
	if want := []string{"a", "b", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("after 2.5s fired %v, want %v", got, want)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 2500 * time.Millisecond}; !slices.Equal(at, want) {
		t.Fatalf("fired at %v, want %v", at, want)
	}
	if c.Now().Sub(start) != 2500*time.Millisecond {
		t.Fatalf("now = %v after advancing 2.5s", c.Now().Sub(start))
	}
	c.Advance(time.Second)
	if want := []string{"a", "b", "b2", "c"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

// testRaft applies proposals straight to an FSM. Leadership is switched by
// the test; LeaderChanged is closed on every switch.
type testRaft struct {
	mu         sync.Mutex
	f          *fsm.FSM
	index      uint64
	leader     bool
	raftLeader bool
	changed    chan struct{}
	// applied, when set, runs after each proposal is applied and before
	// Propose returns, outside the lock: tests use it to hold a proposer.
	applied func(fsm.Command)
	// proposing, when set, runs before each proposal is admitted, outside
	// the lock: tests use it to hold a decision on its way to the log.
	proposing func(fsm.Command)
}

func newTestRaft(f *fsm.FSM) *testRaft {
	return &testRaft{f: f, leader: true, raftLeader: true, changed: make(chan struct{})}
}

func (r *testRaft) IsLeader() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

func (r *testRaft) RaftLeader() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.raftLeader
}

func (r *testRaft) LeaderChanged() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// set switches leadership: leader = serving leader, raftLeader = Raft says
// leader (maybe still catching up).
func (r *testRaft) set(leader, raftLeader bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader, r.raftLeader = leader, raftLeader
	close(r.changed)
	r.changed = make(chan struct{})
}

// Propose admits (as cluster.Node does: a command the cluster's feature
// level does not allow is refused) and applies a command.
func (r *testRaft) Propose(_ context.Context, data []byte, force bool) (any, error) {
	r.mu.Lock()
	before := r.proposing
	r.mu.Unlock()
	if before != nil {
		if cmd, err := fsm.Decode(data); err == nil {
			before(cmd)
		}
	}
	r.mu.Lock()
	if !force && !r.leader {
		r.mu.Unlock()
		return nil, cluster.ErrNotLeader
	}
	entry, err := r.f.Admit(data)
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	r.index++
	res := r.f.Apply(r.index, entry)
	hook := r.applied
	r.mu.Unlock()
	if hook != nil {
		if cmd, err := fsm.Decode(data); err == nil {
			hook(cmd)
		}
	}
	if err, ok := res.(error); ok {
		return nil, err
	}
	return res, nil
}

// harness is a coordinator over a testRaft and a fake clock. Tests using it
// run inside a synctest bubble so that synctest.Wait can tell when every
// request goroutine is parked; all coordinator time comes from clk.
type harness struct {
	t    *testing.T
	ctx  context.Context
	clk  *fakeClock
	raft *testRaft
	fsm  *fsm.FSM
	c    *Coordinator
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	f, err := fsm.Open(fsm.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h := &harness{t: t, ctx: t.Context(), clk: newFakeClock(), fsm: f}
	h.raft = newTestRaft(f)
	cfg.Clock = h.clk
	cfg.Logger = slog.New(slog.DiscardHandler)
	h.c = New(cfg, h.raft, f)
	return h
}

// activeHarness is a harness whose coordinator serves as leader.
func activeHarness(t *testing.T, cfg Config) *harness {
	h := newHarness(t, cfg)
	h.c.activate()
	return h
}

// advance lets every goroutine settle (requests reach their parking
// place), moves the fake clock and lets them settle again.
func (h *harness) advance(d time.Duration) {
	synctest.Wait()
	h.clk.Advance(d)
	synctest.Wait()
}

// bubble runs f in a synctest bubble.
func bubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, f)
}
