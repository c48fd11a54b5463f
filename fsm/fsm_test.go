package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// fakeBatch returns bytes shaped like a magic-2 batch header plus a payload:
// the FSM only reads header fields, so the records need not be real.
func fakeBatch(records int32, maxTs int64, payload []byte) []byte {
	b := make([]byte, 61+len(payload))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(records-1))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTs))
	binary.BigEndian.PutUint32(b[57:], uint32(records))
	copy(b[61:], payload)
	return b
}

func openFSM(t *testing.T, dir string) *FSM {
	t.Helper()
	f, err := Open(Options{Dir: dir, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// commandLog is a random but reproducible sequence of commands.
func commandLog(seed uint64, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	topics := []string{"a", "b", "c"}
	var log [][]byte
	log = append(log, Encode(&InitCluster{ClusterID: "test-cluster"}))
	now := int64(1_700_000_000_000)
	seqs := map[[2]int64]int32{}
	for i := 0; i < n; i++ {
		if i == n/2 {
			// The first half runs at the baseline level (commands of later
			// levels are refused), the second at the latest.
			log = append(log, Encode(&SetFeatureLevel{Level: LatestLevel}))
		}
		now += int64(r.IntN(1000))
		t := topics[r.IntN(len(topics))]
		switch k := r.IntN(22); {
		case k == 0:
			var id [16]byte
			binary.BigEndian.PutUint64(id[:], uint64(i+1)) // unique, as random ids are
			configs := []Config{{"retention.ms", "1000"}}
			if t == "c" { // its appends stamp batches from LevelLogAppendTime on
				configs = append(configs, Config{"message.timestamp.type", "LogAppendTime"})
			}
			log = append(log, Encode(&CreateTopic{Name: t, ID: id, Partitions: int32(1 + r.IntN(3)), Configs: configs}))
		case k == 1:
			log = append(log, Encode(&DeleteTopic{Name: t}))
		case k == 2:
			log = append(log, Encode(&CreatePartitions{Name: t, Count: int32(1 + r.IntN(5))}))
		case k == 3:
			log = append(log, Encode(&InitProducerID{}))
		case k == 4:
			log = append(log, Encode(&TrimLog{Topic: t, Partition: int32(r.IntN(3)), Start: int64(r.IntN(50))}))
		case k == 5:
			log = append(log, Encode(&AlterConfigs{Name: t, Set: []Config{{"retention.bytes", fmt.Sprint(r.IntN(1 << 20))}}, Delete: []string{"retention.ms"}}))
		case k == 6:
			log = append(log, Encode(randomAlterTopicConfigs(r, t)))
		case k == 7:
			log = append(log, Encode(randomAlterClientQuotas(r)))
		case k == 8, k == 9, k == 10, k == 11:
			log = append(log, randomTxnCommand(r, k, t, now))
		case k == 12:
			log = append(log, Encode(&CreateACLs{ACLs: []ACL{randomACL(r), randomACL(r)}}))
		case k == 13:
			log = append(log, Encode(&DeleteACLs{ACLs: []ACL{randomACL(r)}}))
		default:
			part := int32(r.IntN(3))
			pid := int64(-1)
			var seq int32
			if r.IntN(2) == 0 {
				pid = int64(1 + r.IntN(3))
				key := [2]int64{pid, int64(part)}
				seq = seqs[key]
				if r.IntN(10) == 0 {
					seq += 7 // a gap: the FSM must refuse it the same way every time
				}
			}
			recs := int32(1 + r.IntN(5))
			payload := make([]byte, r.IntN(300))
			for j := range payload {
				payload[j] = byte(r.IntN(256))
			}
			data := fakeBatch(recs, now, payload)
			if pid >= 0 && r.IntN(2) == 0 {
				data[batchAttributesAt+1] |= attrTransactional
			}
			log = append(log, EncodeAppend(&Append{NowMs: now, Batches: []Batch{{
				Topic: t, Partition: part, Data: data, LastOffsetDelta: recs - 1,
				MaxTimestamp: now, ProducerID: pid, BaseSequence: seq,
			}}}))
			if pid >= 0 {
				seqs[[2]int64{pid, int64(part)}] = seq + recs
			}
		}
	}
	return log
}

// randomTxnCommand is one transaction command with random (often wrong)
// producer ids and epochs, so that every outcome occurs.
func randomTxnCommand(r *rand.Rand, k int, topic string, now int64) []byte {
	p := TxnProducer{TransactionalID: []string{"x", "y"}[r.IntN(2)], ProducerID: int64(1 + r.IntN(3)), Epoch: int16(r.IntN(2)), NowMs: now}
	switch k {
	case 8:
		return Encode(&InitTxnProducer{TransactionalID: p.TransactionalID, TimeoutMs: 500, NowMs: now, ExpectedID: -1, ExpectedEpoch: -1})
	case 9:
		if r.IntN(3) == 0 {
			return Encode(&TxnCommitOffsets{TxnProducer: p, Group: "g", Generation: -1, MaxGroups: 5,
				Offsets: []OffsetCommit{{Topic: topic, Partition: 0, Offset: int64(r.IntN(100)), LeaderEpoch: -1}}})
		}
		if r.IntN(2) == 0 {
			return Encode(&AddTxnGroup{TxnProducer: p, Group: "g"})
		}
		return Encode(&AddTxnPartitions{TxnProducer: p, Partitions: []TopicPartition{{topic, int32(r.IntN(3))}}})
	case 10:
		return Encode(&EndTxn{TxnProducer: p, Commit: r.IntN(2) == 0})
	}
	if r.IntN(4) == 0 {
		// An administrator's marker: at a random (often stale or newer)
		// epoch, often for a producer with no open transaction there.
		return Encode(&WriteTxnMarkers{NowMs: now, Markers: []TxnMarker{{ProducerID: p.ProducerID, Epoch: p.Epoch,
			Commit: r.IntN(2) == 0, CoordinatorEpoch: int32(r.IntN(3)) - 1,
			Partitions: []TopicPartition{{topic, int32(r.IntN(3))}, {"nope", 0}}}}})
	}
	if r.IntN(3) == 0 {
		return Encode(&ExpireProducers{NowMs: now, ExpirationMs: int64(r.IntN(3000))})
	}
	if r.IntN(2) == 0 {
		// Idle ids, and ids used since, by a random cutoff.
		return Encode(&ExpireTxnIDs{NowMs: now, ExpirationMs: int64(r.IntN(3000)), IDs: []string{"x", "y"}[:1+r.IntN(2)]})
	}
	return Encode(&ExpireTxn{TxnProducer: p, StartMs: now - int64(r.IntN(2000))})
}

// randomAlterTopicConfigs replaces a topic's configs with a random set, in
// random order (Encode sorts it), sometimes changing segment.bytes so that
// logs roll at a new size mid-way.
func randomAlterTopicConfigs(r *rand.Rand, topic string) *AlterTopicConfigs {
	c := &AlterTopicConfigs{Name: topic}
	if r.IntN(2) == 0 {
		c.Configs = append(c.Configs, Config{"retention.ms", fmt.Sprint(r.IntN(1 << 30))})
	}
	if r.IntN(2) == 0 {
		c.Configs = append(c.Configs, Config{"retention.bytes", fmt.Sprint(r.IntN(1<<20) - 1)})
	}
	if r.IntN(3) == 0 {
		c.Configs = append(c.Configs, Config{"segment.bytes", fmt.Sprint(512 + r.IntN(8192))})
	}
	if r.IntN(3) == 0 {
		c.Configs = append(c.Configs, Config{"cleanup.policy", "delete"})
	}
	r.Shuffle(len(c.Configs), func(i, j int) { c.Configs[i], c.Configs[j] = c.Configs[j], c.Configs[i] })
	return c
}

// restoredCopy restores src's snapshot into a fresh FSM and checks that
// the copy snapshots to the same bytes.
func restoredCopy(t *testing.T, src *FSM) *FSM {
	t.Helper()
	snap := snapshotBytes(t, src)
	dst := openFSM(t, t.TempDir())
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if got := snapshotBytes(t, dst); !bytes.Equal(got, snap) {
		t.Fatal("restored state differs from the snapshot")
	}
	return dst
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
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

func applyAll(f *FSM, log [][]byte) []any {
	out := make([]any, len(log))
	for i, e := range log {
		out[i] = f.Apply(uint64(i+1), e)
	}
	return out
}

func TestSameLogSameSnapshotBytes(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		log := commandLog(seed, 400)
		a, b := openFSM(t, t.TempDir()), openFSM(t, t.TempDir())
		ra, rb := applyAll(a, log), applyAll(b, log)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("seed %d: results differ", seed)
		}
		sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
		if !bytes.Equal(sa, sb) {
			t.Fatalf("seed %d: snapshots differ (%d vs %d bytes)", seed, len(sa), len(sb))
		}
	}
}

func TestSnapshotRestoreGivesEqualState(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		log := commandLog(seed, 300)
		src := openFSM(t, t.TempDir())
		applyAll(src, log[:200])
		snap := snapshotBytes(t, src)

		dst := openFSM(t, t.TempDir())
		if err := dst.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatalf("seed %d: restore: %v", seed, err)
		}
		if got := snapshotBytes(t, dst); !bytes.Equal(got, snap) {
			t.Fatalf("seed %d: restored state differs from the snapshot", seed)
		}
		// Both continue with the rest of the log and stay identical.
		for i := 200; i < len(log); i++ {
			src.Apply(uint64(i+1), log[i])
			dst.Apply(uint64(i+1), log[i])
		}
		if !bytes.Equal(snapshotBytes(t, src), snapshotBytes(t, dst)) {
			t.Fatalf("seed %d: diverged after restore", seed)
		}
	}
}

