package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/kgate/kgate/fsm/partlog"
)

// logEntries stands in for the Raft log: entry i is log[i-1].
type logEntries [][]byte

func (l logEntries) ReadRef(r partlog.Ref, b []byte) error {
	if r.Index == 0 || r.Index > uint64(len(l)) {
		return fmt.Errorf("no entry %d", r.Index)
	}
	e := l[r.Index-1]
	if uint64(r.Pos)+uint64(r.Len) > uint64(len(e)) {
		return fmt.Errorf("entry %d has %d bytes", r.Index, len(e))
	}
	copy(b, e[r.Pos:r.Pos+r.Len])
	return nil
}

func openRefFSM(t *testing.T, dir string, log [][]byte) *FSM {
	t.Helper()
	f, err := Open(Options{Dir: dir, SegmentBytes: 4096, References: true})
	if err != nil {
		t.Fatal(err)
	}
	f.SetResolver(logEntries(log))
	t.Cleanup(func() { f.Close() })
	return f
}

// refsServed counts the partitions whose files hold references.
func refsServed(f *FSM) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			if p.Log.FirstRef() != 0 {
				n++
			}
		}
	}
	return n
}

// An FSM that appends references to the Raft entries answers every entry
// as one that copies the batches, serves the same bytes, and streams the
// same snapshot: how a node keeps its partitions is its own business.
func TestReferencesKeepResultsAndSnapshotBytes(t *testing.T) {
	withRefs := 0
	for seed := uint64(1); seed <= 12; seed++ {
		log := commandLog(seed, 400)
		a, b := openFSM(t, t.TempDir()), openRefFSM(t, t.TempDir(), log)
		ra, rb := applyAll(a, log), applyAll(b, log)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("seed %d: results differ", seed)
		}
		if sa, sb := snapshotBytes(t, a), snapshotBytes(t, b); !bytes.Equal(sa, sb) {
			t.Fatalf("seed %d: snapshots differ (%d vs %d bytes)", seed, len(sa), len(sb))
		}
		for name, tp := range a.topics {
			for i, p := range tp.Partitions {
				got, err := b.Partition(name, int32(i)).Log.Read(p.Log.Start(), 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				want, err := p.Log.Read(p.Log.Start(), 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d: %s/%d reads %d bytes, the copying FSM %d", seed, name, i, len(got), len(want))
				}
				if r := b.Partition(name, int32(i)).Log.FirstRef(); r != 0 && b.Pin() > r {
					t.Fatalf("seed %d: pin %d above the reference to entry %d of %s/%d", seed, b.Pin(), r, name, i)
				}
			}
		}
		if a.DataBytes() != b.DataBytes() {
			t.Fatalf("seed %d: %d bytes of data, the copying FSM %d", seed, b.DataBytes(), a.DataBytes())
		}
		withRefs += refsServed(b)
	}
	if withRefs == 0 {
		t.Fatal("no partition held a reference: the test exercised nothing")
	}
}

// With nothing referenced, the pin is the next entry to apply.
func TestPinWithoutReferencesIsTheNextEntry(t *testing.T) {
	f := openRefFSM(t, t.TempDir(), nil)
	f.Apply(1, Encode(&InitCluster{ClusterID: "c"}))
	f.Apply(2, Encode(&CreateTopic{Name: "t", Partitions: 1}))
	if f.Pin() != 3 {
		t.Fatalf("pin %d, want 3", f.Pin())
	}
	log := make(logEntries, 3)
	log[2] = EncodeAppend(&Append{NowMs: 1, Batches: []Batch{{Topic: "t", Data: fakeBatch(1, 1, []byte("r")), ProducerID: -1}}})
	f.SetResolver(log)
	f.Apply(3, log[2])
	f.Apply(4, Encode(&InitProducerID{}))
	if f.Pin() != 3 {
		t.Fatalf("pin %d with a reference to entry 3, want 3", f.Pin())
	}
	f.Apply(5, Encode(&DeleteTopic{Name: "t"}))
	if f.Pin() != 6 {
		t.Fatalf("pin %d once the topic is gone, want 6", f.Pin())
	}
}

// A restart of an FSM holding references over its checkpoint, with files
// past it and a torn tail, replays to the state of one that never stopped;
// and a snapshot of it restores elsewhere as batches.
func TestReferencesSurviveCheckpointReplayAndRestore(t *testing.T) {
	log := commandLog(7, 400)
	ref := openFSM(t, t.TempDir())
	applyAll(ref, log)
	want := snapshotBytes(t, ref)

	dir := t.TempDir()
	f, err := Open(Options{Dir: dir, SegmentBytes: 4096, References: true})
	if err != nil {
		t.Fatal(err)
	}
	f.SetResolver(logEntries(log))
	crashAfterCheckpoint(t, f, dir, log)
	g := openRefFSM(t, dir, log)
	for i := range log {
		g.Apply(uint64(i+1), log[i])
	}
	if refsServed(g) == 0 {
		t.Fatal("no partition held a reference")
	}
	snap := snapshotBytes(t, g)
	if !bytes.Equal(snap, want) {
		t.Fatal("state after crash and replay differs from a copying node that never stopped")
	}
	// A follower installing it holds batches, not references to entries
	// it does not have.
	dst := openRefFSM(t, t.TempDir(), nil)
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if refsServed(dst) != 0 {
		t.Fatal("a restored snapshot left references")
	}
	if got := snapshotBytes(t, dst); !bytes.Equal(got, snap) {
		t.Fatal("restored state differs from the snapshot")
	}
}
