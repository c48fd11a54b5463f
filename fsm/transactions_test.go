package fsm

import (
	"bytes"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnHarness drives an FSM at LevelTransactions with one topic "t" of two
// partitions.
type txnHarness struct {
	t   *testing.T
	f   *FSM
	idx uint64
	now int64
}

func newTxnHarness(t *testing.T) *txnHarness {
	h := &txnHarness{t: t, f: openFSM(t, t.TempDir()), now: 1_000}
	h.apply(&SetFeatureLevel{Level: LevelTransactions})
	h.apply(&CreateTopic{Name: "t", Partitions: 2})
	return h
}

func (h *txnHarness) apply(c Command) any {
	h.t.Helper()
	h.idx++
	var entry []byte
	if a, ok := c.(*Append); ok {
		entry = EncodeAppend(a)
	} else {
		entry = Encode(c)
	}
	res := h.f.Apply(h.idx, entry)
	if he, ok := res.(*HaltError); ok {
		h.t.Fatalf("halted: %v", he)
	}
	return res
}

func (h *txnHarness) txn(c Command) *TxnResult {
	h.t.Helper()
	return h.apply(c).(*TxnResult)
}

func (h *txnHarness) init(id string, expectedID int64, expectedEpoch int16) *TxnResult {
	h.t.Helper()
	return h.txn(&InitTxnProducer{TransactionalID: id, TimeoutMs: 60_000, NowMs: h.now, ExpectedID: expectedID, ExpectedEpoch: expectedEpoch})
}

func (h *txnHarness) prod(id string, r *TxnResult) TxnProducer {
	return TxnProducer{TransactionalID: id, ProducerID: r.ProducerID, Epoch: r.Epoch, NowMs: h.now}
}

// produce writes a transactional batch of n records to t/p.
func (h *txnHarness) produce(p int32, pid int64, epoch int16, seq, n int32) AppendResult {
	h.t.Helper()
	data := fakeBatch(n, h.now, nil)
	data[batchAttributesAt+1] |= attrTransactional
	res := h.apply(&Append{NowMs: h.now, Batches: []Batch{{Topic: "t", Partition: p, Data: data, LastOffsetDelta: n - 1,
		MaxTimestamp: h.now, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}}})
	return res.(*AppendResults).Results[0]
}

func TestInitTxnProducerEpochsAndFencing(t *testing.T) {
	h := newTxnHarness(t)
	first := h.init("tx", -1, -1)
	if first.Code != 0 || first.ProducerID < 1 || first.Epoch != 0 {
		t.Fatalf("first init: %+v", first)
	}
	second := h.init("tx", -1, -1) // a second producer with the same id
	if second.Code != 0 || second.ProducerID != first.ProducerID || second.Epoch != 1 {
		t.Fatalf("second init: %+v", second)
	}
	tps := []TopicPartition{{"t", 0}}
	if r := h.txn(&AddTxnPartitions{TxnProducer: h.prod("tx", first), Partitions: tps}); r.Code != ErrProducerFenced {
		t.Fatalf("zombie AddPartitions: %+v, want PRODUCER_FENCED", r)
	}
	if r := h.txn(&EndTxn{TxnProducer: h.prod("tx", first), Commit: true}); r.Code != ErrProducerFenced {
		t.Fatalf("zombie EndTxn: %+v, want PRODUCER_FENCED", r)
	}
	// KIP-360: a producer naming a producer id that is not this one's is fenced.
	if r := h.init("tx", first.ProducerID+100, 0); r.Code != ErrProducerFenced {
		t.Fatalf("init with a foreign producer id: %+v", r)
	}
	// Naming the current id and epoch bumps it; naming the previous epoch is
	// a retry of that bump and gets the same answer.
	third := h.init("tx", second.ProducerID, second.Epoch)
	if third.Code != 0 || third.Epoch != 2 {
		t.Fatalf("init with the current epoch: %+v", third)
	}
	if r := h.init("tx", second.ProducerID, second.Epoch); r.Code != 0 || r.Epoch != 2 {
		t.Fatalf("retried init: %+v", r)
	}
	if r := h.init("tx", second.ProducerID, 0); r.Code != ErrProducerFenced {
		t.Fatalf("init with an old epoch: %+v", r)
	}
	if other := h.init("other", -1, -1); other.ProducerID == first.ProducerID {
		t.Fatalf("two transactional ids share producer id %d", other.ProducerID)
	}
}

func TestTransactionCommitAndAbortMarkers(t *testing.T) {
	h := newTxnHarness(t)
	p := h.init("tx", -1, -1)
	pr := h.prod("tx", p)
	part := h.f.Partition("t", 0)

	// A transactional batch needs its partition in the transaction.
	if r := h.produce(0, p.ProducerID, p.Epoch, 0, 1); r.Code != ErrInvalidTxnState {
		t.Fatalf("batch before AddPartitions: %+v", r)
	}
	bad := h.txn(&AddTxnPartitions{TxnProducer: pr, Partitions: []TopicPartition{{"t", 0}, {"nope", 0}}})
	if bad.Code != 0 || !reflect.DeepEqual(bad.Codes, []int16{ErrOperationNotAttempted, ErrUnknownTopicOrPartition}) {
		t.Fatalf("AddPartitions with an unknown topic: %+v", bad)
	}
	if r := h.txn(&AddTxnPartitions{TxnProducer: pr, Partitions: []TopicPartition{{"t", 0}, {"t", 1}}}); r.Code != 0 {
		t.Fatalf("AddPartitions: %+v", r)
	}
	if r := h.produce(0, p.ProducerID, p.Epoch, 0, 3); r.Code != 0 || r.BaseOffset != 0 {
		t.Fatalf("txn batch: %+v", r)
	}
	if got := part.LastStableOffset(); got != 0 {
		t.Fatalf("LSO with an open transaction = %d, want 0", got)
	}
	if r := h.txn(&EndTxn{TxnProducer: pr, Commit: true}); r.Code != 0 {
		t.Fatalf("commit: %+v", r)
	}
	// offsets 0-2 records, 3 the commit marker; partition 1 has only its marker.
	if lso, hw := part.LastStableOffset(), part.Log.Next(); lso != 4 || hw != 4 {
		t.Fatalf("after commit LSO %d HW %d, want 4 4", lso, hw)
	}
	if hw := h.f.Partition("t", 1).Log.Next(); hw != 1 {
		t.Fatalf("partition 1 HW %d, want its marker only", hw)
	}
	checkMarker(t, part, 3, p.ProducerID, p.Epoch, kmsg.ControlRecordKeyTypeCommit)
	if r := h.txn(&EndTxn{TxnProducer: pr, Commit: true}); r.Code != 0 {
		t.Fatalf("retried commit: %+v", r)
	}
	if r := h.txn(&EndTxn{TxnProducer: pr, Commit: false}); r.Code != ErrInvalidTxnState {
		t.Fatalf("abort after commit: %+v", r)
	}

	// The next transaction aborts.
	h.txn(&AddTxnPartitions{TxnProducer: pr, Partitions: []TopicPartition{{"t", 0}}})
	if r := h.produce(0, p.ProducerID, p.Epoch, 3, 2); r.Code != 0 || r.BaseOffset != 4 {
		t.Fatalf("second txn batch: %+v", r)
	}
	if r := h.txn(&EndTxn{TxnProducer: pr, Commit: false}); r.Code != 0 {
		t.Fatalf("abort: %+v", r)
	}
	checkMarker(t, part, 6, p.ProducerID, p.Epoch, kmsg.ControlRecordKeyTypeAbort)
	want := []AbortedTxn{{ProducerID: p.ProducerID, FirstOffset: 4, LastOffset: 6}}
	if got := part.AbortedTxns(0, 7); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted = %+v, want %+v", got, want)
	}
	if got := part.AbortedTxns(7, 10); len(got) != 0 {
		t.Fatalf("aborted after it = %+v", got)
	}
	if r := h.txn(&EndTxn{TxnProducer: pr, Commit: false}); r.Code != 0 {
		t.Fatalf("retried abort: %+v", r)
	}
	if r := h.txn(&EndTxn{TxnProducer: pr, Commit: true}); r.Code != ErrInvalidTxnState {
		t.Fatalf("commit after abort: %+v", r)
	}
}

