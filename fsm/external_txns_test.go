package fsm

import (
	"errors"
	"reflect"
	"testing"
)

// Transactions over partitions outside the FSM (the Iggy backend): EndTxn
// prepares, CompleteTxn with the markers' offsets completes; the last
// stable offset and the aborted list follow, and survive a snapshot.
func TestExternalTransactionLifecycle(t *testing.T) {
	h := newTxnHarness(t)
	h.apply(&SetFeatureLevel{Level: LevelExternalTxns})
	tp := TopicPartition{"ext", 0}
	a := h.init("a", -1, -1)
	add := func(r *TxnResult, first int64) *TxnResult {
		t.Helper()
		return h.txn(&AddExtTxnPartitions{TxnProducer: h.prod("a", r), Partitions: []TopicPartition{tp}, Firsts: []int64{first}})
	}
	if r := add(a, 10); r.Code != 0 || len(r.Codes) != 1 || r.Codes[0] != 0 {
		t.Fatalf("add: %+v", r)
	}
	if lso := h.f.ExtLastStableOffset(tp, 15); lso != 10 {
		t.Fatalf("LSO with an open transaction from 10: %d", lso)
	}
	if !h.f.ExtOngoing(tp, a.ProducerID) || h.f.ExtOngoing(tp, a.ProducerID+1) {
		t.Fatal("ExtOngoing")
	}
	// EndTxn prepares: still unstable, no new transaction, InitProducerId
	// waits.
	if r := h.txn(&EndTxn{TxnProducer: h.prod("a", a), Commit: false}); r.Code != 0 {
		t.Fatalf("end: %+v", r)
	}
	if v, _ := h.f.Transaction("a"); v.State != TxnPrepareAbort || len(v.Partitions) != 1 {
		t.Fatalf("after EndTxn: %+v", v)
	}
	if lso := h.f.ExtLastStableOffset(tp, 15); lso != 10 {
		t.Fatalf("LSO while the abort is prepared: %d", lso)
	}
	if r := add(a, 15); r.Code != ErrConcurrentTransactions {
		t.Fatalf("add while prepared: %+v", r)
	}
	if r := h.init("a", -1, -1); r.Code != ErrConcurrentTransactions {
		t.Fatalf("init while prepared: %+v", r)
	}
	if r := h.txn(&EndTxn{TxnProducer: h.prod("a", a), Commit: true}); r.Code != ErrInvalidTxnState {
		t.Fatalf("commit of a prepared abort: %+v", r)
	}
	if r := h.txn(&EndTxn{TxnProducer: h.prod("a", a), Commit: false}); r.Code != 0 {
		t.Fatalf("retried abort: %+v", r)
	}
	complete := &CompleteTxn{TxnProducer: h.prod("a", a), Commit: false, Partitions: []TopicPartition{tp}, Offsets: []int64{15}}
	if r := h.txn(complete); r.Code != 0 {
		t.Fatalf("complete: %+v", r)
	}
	if r := h.txn(complete); r.Code != 0 {
		t.Fatalf("complete again: %+v", r)
	}
	if lso := h.f.ExtLastStableOffset(tp, 16); lso != 16 {
		t.Fatalf("LSO after the abort: %d", lso)
	}
	want := []AbortedTxn{{ProducerID: a.ProducerID, FirstOffset: 10, LastOffset: 15}}
	if got := h.f.ExtAbortedTxns(tp, 0, 16); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
	if got := h.f.ExtAbortedTxns(tp, 16, 20); len(got) != 0 {
		t.Fatalf("aborted after it: %+v", got)
	}
	// The next transaction starts past the marker even if the offset the
	// coordinator read was stale.
	if r := add(a, 12); r.Code != 0 {
		t.Fatalf("second add: %+v", r)
	}
	if lso := h.f.ExtLastStableOffset(tp, 20); lso != 16 {
		t.Fatalf("LSO of a transaction added with a stale offset: %d, want 16", lso)
	}

	dst := restoredCopy(t, h.f)
	if lso := dst.ExtLastStableOffset(tp, 20); lso != 16 {
		t.Fatalf("restored LSO %d", lso)
	}
	if got := dst.ExtAbortedTxns(tp, 0, 20); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored aborted %+v", got)
	}

	// A second producer fences the first: its transaction is prepared for
	// abort at the new epoch, and completes as such.
	h2 := &txnHarness{t: t, f: dst, idx: h.idx, now: h.now}
	if r := h2.init("a", -1, -1); r.Code != ErrConcurrentTransactions {
		t.Fatalf("init over an open transaction: %+v", r)
	}
	v, _ := dst.Transaction("a")
	if v.State != TxnPrepareAbort || v.Epoch != a.Epoch+1 {
		t.Fatalf("fenced: %+v", v)
	}
	if r := h2.txn(&CompleteTxn{TxnProducer: TxnProducer{TransactionalID: "a", ProducerID: v.ProducerID, Epoch: v.Epoch, NowMs: h.now},
		Partitions: v.Partitions, Offsets: []int64{21}}); r.Code != 0 {
		t.Fatalf("complete the fenced one: %+v", r)
	}
	if got := dst.ExtAbortedTxns(tp, 0, 30); len(got) != 2 || got[1] != (AbortedTxn{a.ProducerID, 16, 21}) {
		t.Fatalf("aborted %+v", got)
	}
	if r := h2.init("a", -1, -1); r.Code != 0 || r.Epoch != a.Epoch+2 {
		t.Fatalf("init after the abort: %+v", r)
	}
	// A commit moves nothing into the aborted list.
	b := h2.init("b", -1, -1)
	h2.txn(&AddExtTxnPartitions{TxnProducer: h2.prod("b", b), Partitions: []TopicPartition{tp}, Firsts: []int64{30}})
	h2.txn(&AddTxnGroup{TxnProducer: h2.prod("b", b), Group: "g"})
	h2.txn(&TxnCommitOffsets{TxnProducer: h2.prod("b", b), Group: "g", Generation: -1, MaxGroups: 10,
		Offsets: []OffsetCommit{{Topic: "in", Partition: 0, Offset: 7, LeaderEpoch: -1}}})
	h2.txn(&EndTxn{TxnProducer: h2.prod("b", b), Commit: true})
	// Prepared, the offsets are still pending: a consumer asking for stable
	// offsets waits (UNSTABLE_OFFSET_COMMIT) rather than read the old ones.
	if p := dst.PendingTxnOffsets("g"); !p[TopicPartition{"in", 0}] {
		t.Fatalf("pending offsets while the commit is prepared: %v", p)
	}
	if offs, _ := dst.CommittedOffsets("g"); len(offs) != 0 {
		t.Fatalf("offsets committed before the markers: %v", offs)
	}
	if r := h2.txn(&CompleteTxn{TxnProducer: h2.prod("b", b), Commit: true, Partitions: []TopicPartition{tp}, Offsets: []int64{33}}); r.Code != 0 {
		t.Fatalf("commit: %+v", r)
	}
	if v, _ := dst.Transaction("b"); v.State != TxnCompleteCommit {
		t.Fatalf("b: %+v", v)
	}
	if offs, _ := dst.CommittedOffsets("g"); offs[TopicPartition{"in", 0}].Offset != 7 || len(dst.PendingTxnOffsets("g")) != 0 {
		t.Fatalf("offsets after the commit: %v", offs)
	}
	if lso := dst.ExtLastStableOffset(tp, 34); lso != 34 {
		t.Fatalf("LSO after the commit: %d", lso)
	}
	if got := dst.ExtAbortedTxns(tp, 30, 34); len(got) != 0 {
		t.Fatalf("aborted after a commit: %+v", got)
	}
}

