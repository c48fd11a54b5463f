package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A snapshot a crash interrupted leaves its directory under a temporary
// name, which Raft never reads or removes; the node removes it on start
// and keeps its finished snapshot and its data.
func TestUnfinishedSnapshotRemovedOnStart(t *testing.T) {
	c := &testCluster{t: t, used: map[string]bool{}}
	tn := c.newNode(1, nil, 1, nil)
	tn.start(t)
	nodes := []*testNode{tn}
	leaderAmong(t, nodes)
	createTopic(t, nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, nodes, 5, 100)
	if err := tn.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	finished, err := tn.n.snaps.List()
	if err != nil || len(finished) != 1 {
		t.Fatalf("snapshots %v, %v; want one", finished, err)
	}
	want := readAll(t, tn, "t", 0)
	tn.crash(t)

	// What a kill during the next snapshot leaves behind.
	unfinished := filepath.Join(tn.dir, "raft", "snapshots", "2-99-1796400000000.tmp")
	if err := os.MkdirAll(unfinished, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unfinished, "state.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// Links to the partition's segment files: moved into the unfinished
	// snapshot, or still staged (a kill before Persist moved them).
	segs, _ := filepath.Glob(filepath.Join(tn.dir, "topics", "*", "*.log"))
	if len(segs) == 0 {
		t.Fatal("no partition segment file")
	}
	staged := filepath.Join(tn.dir, "raft", linkStagingDir, "links-1234")
	for _, dir := range []string{filepath.Join(unfinished, segmentsDir), staged} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(segs[0], filepath.Join(dir, "00000001.log")); err != nil {
			t.Fatal(err)
		}
	}

	tn.start(t)
	leaderAmong(t, nodes)
	for _, dir := range []string{unfinished, staged} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is still there after a restart (stat: %v)", dir, err)
		}
	}
	if st, err := os.Stat(segs[0]); err != nil || st.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Fatalf("the partition's segment file after the restart: %v; want it linked by the partition and the finished snapshot only", err)
	}
	if !tn.log().contains("removed a snapshot that a crash left unfinished") {
		t.Error("the removal is not logged")
	}
	after, err := tn.n.snaps.List()
	if err != nil || len(after) != 1 || after[0].ID != finished[0].ID {
		t.Fatalf("snapshots after the restart %v, %v; want the finished one (%s)", after, err, finished[0].ID)
	}
	if got := readAll(t, tn, "t", 0); !equalBatches(got, want) {
		t.Fatalf("after the restart the partition has %d batches, want the %d written", len(got), len(want))
	}
	if _, n := readSnapshot(t, tn, finished[0].ID); n != after[0].Size {
		t.Fatalf("the finished snapshot reads %d bytes, listed as %d", n, after[0].Size)
	}
}

// segmentFiles counts the Raft log's segment files.
func segmentFiles(t *testing.T, tn *testNode) int {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(tn.dir, "raft", "log"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if filepath.Ext(e.Name()) == ".seg" {
			n++
		}
	}
	return n
}

// With small Raft log segments (--raft-log-segment-bytes) the log spans
// several files, the compaction after a snapshot deletes the covered
// ones, and the node restarts on what is left with its data.
func TestSmallRaftLogSegmentsCompacted(t *testing.T) {
	c := &testCluster{t: t, used: map[string]bool{}}
	tn := c.newNode(1, nil, 1, func(cfg *Config) {
		cfg.LogSegmentBytes = 4096
		cfg.TrailingLogs = 5
	})
	tn.start(t)
	nodes := []*testNode{tn}
	leaderAmong(t, nodes)
	createTopic(t, nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, nodes, 60, 300)
	before := segmentFiles(t, tn)
	if before < 4 {
		t.Fatalf("%d segment files after 60 entries of 300 bytes with 4 KiB segments", before)
	}
	if err := tn.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if after := segmentFiles(t, tn); after >= before {
		t.Fatalf("%d segment files after the snapshot's compaction, %d before", after, before)
	}
	want := readAll(t, tn, "t", 0)
	tn.crash(t)
	tn.start(t)
	leaderAmong(t, nodes)
	p.produce(t, nodes, 1, 300)
	if got := readAll(t, tn, "t", 0); len(got) != len(want)+1 || !equalBatches(got[:len(want)], want) {
		t.Fatalf("after the restart the partition has %d batches, want %d and one more", len(got), len(want))
	}
}
