package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/fsm/partlog"
)

// snapModel is one replica whose snapshots are kept by reference, a
// leader replica that applies every entry first, and the full stream each
// stored snapshot must expand to: the bytes a full copy made when the
// snapshot was taken.
type snapModel struct {
	t       *testing.T
	rng     *rand.Rand
	dir     string
	entries [][]byte // the committed log; entry i has index i+1
	leader  *fsm.FSM
	f       *fsm.FSM
	a       *raftFSM
	store   *refSnapshotStore
	trans   raft.Transport
	// pending is a snapshot taken (links made) whose Persist has not run
	// yet, as when Raft's snapshot goroutine is slower than a Restore.
	pending *raftSnapshot
	// superseded: an install replaced the state after pending was taken,
	// so its Persist must fail with fsm.ErrSnapshotSuperseded and leave
	// nothing in the store.
	superseded bool
	want       map[string][]byte // snapshot id → its full stream
	references bool              // the replicas keep partitions as references to entries
	ops        []string
}

const modelTopic = "t"

func newSnapModel(t *testing.T, seed int64, references bool) *snapModel {
	m := &snapModel{t: t, rng: rand.New(rand.NewSource(seed)), dir: t.TempDir(), want: map[string][]byte{}, references: references}
	var err error
	if m.leader, err = fsm.Open(fsm.Options{Dir: t.TempDir(), SegmentBytes: 2048, References: references}); err != nil {
		t.Fatal(err)
	}
	m.leader.SetResolver(m)
	t.Cleanup(func() { m.leader.Close() })
	files, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(m.dir, "raft"), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	m.store = &refSnapshotStore{FileSnapshotStore: files, raftDir: filepath.Join(m.dir, "raft"), res: m}
	_, m.trans = raft.NewInmemTransport("")
	m.openFollower()
	t.Cleanup(func() { m.f.Close() })
	var id [16]byte
	m.rng.Read(id[:])
	m.commit(fsm.Encode(&fsm.CreateTopic{Name: modelTopic, ID: id, Partitions: 2,
		Configs: []fsm.Config{{Key: "segment.bytes", Value: "1500"}}}))
	return m
}

func (m *snapModel) openFollower() {
	f, err := fsm.Open(fsm.Options{Dir: m.dir, SegmentBytes: 2048, Logger: slog.New(slog.DiscardHandler), References: m.references})
	if err != nil {
		m.fail("open: %v", err)
	}
	f.SetResolver(m)
	m.f = f
	m.a = &raftFSM{f: f, snaps: m.store, log: slog.New(slog.DiscardHandler)}
}

func (m *snapModel) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("after %v: %s", m.ops, fmt.Sprintf(format, args...))
}

// ReadRef reads a batch a reference names from the model's log.
func (m *snapModel) ReadRef(r partlog.Ref, b []byte) error {
	if r.Index == 0 || r.Index > uint64(len(m.entries)) || int(r.Pos)+len(b) > len(m.entries[r.Index-1]) {
		return fmt.Errorf("no bytes %d+%d in entry %d", r.Pos, len(b), r.Index)
	}
	copy(b, m.entries[r.Index-1][r.Pos:])
	return nil
}

// commit appends an entry to the log and applies it on the leader.
func (m *snapModel) commit(entry []byte) {
	m.entries = append(m.entries, entry)
	if res := m.leader.Apply(uint64(len(m.entries)), entry); res != nil {
		if _, bad := res.(*fsm.HaltError); bad {
			m.fail("leader: %v", res)
		}
	}
}

func (m *snapModel) produce() {
	var batches []fsm.Batch
	for range 1 + m.rng.Intn(3) {
		n := int32(1 + m.rng.Intn(4))
		payload := make([]byte, 40+m.rng.Intn(300))
		m.rng.Read(payload)
		batches = append(batches, fsm.Batch{Topic: modelTopic, Partition: int32(m.rng.Intn(2)),
			Data: fakeBatch(n, int64(len(m.entries)), payload), LastOffsetDelta: n - 1,
			MaxTimestamp: int64(len(m.entries)), ProducerID: -1})
	}
	m.commit(fsm.EncodeAppend(&fsm.Append{NowMs: int64(len(m.entries)), Batches: batches}))
}

