package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
)

// A deposed leader whose log runs past the snapshot the new leader sends it
// (it accepted writes while cut off, which never committed) installs that
// snapshot and then follows again. Before the fix its log store emptied
// itself on the install while Raft still counted on the uncommitted tail:
// the node refused every append, got the snapshot again, and never caught
// up (hashicorp/raft#697).
func TestDeposedLeaderWithALongerLogFollowsAfterASnapshot(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.TrailingLogs = 10
	})
	old := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 5, 50)
	converged(t, c.nodes, stateOf(old, "g"), "g")

	// Cut off, the leader appends a long tail that never commits.
	streamOf(t, old.raftAddr).setCut(true)
	const tail = 400
	var futures []Future
	for i := 0; i < tail; i++ {
		cmd := fsm.Encode(&fsm.CreateTopic{Name: "lost-" + strconv.Itoa(i), Partitions: 1})
		futures = append(futures, old.n.ProposeAsync(cmd))
	}
	for _, f := range futures {
		if _, err := f.Result(); err == nil {
			t.Fatal("a leader cut off from its followers acknowledged a write")
		}
	}
	oldLast, err := old.n.store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}

	// The others go on with fewer entries than that tail, and compact
	// their logs past the point where the two histories part.
	majority := without(c.nodes, old)
	p.produce(t, majority, 20, 50)
	commitOffset(t, majority, "g", "t", 0, 30)
	leader := leaderAmong(t, majority)
	if err := leader.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	snap, err := strconv.ParseUint(leader.n.raft.Stats()["last_snapshot_index"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if snap >= oldLast {
		t.Fatalf("the leader's snapshot (%d) covers the cut-off node's log (%d): the case is not set up", snap, oldLast)
	}
	stopsLeading(t, old)

	streamOf(t, old.raftAddr).setCut(false)
	eventually(t, 20*time.Second, "the cut-off node installed the leader's snapshot", func() error {
		if got, _ := strconv.ParseUint(old.n.raft.Stats()["last_snapshot_index"], 10, 64); got < snap {
			return fmt.Errorf("its last snapshot is at %d, the leader's at %d", got, snap)
		}
		return nil
	})
	// It follows again: later writes reach it.
	p.produce(t, c.nodes, 3, 50)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
	for i := 0; i < tail; i++ {
		if old.f.Topic("lost-"+strconv.Itoa(i)) != nil {
			t.Fatalf("a write the cut-off leader never got acknowledged appeared (lost-%d)", i)
		}
	}
	if !equalBatches(readAll(t, old, "t", 0), readAll(t, leader, "t", 0)) {
		t.Fatal("record data differs after the cut healed")
	}
	// Its Raft log and its own idea of it agree.
	last, _ := old.n.store.LastIndex()
	if raftLast, _ := strconv.ParseUint(old.n.raft.Stats()["last_log_index"], 10, 64); raftLast != last {
		t.Fatalf("Raft takes the log to end at %d; the log ends at %d", raftLast, last)
	}
}

// A leader that freezes in the middle of sending a follower a snapshot
// (its connections open, nothing more arriving) does not keep that
// follower from voting: Raft reads the snapshot on its main loop, and the
// read now gives up after the idle limit, so the follower and the third
// node elect a leader between them. Before, the follower sat in the read
// until the frozen leader's own send deadline ended the connection (about
// two and a half minutes for this snapshot), and with the leader silent no
// majority could form.
func TestFollowerVotesWhenItsLeaderFreezesMidSnapshot(t *testing.T) {
	c, leader, p := compactingCluster(t)

	f := anyFollower(t, c.nodes, leader)
	f.stop(t)
	rest := c.running()
	p.produce(t, rest, 64, 64<<10) // a snapshot of about 4 MiB
	leader = leaderAmong(t, rest)
	if err := leader.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if first, _ := leader.n.store.FirstIndex(); first < 20 {
		t.Fatalf("leader's log starts at %d: not compacted", first)
	}

	// The leader freezes once 1 MiB has gone to the follower: the
	// snapshot is under way (appends and heartbeats are far smaller).
	ls := streamOf(t, leader.raftAddr)
	ls.stallAt.Store(&stallTrigger{peer: f.raftAddr, after: 1 << 20})
	f.start(t)
	eventually(t, 30*time.Second, "the leader freezes while sending the snapshot", func() error {
		if !ls.stalled.Load() {
			return errors.New("still sending")
		}
		return nil
	})
	others := without(c.nodes, leader)
	eventually(t, 20*time.Second, "the follower and the third node elect a leader", func() error {
		for _, tn := range others {
			if tn.n.raft.State() == raft.Leader {
				return nil
			}
		}
		return errors.New("no leader among them")
	})

	ls.stallAt.Store(nil)
	ls.setStalled(false)
	streamOf(t, leader.raftAddr).setCut(true) // its stalled connections lost bytes: start them afresh
	streamOf(t, leader.raftAddr).setCut(false)
	p.produce(t, c.nodes, 3, 300)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
}

// compactingCluster starts three nodes that keep 10 Raft entries after a
// snapshot, with topic t (one partition) holding five batches written by
// the producer it returns, and returns the leader.
func compactingCluster(t *testing.T) (*testCluster, *testNode, *producer) {
	t.Helper()
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotEvery = 20
		cfg.TrailingLogs = 10
	})
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 5, 200)
	return c, leader, p
}