// checkMarker reads the batch at offset and checks it is a valid control
// batch with the given marker.
func checkMarker(t *testing.T, p *Partition, offset, pid int64, epoch int16, typ kmsg.ControlRecordKeyType) {
	t.Helper()
	data, err := p.Log.Read(offset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(data); err != nil {
		t.Fatal(err)
	}
	if b.FirstOffset != offset || b.Attributes != attrTransactional|attrControl || b.ProducerID != pid || b.ProducerEpoch != epoch || b.NumRecords != 1 {
		t.Fatalf("marker batch %+v", b)
	}
	if crc := crc32.Checksum(data[batchAttributesAt:12+b.Length], castagnoli); int32(crc) != b.CRC {
		t.Fatalf("marker CRC %x, computed %x", b.CRC, crc)
	}
	recs := b.Records
	var r kmsg.Record
	if err := r.ReadFrom(recs); err != nil {
		t.Fatal(err)
	}
	var key kmsg.ControlRecordKey
	if err := key.ReadFrom(r.Key); err != nil || key.Type != typ {
		t.Fatalf("marker key %+v (%v), want %v", key, err, typ)
	}
}

func TestInitWhileOngoingAbortsAndFences(t *testing.T) {
	h := newTxnHarness(t)
	old := h.init("tx", -1, -1)
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("tx", old), Partitions: []TopicPartition{{"t", 0}}})
	h.produce(0, old.ProducerID, old.Epoch, 0, 2)

	if r := h.init("tx", -1, -1); r.Code != ErrConcurrentTransactions {
		t.Fatalf("init while ongoing: %+v, want CONCURRENT_TRANSACTIONS", r)
	}
	part := h.f.Partition("t", 0)
	checkMarker(t, part, 2, old.ProducerID, old.Epoch+1, kmsg.ControlRecordKeyTypeAbort)
	if lso := part.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO after the fencing abort = %d, want 3", lso)
	}
	// The old producer's next batch is refused.
	if r := h.produce(0, old.ProducerID, old.Epoch, 2, 1); r.Code != ErrInvalidProducerEpoch {
		t.Fatalf("zombie batch: %+v, want INVALID_PRODUCER_EPOCH", r)
	}
	again := h.init("tx", -1, -1)
	if again.Code != 0 || again.Epoch != old.Epoch+2 {
		t.Fatalf("retried init: %+v, want epoch %d", again, old.Epoch+2)
	}
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("tx", again), Partitions: []TopicPartition{{"t", 0}}})
	if r := h.produce(0, again.ProducerID, again.Epoch, 0, 1); r.Code != 0 || r.BaseOffset != 3 {
		t.Fatalf("new producer's batch: %+v", r)
	}
}