// A restart replays the Raft log over the last checkpoint. Entries already in
// the checkpoint are skipped, later ones applied again over files that may
// hold a torn or extra tail: the result must equal a node that never stopped.
func TestCheckpointAndReplayAfterCrash(t *testing.T) {
	log := commandLog(7, 400)
	ref := openFSM(t, t.TempDir())
	applyAll(ref, log)
	want := snapshotBytes(t, ref)

	dir := t.TempDir()
	f, err := Open(Options{Dir: dir, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	crashAfterCheckpoint(t, f, dir, log)

	g := openFSM(t, dir)
	if g.Applied() != 250 {
		t.Fatalf("applied after reopen = %d, want the checkpoint's 250", g.Applied())
	}
	for i := range log {
		g.Apply(uint64(i+1), log[i]) // raft replays from its snapshot; early ones are skipped
	}
	if got := snapshotBytes(t, g); !bytes.Equal(got, want) {
		t.Fatalf("state after crash and replay differs from a node that never stopped")
	}
}

// crashAfterCheckpoint applies log[:250] to f, checkpoints, applies up to
// 330 more, and leaves f's files as a crash would: data past the
// checkpoint, and a segment's tail torn as a kill during a write could.
func crashAfterCheckpoint(t *testing.T, f *FSM, dir string, log [][]byte) {
	t.Helper()
	for i := 0; i < 250; i++ {
		f.Apply(uint64(i+1), log[i])
	}
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(f, io.Discard); err != nil {
		t.Fatal(err)
	}
	s.Release()
	for i := 250; i < 330; i++ { // applied but never checkpointed
		f.Apply(uint64(i+1), log[i])
	}
	f.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "topics", "*", "*.log"))
	if len(segs) > 0 {
		fh, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			fh.Write([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 1})
			fh.Close()
		}
	}
}

