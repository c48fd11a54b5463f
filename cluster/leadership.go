package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The leader lifecycle, after Consul's and Nomad's leader loops: one
// goroutine follows Raft's NotifyCh. When this node gains leadership it
// establishes the term (Barrier, so the FSM has applied everything earlier
// terms committed), then marks the node the serving leader and starts every
// registered leader service. When it loses leadership it stops serving at
// once, cancels the services and waits for all of them to return before it
// looks at the next change, so two terms' leader work never overlaps and no
// service outlives the term it was started for.

// RunWhileLeader registers leader-only work: run is started with a fresh
// context each time this node becomes the serving leader, and its context
// ends when leadership is lost (or the node stops); the next term starts
// only after run has returned. An error return is logged and run is started
// again a second later, within the same term. A service registered while
// the node leads starts at once.
func (n *Node) RunWhileLeader(name string, run func(ctx context.Context) error) {
	n.life.register(leaderService{name: name, run: run})
}

type leaderService struct {
	name string
	run  func(ctx context.Context) error
}

// lifecycle is the leader loop. It knows nothing of Raft beyond the
// functions it is given, so tests can drive it with a controlled channel.
type lifecycle struct {
	log *slog.Logger
	// establish readies a new term (Barrier and the like). It returns false
	// when the term cannot be established: leadership was lost meanwhile.
	establish func(ctx context.Context) bool
	// serving marks the node the serving leader, or not.
	serving func(bool)
	// restartDelay spaces restarts of a service that returned an error.
	restartDelay time.Duration

	mu       sync.Mutex
	services []leaderService
	current  *leaderTerm // the term whose services run, nil when not serving
}

// leaderTerm is one stretch of leadership: its context and the goroutines
// started for it.
type leaderTerm struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// run follows notify until stop is closed; it stops the last term before
// returning.
func (lc *lifecycle) run(notify <-chan bool, stop <-chan struct{}) {
	var t *leaderTerm
	defer func() { lc.end(t) }()
	for {
		var leader bool
		select {
		case <-stop:
			return
		case leader = <-notify:
		}
		// Raft may have flipped several times meanwhile; only the latest
		// state matters, and a loss that was gained again still ends the
		// old term (Nomad's "leadership lost and gained immediately").
		changed := !leader
	drain:
		for {
			select {
			case v := <-notify:
				changed = changed || !v
				leader = v
			default:
				break drain
			}
		}
		if t != nil && (changed || !leader) {
			lc.end(t)
			t = nil
		}
		if leader && t == nil {
			t = lc.begin()
		}
	}
}

// begin starts a term: establishment, then the services, in a goroutine of
// the term so that a loss during a slow Barrier is seen at once.
func (lc *lifecycle) begin() *leaderTerm {
	ctx, cancel := context.WithCancel(context.Background())
	t := &leaderTerm{ctx: ctx, cancel: cancel}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if !lc.establish(ctx) {
			return
		}
		lc.mu.Lock()
		defer lc.mu.Unlock()
		// Checked under the lock end takes to cancel: once end has run,
		// this term can no longer make the node a serving leader.
		if ctx.Err() != nil {
			return
		}
		lc.serving(true)
		lc.current = t
		for _, s := range lc.services {
			lc.startLocked(t, s)
		}
	}()
	return t
}

// end stops a term: the node stops serving, every service's context ends,
// and end returns once all of them have returned.
func (lc *lifecycle) end(t *leaderTerm) {
	if t == nil {
		return
	}
	lc.mu.Lock()
	t.cancel()
	lc.serving(false)
	lc.current = nil
	lc.mu.Unlock()
	lc.log.Info("leadership lost; stopping the leader services")
	t.wg.Wait()
	lc.log.Info("leader services stopped")
}

func (lc *lifecycle) register(s leaderService) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.services = append(lc.services, s)
	if lc.current != nil {
		lc.startLocked(lc.current, s)
	}
}

func (lc *lifecycle) startLocked(t *leaderTerm, s leaderService) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			err := s.run(t.ctx)
			if t.ctx.Err() != nil || err == nil {
				return
			}
			lc.log.Error("leader service failed; restarting it", "service", s.name, "err", err)
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(lc.restartDelay):
			}
		}
	}()
}