func TestTxnOffsetsVisibleOnlyOnCommit(t *testing.T) {
	h := newTxnHarness(t)
	p := h.init("tx", -1, -1)
	pr := h.prod("tx", p)
	commit := &TxnCommitOffsets{TxnProducer: pr, Group: "g", Generation: -1, MaxGroups: 10,
		Offsets: []OffsetCommit{{Topic: "t", Partition: 0, Offset: 42, LeaderEpoch: -1}}}
	if r := h.txn(commit); r.Code != ErrInvalidTxnState {
		t.Fatalf("TxnOffsetCommit before AddOffsetsToTxn: %+v", r)
	}
	if r := h.txn(&AddTxnGroup{TxnProducer: pr, Group: "g"}); r.Code != 0 {
		t.Fatalf("AddOffsetsToTxn: %+v", r)
	}
	if r := h.txn(commit); r.Code != 0 || !reflect.DeepEqual(r.Codes, []int16{0}) {
		t.Fatalf("TxnOffsetCommit: %+v", r)
	}
	committed := func() (int64, bool) {
		offs, _ := h.f.CommittedOffsets("g")
		o, ok := offs[TopicPartition{"t", 0}]
		return o.Offset, ok
	}
	if off, ok := committed(); ok {
		t.Fatalf("offset %d visible before the commit", off)
	}
	h.txn(&EndTxn{TxnProducer: pr, Commit: true})
	if off, ok := committed(); !ok || off != 42 {
		t.Fatalf("after commit offset %d %v, want 42", off, ok)
	}
	// An aborted transaction's offsets are dropped.
	h.txn(&AddTxnGroup{TxnProducer: pr, Group: "g"})
	commit.Offsets[0].Offset = 99
	h.txn(commit)
	h.txn(&EndTxn{TxnProducer: pr, Commit: false})
	if off, _ := committed(); off != 42 {
		t.Fatalf("after abort offset %d, want 42", off)
	}
}

func TestExpireTxnOnlyWhenExpired(t *testing.T) {
	h := newTxnHarness(t)
	p := h.init("tx", -1, -1) // timeout 60 s
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("tx", p), Partitions: []TopicPartition{{"t", 0}}})
	start := h.now
	h.produce(0, p.ProducerID, p.Epoch, 0, 1)
	early := &ExpireTxn{TxnProducer: TxnProducer{TransactionalID: "tx", ProducerID: p.ProducerID, Epoch: p.Epoch, NowMs: start + 59_999}, StartMs: start}
	if r := h.txn(early); r.Code != ErrInvalidTxnState {
		t.Fatalf("expiry before the timeout: %+v", r)
	}
	wrongStart := &ExpireTxn{TxnProducer: TxnProducer{TransactionalID: "tx", ProducerID: p.ProducerID, Epoch: p.Epoch, NowMs: start + 60_000}, StartMs: start - 1}
	if r := h.txn(wrongStart); r.Code != ErrInvalidTxnState {
		t.Fatalf("expiry of another transaction: %+v", r)
	}
	due := &ExpireTxn{TxnProducer: TxnProducer{TransactionalID: "tx", ProducerID: p.ProducerID, Epoch: p.Epoch, NowMs: start + 60_000}, StartMs: start}
	if r := h.txn(due); r.Code != 0 {
		t.Fatalf("expiry: %+v", r)
	}
	if v, _ := h.f.Transaction("tx"); v.State != TxnCompleteAbort || v.Epoch != p.Epoch+1 {
		t.Fatalf("after expiry %+v, want CompleteAbort at epoch %d", v, p.Epoch+1)
	}
	if r := h.txn(&EndTxn{TxnProducer: h.prod("tx", p), Commit: true}); r.Code != ErrProducerFenced {
		t.Fatalf("the expired producer's commit: %+v, want PRODUCER_FENCED", r)
	}
	if r := h.txn(due); r.Code != ErrProducerFenced {
		t.Fatalf("repeated expiry: %+v", r)
	}
	if got := h.f.Partition("t", 0).AbortedTxns(0, 10); len(got) != 1 {
		t.Fatalf("aborted = %+v", got)
	}
}