// Raft persists a snapshot on its own goroutine while the FSM goroutine may
// already be restoring a newer one from the leader. The older snapshot's
// checkpoint, written last, must not name the old state: a restart would
// open the restored files as if they held it.
func TestSnapshotPersistedAfterARestoreLeavesTheRestoredCheckpoint(t *testing.T) {
	log := commandLog(11, 300)
	leader := openFSM(t, t.TempDir())
	applyAll(leader, log)
	newer := snapshotBytes(t, leader)

	dir := t.TempDir()
	f, err := Open(Options{Dir: dir, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 120; i++ {
		f.Apply(uint64(i+1), log[i])
	}
	older, err := f.Snapshot() // taken, not yet persisted
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(bytes.NewReader(newer)); err != nil {
		t.Fatal(err)
	}
	if err := older.Persist(f, io.Discard); !errors.Is(err, ErrSnapshotSuperseded) {
		t.Fatalf("persisting a snapshot taken before the restore: %v, want ErrSnapshotSuperseded", err)
	}
	older.Release()
	f.Close()

	g := openFSM(t, dir)
	if g.Applied() != uint64(len(log)) {
		t.Fatalf("applied after reopen = %d, want the restored snapshot's %d", g.Applied(), len(log))
	}
	if !bytes.Equal(snapshotBytes(t, g), newer) {
		t.Fatal("state after reopen differs from the restored snapshot")
	}
}

func TestRestoreKeepsLocalStateThatCoversSnapshot(t *testing.T) {
	log := commandLog(3, 200)
	dir := t.TempDir()
	f := openFSM(t, dir)
	applyAll(f, log[:100])
	snap := snapshotBytes(t, f)
	applyAll(f, nil)
	for i := 100; i < 200; i++ {
		f.Apply(uint64(i+1), log[i])
	}
	before := snapshotBytes(t, f)
	if err := f.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, f), before) {
		t.Fatal("restore of an older snapshot of the same cluster rolled local state back")
	}
}

