package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kgate/kgate/fsm"
)

// retainedFiles counts the Raft log files a node keeps for references.
func retainedFiles(t *testing.T, tn *testNode) int {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(tn.dir, "raft", "log", "retained"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// Nodes keeping their partitions as references to the Raft entries that
// carried the batches (--partition-storage=raft-log) serve the same bytes
// as ever through everything the log goes through: compaction after a
// snapshot (the entries named are kept aside), a crash and restart, a
// follower so far behind that it catches up by the leader's snapshot (its
// linked segments hold references, expanded from the leader's log as the
// snapshot is sent), and a topic's deletion, after which the entries kept
// for it go.
func TestReferencedPartitionsThroughCompactionRestartAndInstall(t *testing.T) {
	c := newClusterOf(t, 3, true, func(cfg *Config) {
		cfg.SnapshotEvery = 20
		cfg.TrailingLogs = 10
		cfg.LogSegmentBytes = 8 << 10
	})
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 5, 200)
	converged(t, c.nodes, stateOf(leader, "g"), "g")
	for _, tn := range c.nodes {
		if tn.f.Partition("t", 0).Log.FirstRef() == 0 {
			t.Fatalf("node %d copied the batches instead of naming them", tn.id)
		}
	}

	// A follower with a snapshot of its own falls far behind.
	f := anyFollower(t, c.nodes, leader)
	if err := f.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("follower snapshot: %v", err)
	}
	f.stop(t)
	rest := c.running()
	p.produce(t, rest, 120, 300)
	commitOffset(t, rest, "g", "t", 0, 200)
	leader = leaderAmong(t, rest)
	if err := leader.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	first, err := leader.n.store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first < 20 {
		t.Fatalf("leader's log starts at %d: not compacted", first)
	}
	if retainedFiles(t, leader) == 0 {
		t.Fatal("the leader compacted its log and kept no file for the references")
	}
	want := readAll(t, leader, "t", 0)
	if len(want) != 125 {
		t.Fatalf("leader serves %d batches, want 125", len(want))
	}

	// The leader crashes and comes back: the same batches.
	leader.crash(t)
	leader.start(t)
	leaderAmong(t, rest)
	if got := readAll(t, leader, "t", 0); !equalBatches(got, want) {
		t.Fatalf("after a crash the node serves %d batches that differ from the %d it served", len(got), len(want))
	}

	// The follower catches up from a snapshot of referenced partitions.
	leader = leaderAmong(t, rest)
	if err := leader.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	leaderSnap, err := strconv.ParseUint(leader.n.raft.Stats()["last_snapshot_index"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	list, err := leader.n.snapStore.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("leader's snapshots: %v %v", list, err)
	}
	if _, pin, err := leader.n.snapStore.readHeader(list[0].ID); err != nil || pin == 0 {
		t.Fatalf("the leader's snapshot names no Raft entry (pin %d, %v): it copied the batches", pin, err)
	}
	f.start(t)
	converged(t, c.nodes, stateOf(leader, "g"), "g")
	readyAll(t, c.nodes)
	eventually(t, 20*time.Second, "the follower installed the leader's snapshot", func() error {
		if snap, _ := strconv.ParseUint(f.n.raft.Stats()["last_snapshot_index"], 10, 64); snap < leaderSnap {
			return fmt.Errorf("its last snapshot is at %d, the leader's at %d", snap, leaderSnap)
		}
		return nil
	})
	for _, tn := range c.nodes {
		if got := readAll(t, tn, "t", 0); !equalBatches(got, want) {
			t.Fatalf("node %d serves %d batches, not the %d the leader served", tn.id, len(got), len(want))
		}
	}
	p.produce(t, c.nodes, 3, 300)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
	lead := readAll(t, leaderAmong(t, c.nodes), "t", 0)
	for _, tn := range c.nodes {
		if got := readAll(t, tn, "t", 0); len(got) != 128 || !equalBatches(got, lead) {
			t.Fatalf("node %d serves %d batches after the install, the leader %d", tn.id, len(got), len(lead))
		}
	}

	// Once the topic is gone and snapshots no longer name its batches,
	// no node keeps entries for it.
	if res := propose(t, c.nodes, fsm.Encode(&fsm.DeleteTopic{Name: "t"})); res == nil {
		t.Fatal("no answer to the deletion")
	}
	for i := range 3 { // Raft keeps two snapshots: both must be newer
		commitOffset(t, c.nodes, "g", "t2", 0, int64(i+1))
		converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
		snapshotNodes(t, c.nodes)
	}
	eventually(t, 20*time.Second, "no node keeps Raft entries for the deleted topic", func() error {
		for _, tn := range c.nodes {
			if n := retainedFiles(t, tn); n != 0 {
				return fmt.Errorf("node %d keeps %d files", tn.id, n)
			}
		}
		return nil
	})
}

// One topic kept long no longer keeps the whole Raft log: once the files
// kept for references pass RewritePinnedBytes and its batches are a small
// part of them, each node copies them into the partition and the files
// go, once the snapshots naming them are replaced. The partition serves
// the same bytes before and after, and after a crash. Where most of the
// kept files are batches still served, nothing is copied.
func TestLongKeptPartitionIsCopiedAndTheRaftLogFreed(t *testing.T) {
	c := newClusterOf(t, 3, true, func(cfg *Config) {
		cfg.SnapshotEvery = 20
		cfg.TrailingLogs = 10
		cfg.LogSegmentBytes = 8 << 10
		cfg.RewritePinnedBytes = 16 << 10
	})
	leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "kept", 1)
	createTopic(t, c.nodes, "short", 1)
	newProducer("kept", 1).produce(t, c.nodes, 5, 200)
	newProducer("short", 2).produce(t, c.nodes, 150, 300)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
	snapshotAll := func() {
		t.Helper()
		commitOffset(t, c.nodes, "g", "kept", 0, 1)
		converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
		snapshotNodes(t, c.nodes)
	}
	snapshotAll()
	want := readAll(t, c.nodes[0], "kept", 0)
	if len(want) != 5 {
		t.Fatalf("%d batches kept, want 5", len(want))
	}

	// Both topics served: what is kept is mostly batches served.
	for _, tn := range c.nodes {
		if tn.n.store.RetainedBytes() <= 16<<10 {
			t.Fatalf("node %d keeps %d bytes for references, want more than 16 KiB", tn.id, tn.n.store.RetainedBytes())
		}
		if err := tn.n.rewritePinned(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := rewritten(t, tn); n != 0 {
			t.Fatalf("node %d copied %v bytes of batches that are most of what it keeps", tn.id, n)
		}
	}

	// The short topic goes: "kept" alone holds the files.
	short := c.nodes[0].f.Partition("short", 0).Log.Next()
	propose(t, c.nodes, fsm.Encode(&fsm.TrimLog{Topic: "short", Partition: 0, Start: short}))
	eventually(t, 20*time.Second, "every node copied the kept topic's batches", func() error {
		for _, tn := range c.nodes {
			if r := tn.f.Partition("kept", 0).Log.FirstRef(); r != 0 {
				return fmt.Errorf("node %d: the kept topic still names entry %d", tn.id, r)
			}
			if n := rewritten(t, tn); n < 5*200 {
				return fmt.Errorf("node %d: %v bytes copied", tn.id, n)
			}
		}
		return nil
	})
	for range 2 { // Raft keeps two snapshots: both must be newer
		snapshotAll()
	}
	eventually(t, 20*time.Second, "no node keeps Raft log files for references", func() error {
		for _, tn := range c.nodes {
			if n := tn.n.store.RetainedBytes(); n != 0 {
				return fmt.Errorf("node %d keeps %d bytes", tn.id, n)
			}
		}
		return nil
	})
	for _, tn := range c.nodes {
		if got := readAll(t, tn, "kept", 0); !equalBatches(got, want) {
			t.Fatalf("node %d serves %d batches that differ from the %d it served", tn.id, len(got), len(want))
		}
	}
	c.nodes[1].crash(t)
	c.nodes[1].start(t)
	leaderAmong(t, c.nodes)
	if got := readAll(t, c.nodes[1], "kept", 0); !equalBatches(got, want) {
		t.Fatalf("after a crash node %d serves %d batches that differ from the %d it served", c.nodes[1].id, len(got), len(want))
	}
}

// snapshotNodes has every node take a snapshot now.
func snapshotNodes(t *testing.T, nodes []*testNode) {
	t.Helper()
	for _, tn := range nodes {
		if err := tn.n.raft.Snapshot().Error(); err != nil {
			t.Fatalf("node %d snapshot: %v", tn.id, err)
		}
	}
}

// rewritten is the node's kgate_partition_rewritten_bytes_total.
func rewritten(t *testing.T, tn *testNode) float64 {
	t.Helper()
	var m dto.Metric
	if err := tn.n.metrics.rewrittenBytes.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A node may change --partition-storage at any restart (an upgrade to the
// release where raft-log is the default, or an operator going back to
// copy): it keeps serving what it wrote the other way, the Raft log keeps
// the entries its old references name through compactions, and a copying
// node beside it serves the same batches at every step.
func TestNodeSwitchesPartitionStorage(t *testing.T) {
	c := newClusterOf(t, 3, false, func(cfg *Config) {
		cfg.SnapshotEvery = 20
		cfg.TrailingLogs = 10
		cfg.LogSegmentBytes = 8 << 10
	})
	leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	switcher, copier := c.nodes[0], c.nodes[1]
	same := func(when string) {
		t.Helper()
		converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
		want := readAll(t, copier, "t", 0)
		if got := readAll(t, switcher, "t", 0); !equalBatches(got, want) {
			t.Fatalf("%s: node %d serves %d batches that differ from the %d node %d serves", when, switcher.id, len(got), len(want), copier.id)
		}
	}
	p.produce(t, c.nodes, 30, 300)
	same("copying")

	for i, refs := range []bool{true, false, true} {
		switcher.stop(t)
		switcher.references = refs
		switcher.start(t)
		same(fmt.Sprintf("switch %d, restarted", i))
		for range 2 { // both kept snapshots taken since the switch
			p.produce(t, c.nodes, 30, 300)
			snapshotNodes(t, c.nodes)
		}
		if err := switcher.n.keepReferenced(); err != nil {
			t.Fatal(err)
		}
		p.produce(t, c.nodes, 30, 300)
		same(fmt.Sprintf("switch %d, after compactions", i))
		if switcher.f.Partition("t", 0).Log.FirstRef() == 0 {
			t.Fatalf("switch %d: node %d names no batch in its Raft log", i, switcher.id)
		}
		switcher.crash(t)
		switcher.start(t)
		same(fmt.Sprintf("switch %d, after a crash", i))
	}
	if retainedFiles(t, switcher) == 0 {
		t.Fatalf("node %d keeps no compacted Raft log file for the batches it names", switcher.id)
	}
}