func TestTransactionsSurviveSnapshotRestore(t *testing.T) {
	h := newTxnHarness(t)
	a := h.init("a", -1, -1)
	b := h.init("b", -1, -1)
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("a", a), Partitions: []TopicPartition{{"t", 0}}})
	h.produce(0, a.ProducerID, a.Epoch, 0, 2)
	h.txn(&EndTxn{TxnProducer: h.prod("a", a), Commit: false})
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("a", a), Partitions: []TopicPartition{{"t", 0}}})
	h.produce(0, a.ProducerID, a.Epoch, 2, 1) // left open
	h.txn(&AddTxnGroup{TxnProducer: h.prod("b", b), Group: "g"})
	h.txn(&TxnCommitOffsets{TxnProducer: h.prod("b", b), Group: "g", Generation: -1, MaxGroups: 10,
		Offsets: []OffsetCommit{{Topic: "t", Partition: 1, Offset: 7, LeaderEpoch: -1}}})

	dst := restoredCopy(t, h.f)
	if !reflect.DeepEqual(dst.Transactions(), h.f.Transactions()) {
		t.Fatalf("transactions %+v, want %+v", dst.Transactions(), h.f.Transactions())
	}
	p := dst.Partition("t", 0)
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("restored LSO %d, want 3", lso)
	}
	if got := p.AbortedTxns(0, 10); len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 2 {
		t.Fatalf("restored aborted %+v", got)
	}
	// The restored coordinator completes the open transaction.
	h2 := &txnHarness{t: t, f: dst, idx: h.idx, now: h.now}
	if r := h2.txn(&EndTxn{TxnProducer: h2.prod("b", b), Commit: true}); r.Code != 0 {
		t.Fatalf("commit after restore: %+v", r)
	}
	if offs, _ := dst.CommittedOffsets("g"); offs[TopicPartition{"t", 1}].Offset != 7 {
		t.Fatalf("staged offset lost in the snapshot: %+v", offs)
	}
}

func TestTxnCommandsNeedTheirLevel(t *testing.T) {
	f := openFSM(t, t.TempDir())
	f.Apply(1, Encode(&SetFeatureLevel{Level: LevelScram}))
	_, err := f.Admit(Encode(&InitTxnProducer{TransactionalID: "tx", ExpectedID: -1, ExpectedEpoch: -1}))
	var fe *FeatureError
	if !errors.As(err, &fe) || fe.Need != LevelTransactions {
		t.Fatalf("Admit below LevelTransactions: %v", err)
	}
}

// Two producers' transactions interleave in one partition: the last stable
// offset is the first offset of the older open one, and each end moves it.
func TestLastStableOffsetWithInterleavedTransactions(t *testing.T) {
	h := newTxnHarness(t)
	a, b := h.init("a", -1, -1), h.init("b", -1, -1)
	for _, x := range []struct {
		id string
		r  *TxnResult
	}{{"a", a}, {"b", b}} {
		h.txn(&AddTxnPartitions{TxnProducer: h.prod(x.id, x.r), Partitions: []TopicPartition{{"t", 0}}})
	}
	part := h.f.Partition("t", 0)
	h.produce(0, a.ProducerID, a.Epoch, 0, 2) // 0-1
	h.produce(0, b.ProducerID, b.Epoch, 0, 2) // 2-3
	h.produce(0, a.ProducerID, a.Epoch, 2, 1) // 4
	if lso := part.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d, want 0 (a's first offset)", lso)
	}
	h.txn(&EndTxn{TxnProducer: h.prod("a", a), Commit: false}) // marker at 5
	if lso := part.LastStableOffset(); lso != 2 {
		t.Fatalf("LSO after a's abort %d, want 2 (b's first offset)", lso)
	}
	if got := part.AbortedTxns(0, 6); len(got) != 1 || got[0] != (AbortedTxn{a.ProducerID, 0, 5}) {
		t.Fatalf("aborted %+v", got)
	}
	h.txn(&EndTxn{TxnProducer: h.prod("b", b), Commit: true}) // marker at 6
	if lso, hw := part.LastStableOffset(), part.Log.Next(); lso != 7 || hw != 7 {
		t.Fatalf("LSO %d HW %d after both ended, want 7 7", lso, hw)
	}
	// Retention past a's marker forgets its abort.
	h.apply(&TrimLog{Topic: "t", Partition: 0, Start: 6})
	if got := part.AbortedTxns(0, 7); len(got) != 0 {
		t.Fatalf("aborted after the trim: %+v", got)
	}
}