func appendOne(t *testing.T, f *FSM, index uint64, pid int64, epoch int16, seq, recs int32) AppendResult {
	t.Helper()
	res := f.Apply(index, EncodeAppend(&Append{NowMs: 1, Batches: []Batch{{
		Topic: "t", Partition: 0, Data: fakeBatch(recs, 1, nil), LastOffsetDelta: recs - 1,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
	}}}))
	return res.(*AppendResults).Results[0]
}

func TestIdempotentProducerRules(t *testing.T) {
	f := openFSM(t, t.TempDir())
	f.Apply(1, Encode(&CreateTopic{Name: "t", Partitions: 1}))
	idx := uint64(1)
	next := func() uint64 { idx++; return idx }

	if r := appendOne(t, f, next(), 5, 0, 0, 3); r.Code != 0 || r.BaseOffset != 0 {
		t.Fatalf("first batch: %+v", r)
	}
	if r := appendOne(t, f, next(), 5, 0, 3, 2); r.Code != 0 || r.BaseOffset != 3 {
		t.Fatalf("second batch: %+v", r)
	}
	// A retry of the first batch is answered with its original offset and not written.
	if r := appendOne(t, f, next(), 5, 0, 0, 3); r.Code != 0 || r.BaseOffset != 0 {
		t.Fatalf("duplicate: %+v", r)
	}
	if got := f.Partition("t", 0).Log.Next(); got != 5 {
		t.Fatalf("high watermark after duplicate = %d, want 5", got)
	}
	if r := appendOne(t, f, next(), 5, 0, 9, 1); r.Code != ErrOutOfOrderSequence {
		t.Fatalf("gap: %+v", r)
	}
	if r := appendOne(t, f, next(), 6, 0, 4, 1); r.Code != ErrUnknownProducerID {
		t.Fatalf("unknown producer with sequence > 0: %+v", r)
	}
	if r := appendOne(t, f, next(), 5, 1, 0, 1); r.Code != 0 || r.BaseOffset != 5 {
		t.Fatalf("new epoch from 0: %+v", r)
	}
	if r := appendOne(t, f, next(), 5, 0, 5, 1); r.Code != ErrInvalidProducerEpoch {
		t.Fatalf("fenced epoch: %+v", r)
	}
	if r := appendOne(t, f, next(), -1, -1, -1, 2); r.Code != 0 || r.BaseOffset != 6 {
		t.Fatalf("non-idempotent batch: %+v", r)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {0}, {99}, {byte(KindAppend), 1, 2}, {byte(KindCreateTopic), 200},
		{byte(KindAlterTopicConfigs)}, {byte(KindAlterTopicConfigs), 1, 't', 5}, {byte(KindAlterTopicConfigs), 1, 't', 1, 3, 'a'}} {
		if _, err := Decode(b); err == nil {
			t.Errorf("Decode(%v) succeeded", b)
		}
	}
	f := openFSM(t, t.TempDir())
	if _, ok := f.Apply(1, []byte{byte(KindAppend), 0xff}).(error); !ok {
		t.Error("Apply of an undecodable entry did not return an error")
	}
}

