package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/fsm"
)

// writeBytes is what this process has caused to be written to storage.
func writeBytes(t *testing.T) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatalf("reading /proc/self/io: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no write_bytes in /proc/self/io: %q", raw)
	return 0
}

// readSnapshot opens a stored snapshot as Raft would to send it, and
// restores it into a new FSM.
func readSnapshot(t *testing.T, tn *testNode, id string) (*fsm.FSM, int64) {
	t.Helper()
	meta, rc, err := tn.n.snaps.Open(id)
	if err != nil {
		t.Fatalf("open snapshot %s: %v", id, err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	n, err := io.Copy(&buf, rc)
	if err != nil {
		t.Fatalf("read snapshot %s: %v", id, err)
	}
	if n != meta.Size {
		t.Fatalf("snapshot %s: read %d bytes, its metadata says %d", id, n, meta.Size)
	}
	f, err := fsm.Open(fsm.Options{Dir: t.TempDir(), SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatalf("restore snapshot %s: %v", id, err)
	}
	return f, n
}

func batchesOf(t *testing.T, f *fsm.FSM, topic string) [][]byte {
	t.Helper()
	return readAll(t, &testNode{id: 0, f: f}, topic, 0)
}

// A snapshot of a node holding megabytes of records writes its metadata,
// not the records: the segment files are linked. Retention and a topic
// deletion after it do not take the bytes away: the snapshot still reads
// in full, and a node that joins after the log was compacted gets the
// records from it, at the same offsets.
func TestSnapshotLinksSegmentFiles(t *testing.T) {
	c, leader := singleNode(t, func(cfg *Config) { cfg.TrailingLogs = 5 })
	nodes := []*testNode{leader}
	createTopic(t, nodes, "keep", 1)
	createTopic(t, nodes, "gone", 1)
	newProducer("keep", 1).produce(t, nodes, 160, 32<<10)
	newProducer("gone", 2).produce(t, nodes, 40, 32<<10)
	data := leader.f.DataBytes()
	if data < 6<<20 {
		t.Fatalf("%d bytes of records, want over 6 MiB", data)
	}
	keep, gone := readAll(t, leader, "keep", 0), readAll(t, leader, "gone", 0)

	before := writeBytes(t)
	if err := leader.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	written := writeBytes(t) - before
	t.Logf("a snapshot of %d bytes of records wrote %d bytes", data, written)
	if written > 256<<10 {
		t.Fatalf("a snapshot of %d bytes of records wrote %d bytes: it copied them", data, written)
	}
	list, err := leader.n.snaps.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("snapshots %v, %v; want one", list, err)
	}
	if list[0].Size < data {
		t.Fatalf("the snapshot's size is %d, less than the %d bytes of records it covers", list[0].Size, data)
	}
	if first, _ := leader.n.store.FirstIndex(); first < 100 {
		t.Fatalf("the Raft log starts at %d: not compacted", first)
	}

	// Retention on one topic, the other deleted: their segment files go.
	propose(t, nodes, fsm.Encode(&fsm.TrimLog{Topic: "keep", Partition: 0, Start: 200}))
	propose(t, nodes, fsm.Encode(&fsm.DeleteTopic{Name: "gone"}))
	if got := leader.f.DataBytes(); got > data/2 {
		t.Fatalf("%d bytes of records left after retention and deletion, from %d", got, data)
	}
	restored, n := readSnapshot(t, leader, list[0].ID)
	if n != list[0].Size {
		t.Fatalf("the snapshot read %d bytes, listed as %d", n, list[0].Size)
	}
	if got := batchesOf(t, restored, "keep"); !equalBatches(got, keep) {
		t.Fatalf("the snapshot holds %d batches of keep, %d were written", len(got), len(keep))
	}
	if got := batchesOf(t, restored, "gone"); !equalBatches(got, gone) {
		t.Fatalf("the snapshot holds %d batches of the deleted topic, %d were written", len(got), len(gone))
	}

	// A new node gets the snapshot (the log behind it is compacted).
	newcomer := c.newNode(2, []string{leader.gossipAddr}, 1, nil)
	newcomer.start(t)
	nodes = append(nodes, newcomer)
	eventually(t, 30*time.Second, "the newcomer installed the leader's snapshot", func() error {
		if idx, _ := strconv.ParseUint(newcomer.n.raft.Stats()["last_snapshot_index"], 10, 64); idx < list[0].Index {
			return fmt.Errorf("its last snapshot is at %d, the leader's at %d", idx, list[0].Index)
		}
		return nil
	})
	converged(t, nodes, stateOf(leader))
	if got, want := readAll(t, newcomer, "keep", 0), readAll(t, leader, "keep", 0); len(want) == 0 || !equalBatches(got, want) {
		t.Fatalf("the newcomer has %d batches of keep, the leader %d", len(got), len(want))
	}
	if newcomer.f.Partition("gone", 0) != nil {
		t.Fatal("the newcomer has the deleted topic")
	}
}

// A snapshot written in full (by an earlier release, or `kgate snapshot
// restore`) is read as it is; the node's own next snapshot links its
// segment files, and a restart starts from either.
func TestFullSnapshotOnDiskRestores(t *testing.T) {
	_, a := singleNode(t, nil)
	createTopic(t, []*testNode{a}, "t", 1)
	newProducer("t", 1).produce(t, []*testNode{a}, 30, 2000)
	want := readAll(t, a, "t", 0)
	meta, rc, err := a.n.OpenSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	err = WriteSnapshotFile(&file, meta, rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}

	c := &testCluster{t: t, used: map[string]bool{}}
	b := c.newNode(1, nil, 1, nil)
	if _, err := RestoreSnapshot(b.dir, 1, b.raftAddr, &file); err != nil {
		t.Fatal(err)
	}
	states, _ := filepath.Glob(filepath.Join(b.dir, "raft", "snapshots", "*", "state.bin"))
	if len(states) != 1 {
		t.Fatalf("restored snapshots %v", states)
	}
	if head := readHead(t, states[0]); head != "KGATESN1" {
		t.Fatalf("the restored snapshot starts %q, want the full form", head)
	}
	b.start(t)
	nodes := []*testNode{b}
	leaderAmong(t, nodes)
	if got := readAll(t, b, "t", 0); !equalBatches(got, want) {
		t.Fatalf("restored node has %d batches, want %d", len(got), len(want))
	}
	p := newProducer("t", 2)
	p.produce(t, nodes, 5, 2000)
	if err := b.n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	list, err := b.n.snaps.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("snapshots %v, %v; want the restored and the new one", list, err)
	}
	own := list[0]
	if list[1].Index > own.Index {
		own = list[1]
	}
	if head := readHead(t, filepath.Join(b.dir, "raft", "snapshots", own.ID, "state.bin")); head != "KGATESR1" {
		t.Fatalf("the node's own snapshot starts %q, want the reference form", head)
	}
	want = readAll(t, b, "t", 0)
	b.crash(t)
	b.start(t)
	leaderAmong(t, nodes)
	if got := readAll(t, b, "t", 0); !equalBatches(got, want) {
		t.Fatalf("after a restart the node has %d batches, want %d", len(got), len(want))
	}
	for _, m := range list {
		if _, n := readSnapshot(t, b, m.ID); n != m.Size {
			t.Fatalf("snapshot %s read %d bytes, listed as %d", m.ID, n, m.Size)
		}
	}
}

func readHead(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 8)
	if _, err := io.ReadFull(bufio.NewReader(f), head); err != nil {
		t.Fatal(err)
	}
	return string(head)
}