// ExpireTxnIDs removes only ids without an ongoing transaction whose last
// update is at or before its cutoff; an id used after the leader decided
// stays. A removed id starts over with a new producer id at epoch 0, and
// its old producer id is unknown.
func TestExpireTxnIDsRemovesOnlyIdleIDs(t *testing.T) {
	h := newTxnHarness(t)
	h.apply(&SetFeatureLevel{Level: LevelIdleExpiry})
	tps := []TopicPartition{{"t", 0}}
	empty := h.init("empty", -1, -1)
	committed := h.init("committed", -1, -1)
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("committed", committed), Partitions: tps})
	h.produce(0, committed.ProducerID, committed.Epoch, 0, 1)
	h.txn(&EndTxn{TxnProducer: h.prod("committed", committed), Commit: true})
	aborted := h.init("aborted", -1, -1)
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("aborted", aborted), Partitions: tps})
	h.txn(&EndTxn{TxnProducer: h.prod("aborted", aborted), Commit: false})
	ongoing := h.init("ongoing", -1, -1)
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("ongoing", ongoing), Partitions: tps})
	h.init("touched", -1, -1)

	const expiration = 3_600_000
	decided := h.now + expiration // every id above is idle by then
	h.now = decided - expiration + 1
	touched := h.init("touched", -1, -1) // used after the cutoff the leader decided on
	ids := []string{"empty", "committed", "aborted", "ongoing", "touched", "unknown"}
	r := h.txn(&ExpireTxnIDs{NowMs: decided, ExpirationMs: expiration, IDs: ids})
	want := []int16{0, 0, 0, ErrInvalidTxnState, ErrInvalidTxnState, ErrTransactionalIDNotFound}
	if r.Code != 0 || !reflect.DeepEqual(r.Codes, want) {
		t.Fatalf("expiry: %+v, want codes %v", r, want)
	}
	var left []string
	for _, v := range h.f.Transactions() {
		left = append(left, v.TransactionalID)
	}
	if !reflect.DeepEqual(left, []string{"ongoing", "touched"}) {
		t.Fatalf("ids left %v, want [ongoing touched]", left)
	}
	if _, ok := h.f.Transaction("empty"); ok {
		t.Fatal("an expired id is still described")
	}
	// The expired producer's requests: unknown producer id.
	if r := h.txn(&AddTxnPartitions{TxnProducer: h.prod("committed", committed), Partitions: tps}); r.Code != ErrInvalidProducerIDMapping {
		t.Fatalf("AddPartitions from the expired producer: %+v, want INVALID_PRODUCER_ID_MAPPING", r)
	}
	if res := h.produce(0, committed.ProducerID, committed.Epoch, 1, 1); res.Code != ErrInvalidTxnState {
		t.Fatalf("transactional produce from the expired producer: %+v, want INVALID_TXN_STATE", res)
	}
	// A new producer with an expired id: a new producer id, epoch 0. One
	// that names its old producer id (KIP-360) gets the new one too, as
	// Kafka answers for an id it does not know.
	again := h.init("committed", -1, -1)
	if again.Code != 0 || again.Epoch != 0 || again.ProducerID <= touched.ProducerID {
		t.Fatalf("init after expiry: %+v, want a new producer id at epoch 0", again)
	}
	recovered := h.init("empty", empty.ProducerID, empty.Epoch)
	if recovered.Code != 0 || recovered.Epoch != 0 || recovered.ProducerID == empty.ProducerID {
		t.Fatalf("init naming the expired producer: %+v, want a new producer id at epoch 0", recovered)
	}
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("committed", again), Partitions: tps})
	if res := h.produce(0, again.ProducerID, again.Epoch, 0, 1); res.Code != 0 {
		t.Fatalf("transactional produce of the new producer: %+v", res)
	}
	if r := h.txn(&EndTxn{TxnProducer: h.prod("committed", again), Commit: true}); r.Code != 0 {
		t.Fatalf("commit of the new producer: %+v", r)
	}
	// A repeated decision changes nothing; the state survives a snapshot.
	if r := h.txn(&ExpireTxnIDs{NowMs: decided, ExpirationMs: expiration, IDs: []string{"empty", "committed"}}); r.Codes[0] != ErrInvalidTxnState || r.Codes[1] != ErrInvalidTxnState {
		t.Fatalf("repeated expiry of re-used ids: %+v", r)
	}
	snap := snapshotBytes(t, h.f)
	dst := openFSM(t, t.TempDir())
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, dst), snap) || !reflect.DeepEqual(dst.Transactions(), h.f.Transactions()) {
		t.Fatalf("restored transactions %+v, want %+v", dst.Transactions(), h.f.Transactions())
	}
	h2 := &txnHarness{t: t, f: dst, idx: h.idx, now: h.now}
	if r := h2.txn(&AddTxnPartitions{TxnProducer: h2.prod("committed", committed), Partitions: tps}); r.Code != ErrInvalidProducerIDMapping {
		t.Fatalf("after restore, the expired producer: %+v, want INVALID_PRODUCER_ID_MAPPING", r)
	}
	if r := h2.txn(&AddTxnPartitions{TxnProducer: h2.prod("committed", again), Partitions: tps}); r.Code != 0 {
		t.Fatalf("after restore, the new producer: %+v", r)
	}
}