func FuzzDecode(f *testing.F) {
	for _, e := range commandLog(1, 30) {
		f.Add(e)
	}
	f.Add(Encode(&AlterTopicConfigs{Name: "t", Configs: []Config{{"retention.ms", "1"}, {"cleanup.policy", "delete"}}}))
	f.Add(Encode(&AlterTopicConfigs{Name: "t"}))
	f.Add(Encode(&AlterScramCredentials{Deletions: []ScramDeletion{{"u", ScramSHA256}}, Upserts: []ScramUpsert{scramUpsert("v", ScramSHA512, 4096)}}))
	f.Add(Encode(&RemoveMembers{Group: "g", MemberIDs: []string{"m"}, NowMs: 1, Guard: &RemovalGuard{Generation: AnyGeneration, AsOf: 9}}))
	f.Add(Encode(&ExpireProducers{NowMs: 1_700_000_000_000, ExpirationMs: 86_400_000}))
	f.Add(Encode(&ExpireTxnIDs{NowMs: 1_700_000_000_000, ExpirationMs: 604_800_000, IDs: []string{"tx-1", "tx-2"}}))
	f.Add(Encode(&WriteTxnMarkers{NowMs: 1_700_000_000_000, Markers: []TxnMarker{
		{ProducerID: 7, Epoch: 3, Commit: false, CoordinatorEpoch: 0, Partitions: []TopicPartition{{"t", 0}, {"t", 2}}},
		{ProducerID: 8, Epoch: 0, Commit: true, CoordinatorEpoch: -1, Partitions: []TopicPartition{{"u", 1}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		// Encoding is canonical (config keys sorted), so the property is that
		// a decoded command re-encodes to bytes that decode and encode to
		// themselves.
		first := Encode(c)
		again, err := Decode(first)
		if err != nil {
			t.Fatalf("decoding an encoded command: %v", err)
		}
		if second := Encode(again); !bytes.Equal(first, second) {
			t.Fatalf("encoding is not stable: %x then %x", first, second)
		}
	})
}

func TestAlterTopicConfigsEncoding(t *testing.T) {
	a := Encode(&AlterTopicConfigs{Name: "t", Configs: []Config{{"segment.bytes", "1024"}, {"retention.ms", "5"}}})
	b := Encode(&AlterTopicConfigs{Name: "t", Configs: []Config{{"retention.ms", "5"}, {"segment.bytes", "1024"}}})
	if !bytes.Equal(a, b) {
		t.Fatalf("config order changes the encoding: %x vs %x", a, b)
	}
	// A key given twice (only a corrupt or hand-made entry does that) still
	// has one encoding whatever the order.
	var dup1, dup2 []Config
	for i := 0; i < 40; i++ {
		dup1 = append(dup1, Config{"k", fmt.Sprint(i % 7)})
		dup2 = append(dup2, Config{"k", fmt.Sprint((39 - i) % 7)})
	}
	if x, y := Encode(&AlterTopicConfigs{Name: "t", Configs: dup1}), Encode(&AlterTopicConfigs{Name: "t", Configs: dup2}); !bytes.Equal(x, y) {
		t.Fatal("repeated keys in another order change the encoding")
	}
	c, err := Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	want := &AlterTopicConfigs{Name: "t", Configs: []Config{{"retention.ms", "5"}, {"segment.bytes", "1024"}}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded %+v, want %+v", c, want)
	}
	// No configs at all is a valid command: every dynamic config removed.
	if c, err := Decode(Encode(&AlterTopicConfigs{Name: "t"})); err != nil || len(c.(*AlterTopicConfigs).Configs) != 0 {
		t.Fatalf("empty configs: %+v, %v", c, err)
	}
}

func TestAlterTopicConfigsReplacesAllAndSurvivesSnapshot(t *testing.T) {
	f := openFSM(t, t.TempDir())
	idx := uint64(0)
	apply := func(c Command) any {
		idx++
		return f.Apply(idx, Encode(c))
	}
	apply(&InitCluster{ClusterID: "c"})
	apply(&CreateTopic{Name: "t", Partitions: 2, Configs: []Config{{"retention.ms", "1000"}, {"max.message.bytes", "2000"}}})
	if r := apply(&AlterTopicConfigs{Name: "missing", Configs: []Config{{"retention.ms", "1"}}}); r.(*CodeResult).Code != ErrUnknownTopicOrPartition {
		t.Fatalf("unknown topic: %+v", r)
	}
	if r := apply(&AlterTopicConfigs{Name: "t", Configs: []Config{{"segment.bytes", "200"}, {"retention.bytes", "4096"}}}); r.(*CodeResult).Code != 0 {
		t.Fatalf("alter: %+v", r)
	}
	want := map[string]string{"segment.bytes": "200", "retention.bytes": "4096"}
	if got := f.Topic("t").Configs; !reflect.DeepEqual(got, want) {
		t.Fatalf("configs after replace = %v, want %v (keys not given are removed)", got, want)
	}
	// segment.bytes applies to the live logs at once: each 141-byte batch
	// now needs its own segment (with the default 4096 all four share one).
	for i := 0; i < 4; i++ {
		idx++
		f.Apply(idx, EncodeAppend(&Append{NowMs: 1, Batches: []Batch{{Topic: "t", Partition: 1, Data: fakeBatch(1, 1, make([]byte, 80)), ProducerID: -1}}}))
	}
	if n := len(f.Partition("t", 1).Log.Segments()); n != 4 {
		t.Fatalf("%d segments after 4 batches of 141 bytes with segment.bytes=200, want 4", n)
	}

	snap := snapshotBytes(t, f)
	g := openFSM(t, t.TempDir())
	if err := g.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if got := g.Topic("t").Configs; !reflect.DeepEqual(got, want) {
		t.Fatalf("configs after restore = %v, want %v", got, want)
	}
	if !bytes.Equal(snapshotBytes(t, g), snap) {
		t.Fatal("restored state differs from the snapshot")
	}

	// The checkpoint written with a snapshot carries them too.
	dir := t.TempDir()
	h, err := Open(Options{Dir: dir, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	h.Close()
	h = openFSM(t, dir)
	if got := h.Topic("t").Configs; !reflect.DeepEqual(got, want) {
		t.Fatalf("configs after reopening the checkpoint = %v, want %v", got, want)
	}

	// Replacing with nothing removes every dynamic config.
	if r := apply(&AlterTopicConfigs{Name: "t"}); r.(*CodeResult).Code != 0 || len(f.Topic("t").Configs) != 0 {
		t.Fatalf("empty replace: %+v, configs %v", r, f.Topic("t").Configs)
	}
}

// failingReader fails once n bytes were read, as a disk that fills (or a
// process killed) in the middle of installing a snapshot would.
type failingReader struct {
	r io.Reader
	n int
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, syscall.ENOSPC
	}
	if len(p) > r.n {
		p = p[:r.n]
	}
	n, err := r.r.Read(p)
	r.n -= n
	return n, err
}

// A snapshot install that fails halfway has already replaced part of the
// local state. The FSM must apply nothing more (fail-stop), and a restart
// must not start from the old checkpoint, whose partition data the install
// removed: it starts empty, for Raft to restore the snapshot again.
func TestFailedRestoreHaltsAndLeavesNoStaleCheckpoint(t *testing.T) {
	log := commandLog(5, 400)
	dir := t.TempDir()
	f, err := Open(Options{Dir: dir, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(f, log[:150])
	checkpointed := snapshotBytes(t, f)
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(f, io.Discard); err != nil {
		t.Fatal(err)
	}
	s.Release()

	src := openFSM(t, t.TempDir())
	applyAll(src, log[:300])
	snap := snapshotBytes(t, src)
	err = f.Restore(&failingReader{r: bytes.NewReader(snap), n: len(snap) * 2 / 3})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("restore failing halfway: %v, want ENOSPC", err)
	}
	if res, ok := f.Apply(301, log[300]).(*HaltError); !ok {
		t.Fatalf("apply after a failed restore: %v, want a halt", res)
	}
	f.Close()

	g := openFSM(t, dir)
	if g.Applied() != 0 && !bytes.Equal(snapshotBytes(t, g), checkpointed) {
		t.Fatalf("reopened at index %d with state that is not its checkpoint's", g.Applied())
	}
	if err := g.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, g), snap) {
		t.Fatal("restored state differs from the snapshot")
	}
}