func TestExternalTxnCommandsNeedTheirLevel(t *testing.T) {
	f := openFSM(t, t.TempDir())
	f.Apply(1, Encode(&SetFeatureLevel{Level: LevelTxnMarkers}))
	for _, c := range []Command{
		&AddExtTxnPartitions{TxnProducer: TxnProducer{TransactionalID: "tx"}},
		&CompleteTxn{TxnProducer: TxnProducer{TransactionalID: "tx"}},
	} {
		_, err := f.Admit(Encode(c))
		var fe *FeatureError
		if !errors.As(err, &fe) || fe.Need != LevelExternalTxns {
			t.Fatalf("Admit %s below LevelExternalTxns: %v", c.Kind(), err)
		}
	}
}

// A partition deleted before the markers were written (offset -1 in
// CompleteTxn) has no marker and no aborted transaction, and no longer
// holds back the others.
func TestCompleteTxnWithADeletedPartition(t *testing.T) {
	h := newTxnHarness(t)
	h.apply(&SetFeatureLevel{Level: LevelExternalTxns})
	gone, kept := TopicPartition{"gone", 0}, TopicPartition{"kept", 0}
	a := h.init("a", -1, -1)
	h.txn(&AddExtTxnPartitions{TxnProducer: h.prod("a", a), Partitions: []TopicPartition{gone, kept}, Firsts: []int64{3, 4}})
	h.txn(&EndTxn{TxnProducer: h.prod("a", a), Commit: false})
	if r := h.txn(&CompleteTxn{TxnProducer: h.prod("a", a), Partitions: []TopicPartition{gone, kept}, Offsets: []int64{-1, 9}}); r.Code != 0 {
		t.Fatalf("complete: %+v", r)
	}
	if got := h.f.ExtAbortedTxns(gone, 0, 100); len(got) != 0 || h.f.ExtLastStableOffset(gone, 5) != 5 {
		t.Fatalf("deleted partition: aborted %+v, LSO %d", got, h.f.ExtLastStableOffset(gone, 5))
	}
	if got := h.f.ExtAbortedTxns(kept, 0, 100); len(got) != 1 || got[0] != (AbortedTxn{a.ProducerID, 4, 9}) {
		t.Fatalf("kept partition: aborted %+v", got)
	}
}