// cutShortStore fails the DeleteRange of the whole log once armed: the
// clean-up Raft makes after restoring a snapshot from the leader, which a
// crash can keep from happening.
type cutShortStore struct {
	logStable
	armed *atomic.Bool
}

func (s *cutShortStore) DeleteRange(min, max uint64) error {
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if s.armed.Load() && min <= first && max >= last {
		return errors.New("test: stopped before the log was emptied")
	}
	return s.logStable.DeleteRange(min, max)
}

func (s *cutShortStore) IsMonotonic() bool {
	m, ok := s.logStable.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// A follower stopped after it wrote and restored a snapshot from the
// leader, but before Raft emptied its log, finds on restart a snapshot
// newer than its whole log. It empties the log as the install would have,
// and catches up. Before, the leader's next append met a log that ended
// before the snapshot, and the node halted again (found by the nemesis).
func TestInstallCutShortBeforeTheLogWasEmptied(t *testing.T) {
	armed := map[int32]*atomic.Bool{}
	halts := make(chan int32, 8)
	c := newCluster(t, 3, func(cfg *Config) {
		id := cfg.NodeID
		if armed[id] == nil {
			armed[id] = &atomic.Bool{}
		}
		cfg.TrailingLogs = 10
		cfg.wrapStore = func(s logStable) logStable { return &cutShortStore{logStable: s, armed: armed[id]} }
		cfg.OnHalt = func(error) { halts <- id }
	})
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 5, 50)
	converged(t, c.nodes, stateOf(leader, "g"), "g")

	f := anyFollower(t, c.nodes, leader)
	f.stop(t)
	rest := c.running()
	p.produce(t, rest, 40, 50)
	commitOffset(t, rest, "g", "t", 0, 40)
	leader = leaderAmong(t, rest)
	if err := leader.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}

	armed[f.id].Store(true)
	f.start(t)
	select {
	case id := <-halts:
		if id != f.id {
			t.Fatalf("node %d halted, not the follower %d", id, f.id)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the follower did not install the leader's snapshot (no clean-up to stop)")
	}
	f.stop(t)
	armed[f.id].Store(false)
	f.start(t)
	p.produce(t, c.nodes, 3, 50)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
	want := readAll(t, leaderAmong(t, c.nodes), "t", 0)
	if got := readAll(t, f, "t", 0); len(got) != 48 || !equalBatches(got, want) {
		t.Fatalf("the follower serves %d batches, the leader %d (want 48)", len(got), len(want))
	}
	if err := f.n.HaltErr(); err != nil {
		t.Fatalf("the follower halted after the restart: %v", err)
	}
	if !f.log().contains("an install was cut short") {
		t.Fatalf("the follower's log does not say it emptied its log:\n%s", f.log())
	}
}
