package cluster

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeLeadership drives a lifecycle with a controlled notify channel and an
// establishment step the test holds or releases, inside a synctest bubble
// so that synctest.Wait tells when the lifecycle has settled.
type fakeLeadership struct {
	lc      *lifecycle
	notify  chan bool
	stop    chan struct{}
	done    chan struct{}
	entered chan struct{} // one per establishment begun
	release chan bool     // the outcome of the establishment in flight

	mu      sync.Mutex
	serving []bool // every change of the serving flag, in order
}

func newFakeLeadership(t *testing.T, holdEstablish bool) *fakeLeadership {
	f := &fakeLeadership{notify: make(chan bool, 16), stop: make(chan struct{}), done: make(chan struct{}),
		entered: make(chan struct{}, 16), release: make(chan bool)}
	f.lc = &lifecycle{
		log: slog.New(slog.DiscardHandler),
		establish: func(ctx context.Context) bool {
			f.entered <- struct{}{}
			if !holdEstablish {
				return true
			}
			return <-f.release
		},
		serving: func(v bool) {
			f.mu.Lock()
			f.serving = append(f.serving, v)
			f.mu.Unlock()
		},
		restartDelay: time.Second,
	}
	go func() {
		f.lc.run(f.notify, f.stop)
		close(f.done)
	}()
	t.Cleanup(func() {
		close(f.stop)
		<-f.done
	})
	return f
}

func (f *fakeLeadership) servingLog() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.serving)
}

func (f *fakeLeadership) isServing() bool {
	l := f.servingLog()
	return len(l) > 0 && l[len(l)-1]
}

// countingService counts its starts and how many instances run; with hold
// set it ignores its context ending until hold is closed.
type countingService struct {
	mu      sync.Mutex
	starts  int
	running int
	hold    chan struct{}
}

func (s *countingService) run(ctx context.Context) error {
	s.mu.Lock()
	s.starts++
	s.running++
	s.mu.Unlock()
	<-ctx.Done()
	if s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	return nil
}

func (s *countingService) counts() (starts, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts, s.running
}

// A node that loses leadership while it establishes the term (its Barrier
// or cluster-id proposal still in flight) must never serve as leader for
// that term, even when the establishment then reports success.
func TestLeadershipLostWhileEstablishingNeverServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeadership(t, true)
		coordinator := &countingService{}
		f.lc.register(leaderService{name: "group coordinator", run: coordinator.run})

		f.notify <- true
		<-f.entered // Barrier in flight
		f.notify <- false
		synctest.Wait() // the loop is ending the term, waiting for it
		f.release <- true
		synctest.Wait()

		for _, v := range f.servingLog() {
			if v {
				t.Fatalf("the node served as leader after losing leadership: serving changes %v", f.servingLog())
			}
		}
		if starts, _ := coordinator.counts(); starts != 0 {
			t.Fatalf("a leader service started %d times for a lost term", starts)
		}

		// The next term is established and served normally.
		f.notify <- true
		<-f.entered
		f.release <- true
		synctest.Wait()
		if !f.isServing() {
			t.Fatalf("not serving after a clean election: %v", f.servingLog())
		}
		if starts, running := coordinator.counts(); starts != 1 || running != 1 {
			t.Fatalf("service starts %d, running %d; want 1 and 1", starts, running)
		}
	})
}

// Losing leadership stops serving at once and stops every service; the
// next term starts only after every service of the last one has returned.
func TestNextTermWaitsForLeaderServices(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeadership(t, false)
		slow := &countingService{hold: make(chan struct{})}
		quick := &countingService{}
		f.lc.register(leaderService{name: "slow", run: slow.run})
		f.lc.register(leaderService{name: "quick", run: quick.run})

		f.notify <- true
		synctest.Wait()
		if !f.isServing() {
			t.Fatal("not serving after gaining leadership")
		}
		if s, r := slow.counts(); s != 1 || r != 1 {
			t.Fatalf("slow service: %d starts, %d running", s, r)
		}

		// Lost and gained again at once, while the slow service still runs.
		f.notify <- false
		f.notify <- true
		synctest.Wait()
		if f.isServing() {
			t.Fatal("serving while the last term's services are still stopping")
		}
		if _, r := quick.counts(); r != 0 {
			t.Fatal("the quick service was not stopped on leadership loss")
		}
		if n := len(f.entered); n != 1 {
			t.Fatalf("%d establishments begun before the last term's services returned; want 1", n)
		}

		close(slow.hold)
		synctest.Wait()
		if !f.isServing() || len(f.entered) != 2 {
			t.Fatalf("the new term did not start after the old one ended: serving %v, establishments %d", f.servingLog(), len(f.entered))
		}
		for _, s := range []*countingService{slow, quick} {
			if starts, running := s.counts(); starts != 2 || running != 1 {
				t.Fatalf("service: %d starts, %d running; want 2 and 1", starts, running)
			}
		}
	})
}

// A service registered during a term starts in it; a service that fails is
// restarted within the term after the restart delay, and not after it.
func TestLeaderServiceRegisteredLateAndRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLeadership(t, false)
		f.notify <- true
		synctest.Wait()

		late := &countingService{}
		f.lc.register(leaderService{name: "late", run: late.run})
		synctest.Wait()
		if s, r := late.counts(); s != 1 || r != 1 {
			t.Fatalf("late service: %d starts, %d running", s, r)
		}

		var mu sync.Mutex
		fails := 0
		f.lc.register(leaderService{name: "flaky", run: func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			fails++
			return errors.New("disk full")
		}})
		synctest.Wait()
		time.Sleep(2500 * time.Millisecond) // bubble time: restarts at 1 s and 2 s
		synctest.Wait()
		mu.Lock()
		got := fails
		mu.Unlock()
		if got != 3 {
			t.Fatalf("flaky service ran %d times in 2.5 s with a 1 s restart delay; want 3", got)
		}

		f.notify <- false
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if fails != got {
			t.Fatalf("flaky service restarted after leadership was lost (%d runs, %d before)", fails, got)
		}
	})
}