// An administrator's marker recorded in an external partition
// (ExtTxnMarkers) closes its producer's open transaction there, as an
// abort with the marker's offset, moves the partition's end past it, and is
// kept by a snapshot; it needs LevelExtTxnMarkers.
func TestExtTxnMarkersCloseTheOpenTransaction(t *testing.T) {
	h := newTxnHarness(t)
	h.apply(&SetFeatureLevel{Level: LevelExternalTxns})
	tp := TopicPartition{"x", 0}
	marker := &ExtTxnMarkers{Markers: []TxnMarker{{ProducerID: 0, Epoch: 0, Partitions: []TopicPartition{tp}}}, Offsets: []int64{7}}
	if _, err := h.f.Admit(Encode(marker)); err == nil {
		t.Fatal("ExtTxnMarkers admitted below LevelExtTxnMarkers")
	}
	h.apply(&SetFeatureLevel{Level: LevelExtTxnMarkers})
	a := h.init("a", -1, -1)
	marker.Markers[0].ProducerID, marker.Markers[0].Epoch = a.ProducerID, a.Epoch
	h.txn(&AddExtTxnPartitions{TxnProducer: h.prod("a", a), Partitions: []TopicPartition{tp}, Firsts: []int64{4}})
	if r := h.txn(marker); r.Code != 0 || len(r.Codes) != 1 || r.Codes[0] != 0 {
		t.Fatalf("markers: %+v", r)
	}
	check := func(f *FSM, when string) {
		t.Helper()
		if f.ExtOngoing(tp, a.ProducerID) || f.ExtLastStableOffset(tp, 9) != 9 {
			t.Fatalf("%s: still open, or LSO %d", when, f.ExtLastStableOffset(tp, 9))
		}
		if got := f.ExtAbortedTxns(tp, 0, 9); len(got) != 1 || got[0] != (AbortedTxn{ProducerID: a.ProducerID, FirstOffset: 4, LastOffset: 7}) {
			t.Fatalf("%s: aborted %+v", when, got)
		}
	}
	check(h.f, "applied")
	check(restoredCopy(t, h.f), "restored")
	// The producer's next transaction there starts past the marker.
	h.txn(&AddExtTxnPartitions{TxnProducer: h.prod("a", a), Partitions: []TopicPartition{tp}, Firsts: []int64{2}})
	if lso := h.f.ExtLastStableOffset(tp, 9); lso != 8 {
		t.Fatalf("LSO %d with a transaction opened after the marker, want 8", lso)
	}
}

// PruneExtAborted forgets an external partition's aborted transactions
// whose marker is below the given log start, keeps the others (also in a
// snapshot), and needs LevelPruneExtAborted.
func TestPruneExtAborted(t *testing.T) {
	h := newTxnHarness(t)
	h.apply(&SetFeatureLevel{Level: LevelExtTxnMarkers})
	tp := TopicPartition{"x", 0}
	prune := &PruneExtAborted{Partitions: []TopicPartition{tp, {"none", 0}}, Starts: []int64{6, 100}}
	if _, err := h.f.Admit(Encode(prune)); err == nil {
		t.Fatal("PruneExtAborted admitted below LevelPruneExtAborted")
	}
	h.apply(&SetFeatureLevel{Level: LevelPruneExtAborted})
	a := h.init("a", -1, -1)
	for _, m := range []int64{2, 5, 8} { // three aborted transactions, markers at 2, 5 and 8
		h.txn(&AddExtTxnPartitions{TxnProducer: h.prod("a", a), Partitions: []TopicPartition{tp}, Firsts: []int64{m - 2}})
		h.txn(&EndTxn{TxnProducer: h.prod("a", a), Commit: false})
		h.txn(&CompleteTxn{TxnProducer: h.prod("a", a), Partitions: []TopicPartition{tp}, Offsets: []int64{m}})
	}
	if got := h.f.ExtOldestAborted(); got[tp] != 2 || len(got) != 1 {
		t.Fatalf("oldest aborted %v, want x/0 at 2", got)
	}
	if r := h.txn(prune); r.Code != 0 {
		t.Fatalf("prune: %+v", r)
	}
	for _, f := range []*FSM{h.f, restoredCopy(t, h.f)} {
		if got := f.ExtAbortedTxns(tp, 0, 100); len(got) != 1 || got[0].LastOffset != 8 || got[0].FirstOffset != 6 {
			t.Fatalf("aborted after the prune %+v, want only 6..8", got)
		}
	}
}
