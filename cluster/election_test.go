package cluster

import (
	"context"
	"flag"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kgate/kgate/fsm"
)

var crashRounds = flag.Int("crash-rounds", 6, "leader crashes in TestLeaderCrashesUnderLoad")

// Leaders crashed one after another while appends keep arriving: every
// time the two survivors settle on one leader between them, no append
// acknowledged before a crash is missing from the new leader, and the
// crashed node comes back as a follower. The log shows each election's
// time (the failover benchmark's business; -crash-rounds for more).
func TestLeaderCrashesUnderLoad(t *testing.T) {
	c := newCluster(t, 3, nil)
	leaderAmong(t, c.nodes)
	createTopic(t, c.nodes, "load", 1)

	// A writer keeps proposals in flight, so that at a crash one follower
	// may hold entries the other lacks.
	var acked atomic.Int64
	var live liveNodes // the running nodes, as the writer may see them
	live.update(c)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := newProducer("load", 7)
		payload := make([]byte, 8<<10)
		for ctx.Err() == nil {
			var leader *Node
			for _, n := range live.nodes() {
				if n.IsLeader() {
					leader = n
				}
			}
			if leader == nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			p.now++
			cmd := fsm.EncodeAppend(&fsm.Append{NowMs: p.now, Batches: []fsm.Batch{{
				Topic: "load", Data: fakeBatch(2, p.now, payload), LastOffsetDelta: 1,
				MaxTimestamp: p.now, ProducerID: p.id, BaseSequence: p.seq,
			}}})
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			res, err := leader.Propose(pctx, cmd, false)
			pcancel()
			if err != nil {
				continue // retried with the same sequence: a duplicate if it was stored
			}
			// A retry of a batch stored before a crash is answered with its
			// first offset, as a duplicate.
			if r := res.(*fsm.AppendResults).Results[0]; r.Code == fsm.ErrNone {
				acked.Store(r.BaseOffset + 2)
				p.seq += 2
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	var took []time.Duration
	for round := 1; round <= *crashRounds; round++ {
		for before := acked.Load(); acked.Load() < before+20; {
			time.Sleep(5 * time.Millisecond)
		}
		old := leaderAmong(t, c.nodes)
		ackedBefore := acked.Load()
		at := time.Now()
		old.crash(t)
		live.update(c)
		rest := c.running()
		var next *testNode
		for next == nil {
			if time.Since(at) > 20*time.Second {
				t.Fatalf("round %d: no leader among %d survivors 20 s after the crash", round, len(rest))
			}
			// Serving is noted from Raft's notifications, so a leader that
			// stepped down may still say so a moment after another was
			// elected: wait for exactly one.
			if ls := servingLeaders(rest); len(ls) == 1 {
				next = ls[0]
			}
			time.Sleep(time.Millisecond)
		}
		took = append(took, time.Since(at))
		if hw := next.f.Partition("load", 0).Log.Next(); hw < ackedBefore {
			t.Fatalf("round %d: new leader's log ends at %d, %d were acknowledged", round, hw, ackedBefore)
		}
		t.Logf("round %d: node %d crashed, node %d leads after %v", round, old.id, next.id, took[len(took)-1].Round(time.Millisecond))
		old.start(t)
		live.update(c)
		eventually(t, 20*time.Second, fmt.Sprintf("node %d back in contact", old.id), func() error {
			if old.n.RaftLeader() || !old.n.inContact() {
				return fmt.Errorf("node %d not a follower in contact", old.id)
			}
			return nil
		})
	}
	slices.Sort(took)
	t.Logf("elections after %d crashes: median %v, max %v", len(took), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// TestWatchedConnReportsEveryEnd: a follower learns that its leader's
// connection ended however Raft's handler meets the end. The handler stops
// at a failed write without reading again (its answer to a leader killed
// meanwhile meets a broken pipe), so a read error alone would leave the
// follower waiting out the full heartbeat timeout.
func TestWatchedConnReportsEveryEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(c net.Conn) error
	}{
		{"read", func(c net.Conn) error { _, err := c.Read(make([]byte, 1)); return err }},
		{"write", func(c net.Conn) error { _, err := c.Write([]byte{1}); return err }},
		{"close", func(c net.Conn) error { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs := net.Pipe()
			ended := 0
			c := &watchedConn{Conn: ours, closed: func() { ended++ }}
			theirs.Close() // the leader's process is gone
			if err := tc.end(c); err == nil && tc.name != "close" {
				t.Fatalf("%s on a connection whose peer closed: no error", tc.name)
			}
			c.Close() // Raft's handler closes the connection on its way out
			if ended != 1 {
				t.Fatalf("the end was reported %d times, want once", ended)
			}
		})
	}
}