func (m *snapModel) trim() {
	p := int32(m.rng.Intn(2))
	start, next := m.leader.Partition(modelTopic, p).Log.Bounds()
	if next <= start {
		return
	}
	m.commit(fsm.Encode(&fsm.TrimLog{Topic: modelTopic, Partition: p, Start: start + m.rng.Int63n(next-start+1)}))
}

// catchUp applies up to n entries the follower has not applied.
func (m *snapModel) catchUp(n int) {
	for i := 0; i < n && int(m.f.Applied()) < len(m.entries); i++ {
		idx := m.f.Applied() + 1
		if res, bad := m.f.Apply(idx, m.entries[idx-1]).(*fsm.HaltError); bad {
			m.fail("apply %d: %v", idx, res)
		}
	}
}

// fullStream is what a full copy of f's state holds now.
func fullStream(t *testing.T, f *fsm.FSM) []byte {
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var buf bytes.Buffer
	if err := s.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// takeSnapshot links the follower's files, as Raft's FSM goroutine does.
func (m *snapModel) takeSnapshot() {
	if m.pending != nil || m.f.Applied() == 0 {
		return
	}
	for _, meta := range m.listed() {
		if meta.Index == m.f.Applied() {
			return // one name per index here (the store names by index and millisecond)
		}
	}
	want := fullStream(m.t, m.f)
	fs, err := m.a.Snapshot()
	if err != nil {
		m.fail("snapshot: %v", err)
	}
	rs := fs.(*raftSnapshot)
	if rs.links == nil {
		m.fail("the snapshot copies instead of linking")
	}
	m.pending = rs
	m.want["pending"] = want
}

// persist runs the pending snapshot's Persist, as Raft's snapshot
// goroutine does, into a new snapshot of the store.
func (m *snapModel) persist() {
	rs := m.pending
	if rs == nil {
		return
	}
	superseded := m.superseded
	m.pending, m.superseded = nil, false
	defer rs.Release()
	sink, err := m.store.Create(1, rs.s.Index, 1, raft.Configuration{}, 1, m.trans)
	if err != nil {
		m.fail("create: %v", err)
	}
	err = rs.Persist(sink)
	if superseded {
		if !errors.Is(err, fsm.ErrSnapshotSuperseded) {
			m.fail("persist of a snapshot an install replaced: %v, want fsm.ErrSnapshotSuperseded", err)
		}
		delete(m.want, "pending") // check fails if the store still lists it
		return
	}
	if err != nil {
		m.fail("persist: %v", err)
	}
	m.want[sink.ID()] = m.want["pending"]
	delete(m.want, "pending")
}

// install sends the leader's state as a full snapshot and restores it, as
// a follower does on InstallSnapshot.
func (m *snapModel) install() {
	stream := fullStream(m.t, m.leader)
	idx := m.leader.Applied()
	for _, meta := range m.listed() {
		if meta.Index == idx {
			return
		}
	}
	sink, err := m.store.Create(1, idx, 1, raft.Configuration{}, 1, m.trans)
	if err != nil {
		m.fail("create: %v", err)
	}
	if _, err := sink.Write(stream); err != nil {
		m.fail("write: %v", err)
	}
	if err := sink.Close(); err != nil {
		m.fail("close: %v", err)
	}
	m.want[sink.ID()] = stream
	if m.pending != nil && m.f.Applied() < idx {
		m.superseded = true // the restore replaces the state (fsm.Restore)
	}
	m.restoreFrom(sink.ID())
}

func (m *snapModel) restoreFrom(id string) {
	_, rc, err := m.store.Open(id)
	if err != nil {
		m.fail("open snapshot %s: %v", id, err)
	}
	defer rc.Close()
	if err := m.f.Restore(rc); err != nil {
		m.fail("restore %s: %v", id, err)
	}
}

// restart stops the follower as a kill would (a snapshot not persisted is
// lost) and starts it as a node does: the checkpoint, then Raft's latest
// snapshot restored over it.
func (m *snapModel) restart() {
	if m.pending != nil {
		m.pending.Release()
		m.pending, m.superseded = nil, false
		delete(m.want, "pending")
	}
	m.f.Close()
	if err := removeStagedLinks(m.store.raftDir, slog.New(slog.DiscardHandler)); err != nil {
		m.fail("%v", err)
	}
	m.openFollower()
	if list := m.listed(); len(list) > 0 {
		m.restoreFrom(list[0].ID)
	}
}

func (m *snapModel) listed() []*raft.SnapshotMeta {
	list, err := m.store.List()
	if err != nil {
		m.fail("list: %v", err)
	}
	return list
}

// check expands every stored snapshot and compares it with the full copy.
func (m *snapModel) check() {
	m.t.Helper()
	for _, meta := range m.listed() {
		_, rc, err := m.store.Open(meta.ID)
		if err != nil {
			m.fail("open snapshot %s: %v", meta.ID, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			m.fail("read snapshot %s: %v", meta.ID, err)
		}
		if want, ok := m.want[meta.ID]; !ok {
			m.fail("snapshot %s: not one the model made", meta.ID)
		} else if !bytes.Equal(got, want) {
			m.fail("snapshot %s (index %d) expands to %d bytes that differ from the %d its full copy held", meta.ID, meta.Index, len(got), len(want))
		}
	}
}

// TestLinkedSnapshotsKeepTheirBytes drives a replica through random
// appends, trims, linked snapshots, restarts (which cut the partition files
// back to the checkpoint), and installs of the leader's snapshot, some of
// them while a linked snapshot's Persist is still to run (that Persist
// must then fail as superseded and store nothing), and checks after every
// step that each stored snapshot expands to the bytes a full copy held when
// it was taken, and at the end that the replica caught up holds the
// leader's state.
//
// With references, the replicas' partitions name the batches in the log's
// entries, and the snapshots' linked files hold those references.
func TestLinkedSnapshotsKeepTheirBytes(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for _, refs := range []bool{false, true} {
		for seed := range seeds {
			t.Run(fmt.Sprintf("references=%v/%d", refs, seed), func(t *testing.T) { linkedSnapshotsKeepTheirBytes(t, int64(seed), refs) })
		}
	}
}

func linkedSnapshotsKeepTheirBytes(t *testing.T, seed int64, refs bool) {
	m := newSnapModel(t, seed, refs)
	for range 150 {
		var op string
		switch r := m.rng.Intn(100); {
		case r < 40:
			op = "produce"
			m.produce()
		case r < 45:
			op = "trim"
			m.trim()
		case r < 65:
			op = "catch-up"
			m.catchUp(1 + m.rng.Intn(8))
		case r < 77:
			op = "snapshot"
			m.takeSnapshot()
		case r < 87:
			op = "persist"
			m.persist()
		case r < 94:
			op = "restart"
			m.restart()
		default:
			op = "install"
			m.install()
		}
		m.ops = append(m.ops, op)
		m.check()
	}
	m.persist()
	m.catchUp(len(m.entries))
	m.check()
	if got, want := fullStream(t, m.f), fullStream(t, m.leader); !bytes.Equal(got, want) {
		m.fail("the replica caught up to %d holds a state of %d bytes, the leader's is %d bytes and differs", m.f.Applied(), len(got), len(want))
	}
	if refs && m.f.Pin() > m.f.Applied() && m.leader.Pin() > m.leader.Applied() {
		m.fail("neither replica holds a reference")
	}
}
