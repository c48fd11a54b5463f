package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A node cut off from the Raft majority (a partition, a black hole, a
// paused leader woken deposed) knows no leader while the majority has one.
// Answered "no leader" (LEADER_NOT_AVAILABLE, COORDINATOR_NOT_AVAILABLE,
// NOT_LEADER_OR_FOLLOWER), a client keeps the answer for its metadata
// refresh backoff (franz-go: 5 s) before it asks again, often this node
// again: the campaign saw clients held 10 s. Once the node has known no
// leader for CutOffAfter, a request that needs one resets the client's
// connection instead, which sends every client library to another node of
// its list at once: franz-go retries a request whose connection was reset
// on the next broker (it gives up on one closed cleanly before its first
// answer, taking that for a TLS or SASL mismatch); Java and librdkafka
// retry either and keep away from the node for their reconnect backoff.
// Elections here end within 0.3-1.4 s, so a follower whose leader died
// still waits for the winner and answers as before.

// cutOffNow reports whether this node has known no leader for
// CutOffAfter, or knows at once that it is cut off: it stopped leading
// because a majority stopped answering it (a deposed leader hears of no
// election while the cut lasts).
func (s *Server) cutOffNow() bool {
	return s.cfg.CutOffAfter > 0 && (s.cluster.LeaderlessFor() >= s.cfg.CutOffAfter || s.cluster.CutOff())
}

// cutOff reports whether r should be answered by a reset (cutOffNow):
// never a request another node forwarded, which that node answers for.
func (s *Server) cutOff(r *Request) bool { return !r.Forwarded && s.cutOffNow() }

// cutOffAnswer is what a later handler returns to have its connection
// reset instead of answered.
type cutOffAnswer struct{ kmsg.Response }

// cutOffWatch turns cutOffNow into a context that ends when the node
// becomes cut off, so that waits for a leader and long polls end then
// without each polling the cluster itself.
type cutOffWatch struct {
	mu     sync.Mutex
	ctx    context.Context // ended while cut off
	cancel context.CancelFunc
}

// watchPeriod is how often the watch asks whether the node is cut off.
const watchPeriod = 20 * time.Millisecond

// watch keeps the context current until ctx ends.
func (w *cutOffWatch) watch(ctx context.Context, cutOff func() bool) {
	tick := time.NewTicker(watchPeriod)
	defer tick.Stop()
	for {
		cut := cutOff()
		w.mu.Lock()
		if w.ctx == nil {
			w.ctx, w.cancel = context.WithCancel(context.Background())
		}
		switch {
		case cut && w.ctx.Err() == nil:
			w.cancel()
		case !cut && w.ctx.Err() != nil:
			w.ctx, w.cancel = context.WithCancel(context.Background())
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// done is a context that ends when the node is (or becomes) cut off; it
// never ends before watch runs.
func (w *cutOffWatch) done() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil {
		w.ctx, w.cancel = context.WithCancel(context.Background())
	}
	return w.ctx
}

// untilCutOff also ends ctx (with cancel) once the node is cut off.
func (s *Server) untilCutOff(ctx context.Context, cancel context.CancelFunc) (context.Context, context.CancelFunc) {
	if s.cfg.CutOffAfter < 0 {
		return ctx, cancel
	}
	if s.cutOffNow() {
		cancel()
		return ctx, cancel
	}
	stop := context.AfterFunc(s.cut.done(), cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