// Below LevelIdleExpiry ExpireTxnIDs is refused before it is proposed,
// and an FSM that is handed one anyway refuses it without stopping.
func TestExpireTxnIDsNeedsItsLevel(t *testing.T) {
	h := newTxnHarness(t) // at LevelTransactions
	h.init("tx", -1, -1)
	cmd := &ExpireTxnIDs{NowMs: h.now + 1, ExpirationMs: 1, IDs: []string{"tx"}}
	var fe *FeatureError
	if _, err := h.f.Admit(Encode(cmd)); !errors.As(err, &fe) || fe.Need != LevelIdleExpiry || fe.Cluster != LevelTransactions {
		t.Fatalf("Admit below LevelIdleExpiry: %v", err)
	}
	if _, ok := h.apply(cmd).(*FeatureError); !ok {
		t.Fatal("Apply below LevelIdleExpiry was not refused")
	}
	if _, ok := h.f.Transaction("tx"); !ok {
		t.Fatal("an id was removed below LevelIdleExpiry")
	}
}

// ExpireProducers drops the state of producers idle for the expiration,
// except one with an open transaction in the partition; DescribeProducers
// no longer shows them, and a producer that comes back is accepted at the
// sequence it goes on with, as Kafka accepts a producer it has no state of.
func TestExpireProducersDropsIdleState(t *testing.T) {
	h := newTxnHarness(t)
	h.apply(&SetFeatureLevel{Level: LevelIdleExpiry})
	idem := func(pid int64, seq int32) AppendResult {
		t.Helper()
		res := h.apply(&Append{NowMs: h.now, Batches: []Batch{{Topic: "t", Partition: 1, Data: fakeBatch(1, h.now, nil),
			MaxTimestamp: h.now, ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq}}})
		return res.(*AppendResults).Results[0]
	}
	ids := func(p int32) []int64 {
		var out []int64
		for _, pi := range h.f.Partition("t", p).Producers() {
			out = append(out, pi.ID)
		}
		return out
	}
	const idle, busy = 1000, 1001
	idem(idle, 0)
	idem(idle, 1)
	x := h.init("x", -1, -1)
	h.txn(&AddTxnPartitions{TxnProducer: h.prod("x", x), Partitions: []TopicPartition{{"t", 1}}})
	h.produce(1, x.ProducerID, x.Epoch, 0, 1) // stays open
	const expiration = 86_400_000
	h.now += expiration - 1
	idem(busy, 0)
	if r := h.apply(&ExpireProducers{NowMs: h.now, ExpirationMs: expiration}).(*ExpireProducersResult); r.Removed != 0 {
		t.Fatalf("removed %d a millisecond before the expiration", r.Removed)
	}
	h.now++
	if r := h.apply(&ExpireProducers{NowMs: h.now, ExpirationMs: expiration}).(*ExpireProducersResult); r.Removed != 1 {
		t.Fatalf("removed %d, want the idle producer only", r.Removed)
	}
	if got, want := ids(1), []int64{x.ProducerID, busy}; !reflect.DeepEqual(got, want) {
		t.Fatalf("producers left %v, want %v (open transaction, recent)", got, want)
	}
	snap := snapshotBytes(t, h.f)
	dst := openFSM(t, t.TempDir())
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, dst), snap) || !reflect.DeepEqual(dst.Partition("t", 1).Producers(), h.f.Partition("t", 1).Producers()) {
		t.Fatal("restored producers differ")
	}
	// The idle producer comes back with its next sequence: accepted, and
	// its state starts again from there (a retry of it is a duplicate).
	first := idem(idle, 2)
	if first.Code != 0 {
		t.Fatalf("the expired producer's next batch: %+v, want it accepted", first)
	}
	if r := idem(idle, 2); r.Code != 0 || r.BaseOffset != first.BaseOffset {
		t.Fatalf("its retry: %+v, want the first offset %d", r, first.BaseOffset)
	}
	if r := idem(idle, 4); r.Code != ErrOutOfOrderSequence {
		t.Fatalf("a gap after it: %+v, want OUT_OF_ORDER_SEQUENCE_NUMBER", r)
	}
}