// A snapshot whose linked file no longer holds the bytes it records fails
// to read, rather than yielding a short stream.
func TestSnapshotWithShortLinkFails(t *testing.T) {
	_, tn := singleNode(t, nil)
	createTopic(t, []*testNode{tn}, "t", 1)
	newProducer("t", 1).produce(t, []*testNode{tn}, 10, 2000)
	if err := tn.n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	list, err := tn.n.snaps.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("snapshots %v, %v", list, err)
	}
	links, _ := filepath.Glob(filepath.Join(tn.dir, "raft", "snapshots", list[0].ID, segmentsDir, "*.log"))
	if len(links) == 0 {
		t.Fatal("the snapshot links no segment file")
	}
	for _, missing := range []bool{false, true} {
		last := links[len(links)-1]
		if missing {
			err = os.Remove(last)
		} else {
			// What a damaged disk (or a tool) could do to a file.
			err = os.Truncate(last, 100)
		}
		if err != nil {
			t.Fatal(err)
		}
		meta, rc, err := tn.n.snaps.Open(list[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err == nil {
			t.Fatalf("a snapshot with a damaged link (missing: %v) read %d of %d bytes without an error", missing, n, meta.Size)
		}
	}
}

// A node whose checkpoint is gone (a restore that stopped halfway removes
// it first) starts empty and restores its own snapshot, which reads the
// records from its links: the partition files themselves were removed.
func TestRestoreFromLinkedSnapshotWithoutCheckpoint(t *testing.T) {
	_, tn := singleNode(t, func(cfg *Config) { cfg.TrailingLogs = 5 })
	nodes := []*testNode{tn}
	createTopic(t, nodes, "t", 2)
	p := newProducer("t", 1)
	p.produce(t, nodes, 40, 3000)
	if err := tn.n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	p.produce(t, nodes, 3, 3000) // replayed from the log after the snapshot
	want := readAll(t, tn, "t", 0)
	tn.crash(t)
	if err := os.Remove(filepath.Join(tn.dir, "fsm", "checkpoint")); err != nil {
		t.Fatal(err)
	}
	tn.start(t)
	leaderAmong(t, nodes)
	eventually(t, 20*time.Second, "the node replayed its log", func() error {
		if got := tn.f.Partition("t", 0); got == nil || got.Log.Next() < int64(2*len(want)) {
			return fmt.Errorf("partition t/0 not back yet")
		}
		return nil
	})
	if got := readAll(t, tn, "t", 0); !equalBatches(got, want) {
		t.Fatalf("after the restore the partition has %d batches, want the %d written", len(got), len(want))
	}
}

// A damaged reference form (cut short anywhere, or a length changed) is
// refused with an error, never read as a shorter snapshot.
func TestDamagedSnapshotReferenceRefused(t *testing.T) {
	ref := &snapshotRef{index: 7, meta: []byte("metadata"), parts: [][]refFile{
		{{name: "segments/00000001.log", pos: 0, end: 100}, {name: "segments/00000002.log", pos: 12, end: 40}},
		nil,
		{{name: "segments/00000003.log", pos: 5, end: 6}},
	}}
	ref.size = ref.expandedSize()
	raw := ref.encode()
	back, err := decodeRef(raw)
	if err != nil || back.size != ref.size || back.index != 7 || len(back.parts) != 3 || back.parts[0][1] != ref.parts[0][1] {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, ref)
	}
	for n := range len(raw) {
		if _, err := decodeRef(raw[:n]); err == nil {
			t.Fatalf("a reference cut to %d of %d bytes decoded", n, len(raw))
		}
	}
	// Form 2: a file with references serves more than its bytes; its pin
	// comes back.
	ref2 := &snapshotRef{index: 9, pin: 3, meta: []byte("m"), parts: [][]refFile{
		{{name: "segments/00000001.log", pos: 0, end: 154, served: 5000, refs: true}, {name: "segments/00000002.log", pos: 0, end: 70}},
	}}
	ref2.size = ref2.expandedSize()
	raw2 := ref2.encode()
	back, err = decodeRef(raw2)
	if err != nil || back.pin != 3 || back.size != ref2.size || back.parts[0][0] != ref2.parts[0][0] || back.parts[0][1].size() != 70 {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, ref2)
	}
	for n := range len(raw2) {
		if _, err := decodeRef(raw2[:n]); err == nil {
			t.Fatalf("a form 2 reference cut to %d of %d bytes decoded", n, len(raw2))
		}
	}
	for _, damage := range []struct {
		what string
		edit func(b []byte) []byte
	}{
		{"a served size changed", func([]byte) []byte {
			bad := *ref2
			bad.parts = [][]refFile{append([]refFile(nil), ref2.parts[0]...)}
			bad.parts[0][0].served++
			return bad.encode()
		}},
		{"a flag neither 0 nor 1", func(b []byte) []byte { b[len(b)-1] = 2; return b }},
		{"a file without references serving more than its bytes", func(b []byte) []byte { b[len(b)-2]++; return b }},
	} {
		if _, err := decodeRef(damage.edit(bytes.Clone(raw2))); err == nil {
			t.Errorf("form 2, %s: decoded", damage.what)
		}
	}
	for _, damage := range []struct {
		what string
		edit func(r *snapshotRef)
	}{
		{"a range made shorter", func(r *snapshotRef) { r.parts[0][0].end-- }},
		{"a file escaping the snapshot", func(r *snapshotRef) { r.parts[2][0].name = "../../topics/x.log" }},
		{"a range ending before it starts", func(r *snapshotRef) { r.parts[2][0].end = 1 }},
	} {
		bad := *ref
		bad.parts = [][]refFile{append([]refFile(nil), ref.parts[0]...), nil, append([]refFile(nil), ref.parts[2]...)}
		damage.edit(&bad)
		if _, err := decodeRef(bad.encode()); err == nil {
			t.Errorf("%s: decoded", damage.what)
		}
	}
}