// Below LevelIdleExpiry ExpireProducers is refused, and a producer a
// partition has no state of must start at sequence 0, as before.
func TestExpireProducersNeedsItsLevel(t *testing.T) {
	h := newTxnHarness(t) // at LevelTransactions
	cmd := &ExpireProducers{NowMs: h.now, ExpirationMs: 1}
	var fe *FeatureError
	if _, err := h.f.Admit(Encode(cmd)); !errors.As(err, &fe) || fe.Need != LevelIdleExpiry {
		t.Fatalf("Admit below LevelIdleExpiry: %v", err)
	}
	res := h.apply(&Append{NowMs: h.now, Batches: []Batch{{Topic: "t", Partition: 0, Data: fakeBatch(1, h.now, nil),
		MaxTimestamp: h.now, ProducerID: 7, BaseSequence: 3}}})
	if r := res.(*AppendResults).Results[0]; r.Code != ErrUnknownProducerID {
		t.Fatalf("an unknown producer at sequence 3 below LevelIdleExpiry: %+v, want UNKNOWN_PRODUCER_ID", r)
	}
}

// WriteTxnMarkers (kafka-transactions abort) closes a partition's open
// transaction with an abort marker, outside the coordinator, and answers
// as Kafka's broker does.
func TestWriteTxnMarkersAbortsAnOpenTransaction(t *testing.T) {
	h := newTxnHarness(t)
	h.apply(&SetFeatureLevel{Level: LevelTxnMarkers})
	p := h.init("tx", -1, -1)
	pr := h.prod("tx", p)
	part := h.f.Partition("t", 0)
	h.txn(&AddTxnPartitions{TxnProducer: pr, Partitions: []TopicPartition{{"t", 0}}})
	if r := h.produce(0, p.ProducerID, p.Epoch, 0, 2); r.Code != 0 || r.BaseOffset != 0 {
		t.Fatalf("txn batch: %+v", r)
	}
	abort := func(epoch int16, tps ...TopicPartition) *TxnResult {
		return h.txn(&WriteTxnMarkers{NowMs: h.now, Markers: []TxnMarker{{ProducerID: p.ProducerID, Epoch: epoch, Partitions: tps}}})
	}
	h.now += 100 // the marker's time becomes the producer's last
	r := abort(p.Epoch, TopicPartition{"t", 0}, TopicPartition{"nope", 0}, TopicPartition{"t", 9})
	if r.Code != 0 || !reflect.DeepEqual(r.Codes, []int16{ErrNone, ErrUnknownTopicOrPartition, ErrUnknownTopicOrPartition}) {
		t.Fatalf("abort: %+v", r)
	}
	checkMarker(t, part, 2, p.ProducerID, p.Epoch, kmsg.ControlRecordKeyTypeAbort)
	if lso := part.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO after the abort %d, want 3", lso)
	}
	if got := part.AbortedTxns(0, 3); !reflect.DeepEqual(got, []AbortedTxn{{ProducerID: p.ProducerID, FirstOffset: 0, LastOffset: 2}}) {
		t.Fatalf("aborted %+v", got)
	}
	if ps := part.Producers(); len(ps) != 1 || ps[0].TxnStart != -1 || ps[0].LastAppendMs != h.now {
		t.Fatalf("producers after the abort %+v, want no open transaction, last time %d", ps, h.now)
	}
	// As Kafka: a marker for a producer with no open transaction in the
	// partition, or none known at all, is written and answered NONE.
	if r := abort(p.Epoch, TopicPartition{"t", 0}); r.Code != 0 || r.Codes[0] != ErrNone {
		t.Fatalf("second abort: %+v", r)
	}
	if r := h.txn(&WriteTxnMarkers{NowMs: h.now, Markers: []TxnMarker{{ProducerID: 999, Epoch: 3, Commit: true, CoordinatorEpoch: 2,
		Partitions: []TopicPartition{{"t", 1}}}}}); r.Codes[0] != ErrNone {
		t.Fatalf("marker for an unknown producer: %+v", r)
	}
	// As Kafka, the partition now has state of it, at the marker's epoch.
	want := []ProducerInfo{{ID: 999, Epoch: 3, LastSequence: -1, LastAppendMs: h.now, TxnStart: -1, CoordinatorEpoch: 2}}
	if ps := h.f.Partition("t", 1).Producers(); !reflect.DeepEqual(ps, want) {
		t.Fatalf("producers after a marker for an unknown producer: %+v, want %+v", ps, want)
	}
	if hw := part.Log.Next(); hw != 4 {
		t.Fatalf("HW %d, want two markers after the two records", hw)
	}
	// The coordinator still has the transaction: the producer goes on and
	// commits, and only what it wrote after the abort is committed.
	if r := h.produce(0, p.ProducerID, p.Epoch, 2, 1); r.Code != 0 || r.BaseOffset != 4 {
		t.Fatalf("batch after the abort: %+v", r)
	}
	if r := h.txn(&EndTxn{TxnProducer: pr, Commit: true}); r.Code != 0 {
		t.Fatalf("commit: %+v", r)
	}
	if lso := part.LastStableOffset(); lso != 6 {
		t.Fatalf("LSO after the commit %d, want 6", lso)
	}
	// A newer epoch fences the producer in the partition; an older one is
	// refused and writes nothing.
	if r := abort(p.Epoch+1, TopicPartition{"t", 0}); r.Codes[0] != ErrNone {
		t.Fatalf("abort at a newer epoch: %+v", r)
	}
	if r := abort(p.Epoch, TopicPartition{"t", 0}); r.Codes[0] != ErrInvalidProducerEpoch {
		t.Fatalf("abort at an older epoch: %+v, want INVALID_PRODUCER_EPOCH", r)
	}
	if hw := part.Log.Next(); hw != 7 {
		t.Fatalf("HW %d, want 7: the refused marker is not written", hw)
	}
	h.txn(&AddTxnPartitions{TxnProducer: pr, Partitions: []TopicPartition{{"t", 0}}})
	if r := h.produce(0, p.ProducerID, p.Epoch, 3, 1); r.Code != ErrInvalidProducerEpoch {
		t.Fatalf("batch of the fenced epoch: %+v", r)
	}
	// A marker's coordinator epoch is kept: DescribeProducers shows it, and
	// a marker with an older one is refused (TRANSACTION_COORDINATOR_FENCED).
	if ps := part.Producers(); ps[0].CoordinatorEpoch != 0 {
		t.Fatalf("coordinator epoch %d after markers with 0", ps[0].CoordinatorEpoch)
	}
	withCoord := func(coord int32) *TxnResult {
		return h.txn(&WriteTxnMarkers{NowMs: h.now, Markers: []TxnMarker{{ProducerID: p.ProducerID, Epoch: p.Epoch + 1,
			CoordinatorEpoch: coord, Partitions: []TopicPartition{{"t", 0}}}}})
	}
	if r := withCoord(5); r.Codes[0] != ErrNone {
		t.Fatalf("marker with coordinator epoch 5: %+v", r)
	}
	if ps := part.Producers(); ps[0].CoordinatorEpoch != 5 {
		t.Fatalf("coordinator epoch %d, want 5", ps[0].CoordinatorEpoch)
	}
	if r := withCoord(4); r.Codes[0] != ErrTransactionCoordinatorFenced {
		t.Fatalf("marker with an older coordinator epoch: %+v, want TRANSACTION_COORDINATOR_FENCED", r)
	}
	if hw := part.Log.Next(); hw != 8 {
		t.Fatalf("HW %d, want 8: the fenced marker is not written", hw)
	}
	if v := markerCoordinatorEpoch(t, part, 7); v != 5 {
		t.Fatalf("the marker's record carries coordinator epoch %d, want 5", v)
	}

	// The state survives a snapshot.
	dst := restoredCopy(t, h.f)
	if got, want := dst.Partition("t", 0).AbortedTxns(0, 10), part.AbortedTxns(0, 10); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored aborted %+v, want %+v", got, want)
	}
	if got, want := dst.Partition("t", 0).Producers(), part.Producers(); !reflect.DeepEqual(got, want) || got[0].CoordinatorEpoch != 5 {
		t.Fatalf("restored producers %+v, want %+v", got, want)
	}
}

// markerCoordinatorEpoch reads the coordinator epoch in the value of the
// marker at offset.
func markerCoordinatorEpoch(t *testing.T, p *Partition, offset int64) int32 {
	t.Helper()
	data, err := p.Log.Read(offset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(data); err != nil {
		t.Fatal(err)
	}
	var r kmsg.Record
	if err := r.ReadFrom(b.Records); err != nil {
		t.Fatal(err)
	}
	var v kmsg.EndTxnMarker
	if err := v.ReadFrom(r.Value); err != nil {
		t.Fatal(err)
	}
	return v.CoordinatorEpoch
}

// Below LevelTxnMarkers WriteTxnMarkers is refused before it is proposed,
// and Apply refuses it too.
func TestWriteTxnMarkersNeedsItsLevel(t *testing.T) {
	h := newTxnHarness(t)
	h.apply(&SetFeatureLevel{Level: LevelIdleExpiry})
	cmd := &WriteTxnMarkers{NowMs: h.now, Markers: []TxnMarker{{ProducerID: 1, Partitions: []TopicPartition{{"t", 0}}}}}
	var fe *FeatureError
	if _, err := h.f.Admit(Encode(cmd)); !errors.As(err, &fe) || fe.Need != LevelTxnMarkers || fe.Cluster != LevelIdleExpiry {
		t.Fatalf("Admit below LevelTxnMarkers: %v", err)
	}
	if _, ok := h.apply(cmd).(*FeatureError); !ok {
		t.Fatal("Apply below LevelTxnMarkers was not refused")
	}
	if hw := h.f.Partition("t", 0).Log.Next(); hw != 0 {
		t.Fatalf("a marker was written below LevelTxnMarkers (HW %d)", hw)
	}
}
