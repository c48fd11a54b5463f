package iggybackend

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

// txnFSM is the replicated state a node's backend reads, driven by hand.
type txnFSM struct {
	t   *testing.T
	f   *fsm.FSM
	idx uint64
}

func newTxnFSM(t *testing.T) *txnFSM {
	f, err := fsm.Open(fsm.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	s := &txnFSM{t: t, f: f}
	s.apply(&fsm.SetFeatureLevel{Level: fsm.LevelExternalTxns})
	return s
}

func (s *txnFSM) apply(c fsm.Command) *fsm.TxnResult {
	s.t.Helper()
	s.idx++
	r := s.f.Apply(s.idx, fsm.Encode(c))
	if tr, ok := r.(*fsm.TxnResult); ok {
		if tr.Code != 0 {
			s.t.Fatalf("%s: code %d", c.Kind(), tr.Code)
		}
		return tr
	}
	return nil
}

// A transactional producer over the backend, as the coordinator drives it:
// records held back by the last stable offset until the marker, an abort
// listed for read_committed, markers read back as control batches; a
// batch of a partition not (yet) in the transaction here waits for this
// node's FSM, and a fenced epoch is refused.
func TestTransactionsOverIggy(t *testing.T) {
	forDialects(t, func(t *testing.T, d iggy.Dialect) {
		st := newTxnFSM(t)
		h := newHarness(t, d, func(c *Config) { c.Txns = st.f })
		h.create("tx", 1, nil)
		h.produce("tx", 0, batch(t, plain, records.Record{Value: []byte("before")}))
		tp := fsm.TopicPartition{Topic: "tx", Partition: 0}

		init := st.apply(&fsm.InitTxnProducer{TransactionalID: "a", TimeoutMs: 60_000, ExpectedID: -1, ExpectedEpoch: -1})
		prod := fsm.TxnProducer{TransactionalID: "a", ProducerID: init.ProducerID, Epoch: init.Epoch}
		txnBld := records.Builder{ProducerID: init.ProducerID, ProducerEpoch: init.Epoch, Transactional: true}

		next, codes := h.b.NextOffsets(h.ctx, []fsm.TopicPartition{tp})
		if codes[0] != 0 || next[0] != 1 {
			t.Fatalf("next offset %d, code %d", next[0], codes[0])
		}
		// The batch may reach this node before its FSM has the partition in
		// the transaction: it then waits for it.
		done := make(chan gateway.ProduceResult, 1)
		pb := withTP(batch(t, txnBld, records.Record{Value: []byte("t0")}), "tx", 0)
		go func() { done <- h.b.Produce(h.ctx, []gateway.ProduceBatch{pb})()[0] }()
		st.apply(&fsm.AddExtTxnPartitions{TxnProducer: prod, Partitions: []fsm.TopicPartition{tp}, Firsts: next})
		if res := <-done; res.Err != nil || res.BaseOffset != 1 {
			t.Fatalf("transactional batch: %+v", res)
		}
		seq1 := txnBld
		seq1.BaseSequence = 1
		if res := h.produce("tx", 0, batch(t, seq1, records.Record{Value: []byte("t1")})); res.Err != nil {
			t.Fatal(res.Err)
		}
		if lso, _ := h.b.LastStableOffset("tx", 0); lso != 1 {
			t.Fatalf("LSO %d with the transaction open, want 1", lso)
		}

		// Abort: the marker takes offset 3.
		st.apply(&fsm.EndTxn{TxnProducer: prod, Commit: false})
		offs, err := h.b.WriteMarker(h.ctx, prod.ProducerID, prod.Epoch, false, 1_750_000_000_000, []fsm.TopicPartition{tp, {Topic: "gone"}})
		if err != nil || offs[0] != 3 || offs[1] != -1 {
			t.Fatalf("markers at %v, %v", offs, err)
		}
		st.apply(&fsm.CompleteTxn{TxnProducer: prod, Partitions: []fsm.TopicPartition{tp}, Offsets: offs[:1]})
		if lso, _ := h.b.LastStableOffset("tx", 0); lso != 4 {
			t.Fatalf("LSO %d after the abort, want 4", lso)
		}
		if got := h.b.AbortedTransactions("tx", 0, 0, 4); len(got) != 1 ||
			got[0] != (gateway.AbortedTransaction{ProducerID: prod.ProducerID, FirstOffset: 1}) {
			t.Fatalf("aborted %+v", got)
		}

		res, err := h.b.Read(h.ctx, "tx", 0, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		type batchView struct {
			base         int64
			n            int32
			pid          int64
			txn, control bool
		}
		var got []batchView
		for b := res.Records; len(b) > 0; {
			hdr, err := records.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, batchView{hdr.BaseOffset, hdr.NumRecords, hdr.ProducerID, hdr.Transactional(), hdr.Control()})
			b = b[hdr.Size():]
		}
		want := []batchView{{0, 1, -1, false, false}, {1, 2, prod.ProducerID, true, false}, {3, 1, prod.ProducerID, true, true}}
		if len(got) != len(want) {
			t.Fatalf("batches %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("batches %+v, want %+v", got, want)
			}
		}

		// A second producer fences the first: its batches are refused.
		st.apply(&fsm.InitTxnProducer{TransactionalID: "a", TimeoutMs: 60_000, ExpectedID: -1, ExpectedEpoch: -1})
		seq2 := txnBld
		seq2.BaseSequence = 2
		if res := h.produce("tx", 0, batch(t, seq2, records.Record{Value: []byte("zombie")})); !errors.Is(res.Err, kerr.InvalidProducerEpoch) {
			t.Fatalf("fenced producer: %v, want INVALID_PRODUCER_EPOCH", res.Err)
		}
	})
}

// A transactional batch whose partition this node's FSM never sees added
// is refused with a retriable NOT_ENOUGH_REPLICAS after the wait.
func TestTransactionalBatchOutsideItsTransaction(t *testing.T) {
	st := newTxnFSM(t)
	h := newHarness(t, iggy.Current, func(c *Config) { c.Txns = st.f })
	h.create("tx", 1, nil)
	init := st.apply(&fsm.InitTxnProducer{TransactionalID: "a", TimeoutMs: 60_000, ExpectedID: -1, ExpectedEpoch: -1})
	bld := records.Builder{ProducerID: init.ProducerID, ProducerEpoch: init.Epoch, Transactional: true}
	start := time.Now()
	if res := h.produce("tx", 0, batch(t, bld, records.Record{Value: []byte("v")})); !errors.Is(res.Err, kerr.NotEnoughReplicas) {
		t.Fatalf("batch outside its transaction: %v, want NOT_ENOUGH_REPLICAS", res.Err)
	}
	if waited := time.Since(start); waited < caughtUpWait {
		t.Fatalf("answered after %v, before the %v wait", waited, caughtUpWait)
	}
	if _, end, _ := h.b.Offsets(h.ctx, "tx", 0); end != 0 {
		t.Fatalf("the refused batch was written: end %d", end)
	}
}

func withTP(pb gateway.ProduceBatch, topic string, p int32) gateway.ProduceBatch {
	pb.Topic, pb.Partition = topic, p
	return pb
}

// fenceHook is the FSM with a fault hook: the first ExtOngoing after it is
// armed (the last look of a batch's check) answers what the FSM had, after
// running the hook, which changes the state behind that answer: the check
// passed just before.
type fenceHook struct {
	*fsm.FSM
	mu   sync.Mutex
	hook func()
}

func (f *fenceHook) ExtOngoing(tp fsm.TopicPartition, pid int64) bool {
	open := f.FSM.ExtOngoing(tp, pid)
	f.mu.Lock()
	hook := f.hook
	f.hook = nil
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return open
}

// A zombie's transactional batch that passed its check a moment before a
// second producer with its transactional id fenced it, and before the
// coordinator wrote the abort marker, must not land in Iggy after the
// marker (a read_committed reader would take it for a committed record):
// the partition's queue checks it again right before the send and refuses
// it with INVALID_PRODUCER_EPOCH. Likewise a batch of a transaction that
// is being committed: INVALID_TXN_STATE.
func TestBatchCheckedBeforeTheMarkerLandsBeforeIt(t *testing.T) {
	forDialects(t, func(t *testing.T, d iggy.Dialect) {
		st := newTxnFSM(t)
		fh := &fenceHook{FSM: st.f}
		h := newHarness(t, d, func(c *Config) { c.Txns = fh })
		h.create("z", 1, nil)
		tp := fsm.TopicPartition{Topic: "z", Partition: 0}
		init := st.apply(&fsm.InitTxnProducer{TransactionalID: "z", TimeoutMs: 60_000, ExpectedID: -1, ExpectedEpoch: -1})
		prod := fsm.TxnProducer{TransactionalID: "z", ProducerID: init.ProducerID, Epoch: init.Epoch}
		add := func(prod fsm.TxnProducer) {
			next, codes := h.b.NextOffsets(h.ctx, []fsm.TopicPartition{tp})
			if codes[0] != 0 {
				t.Fatalf("next offset: code %d", codes[0])
			}
			st.apply(&fsm.AddExtTxnPartitions{TxnProducer: prod, Partitions: []fsm.TopicPartition{tp}, Firsts: next})
		}
		add(prod)
		bld := records.Builder{ProducerID: prod.ProducerID, ProducerEpoch: prod.Epoch, Transactional: true}
		if res := h.produce("z", 0, batch(t, bld, records.Record{Value: []byte("open")})); res.Err != nil || res.BaseOffset != 0 {
			t.Fatalf("first batch: %+v", res)
		}
		// complete does what the coordinator does once the transaction
		// is prepared: the markers, then CompleteTxn.
		var marker int64 = -1
		complete := func(commit bool) {
			v, _ := st.f.Transaction("z")
			offs, err := h.b.WriteMarker(h.ctx, v.ProducerID, v.Epoch, commit, 1_750_000_000_000, []fsm.TopicPartition{tp})
			if err != nil {
				t.Errorf("marker: %v", err)
				return
			}
			marker = offs[0]
			st.apply(&fsm.CompleteTxn{TxnProducer: fsm.TxnProducer{TransactionalID: "z", ProducerID: v.ProducerID, Epoch: v.Epoch},
				Commit: commit, Partitions: []fsm.TopicPartition{tp}, Offsets: offs})
		}

		// The zombie's next batch passes its check; then a second producer
		// fences it and its transaction is aborted.
		fh.mu.Lock()
		fh.hook = func() {
			st.idx++
			r := st.f.Apply(st.idx, fsm.Encode(&fsm.InitTxnProducer{TransactionalID: "z", TimeoutMs: 60_000, ExpectedID: -1, ExpectedEpoch: -1}))
			if tr, _ := r.(*fsm.TxnResult); tr == nil || tr.Code != kerr.ConcurrentTransactions.Code {
				t.Errorf("fencing init: %+v", r)
				return
			}
			complete(false)
		}
		fh.mu.Unlock()
		seq1 := bld
		seq1.BaseSequence = 1
		if res := h.produce("z", 0, batch(t, seq1, records.Record{Value: []byte("zombie")})); !errors.Is(res.Err, kerr.InvalidProducerEpoch) {
			t.Fatalf("zombie batch checked before the fence: %+v, want INVALID_PRODUCER_EPOCH", res)
		}
		if marker != 1 {
			t.Fatalf("abort marker at %d, want 1", marker)
		}

		// The new producer's transaction: a batch that passed its check as
		// the commit began is refused, not written after the commit marker.
		init2 := st.apply(&fsm.InitTxnProducer{TransactionalID: "z", TimeoutMs: 60_000, ExpectedID: -1, ExpectedEpoch: -1})
		prod2 := fsm.TxnProducer{TransactionalID: "z", ProducerID: init2.ProducerID, Epoch: init2.Epoch}
		add(prod2)
		bld2 := records.Builder{ProducerID: prod2.ProducerID, ProducerEpoch: prod2.Epoch, Transactional: true}
		if res := h.produce("z", 0, batch(t, bld2, records.Record{Value: []byte("committed")})); res.Err != nil || res.BaseOffset != 2 {
			t.Fatalf("new producer's batch: %+v", res)
		}
		fh.mu.Lock()
		fh.hook = func() {
			st.apply(&fsm.EndTxn{TxnProducer: prod2, Commit: true})
			complete(true)
		}
		fh.mu.Unlock()
		seq1 = bld2
		seq1.BaseSequence = 1
		if res := h.produce("z", 0, batch(t, seq1, records.Record{Value: []byte("late")})); !errors.Is(res.Err, kerr.InvalidTxnState) {
			t.Fatalf("batch checked before the commit: %+v, want INVALID_TXN_STATE", res)
		}
		if marker != 3 {
			t.Fatalf("commit marker at %d, want 3", marker)
		}

		// Nothing landed after either marker: the partition holds each
		// producer's record, then its marker.
		res, err := h.b.Read(h.ctx, "z", 0, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for b := res.Records; len(b) > 0; {
			hdr, err := records.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d:%d/%d control=%v", hdr.BaseOffset, hdr.ProducerID, hdr.ProducerEpoch, hdr.Control()))
			b = b[hdr.Size():]
		}
		want := []string{
			fmt.Sprintf("0:%d/%d control=false", prod.ProducerID, prod.Epoch),
			fmt.Sprintf("1:%d/%d control=true", prod.ProducerID, prod.Epoch+1), // the fencing epoch
			fmt.Sprintf("2:%d/%d control=false", prod.ProducerID, prod2.Epoch),
			fmt.Sprintf("3:%d/%d control=true", prod.ProducerID, prod2.Epoch),
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || res.HighWatermark != 4 {
			t.Fatalf("partition holds %v (high watermark %d), want %v", got, res.HighWatermark, want)
		}
	})
}

// The first batch of a producer's next transaction can reach a node whose
// FSM still has the previous one being completed (PrepareAbort, its marker
// written, CompleteTxn not applied here yet): it waits for the node to
// catch up and is written, not refused.
func TestNextTransactionsBatchWaitsForThePreviousCompletion(t *testing.T) {
	st := newTxnFSM(t)
	looked := &lookSignal{FSM: st.f, looked: make(chan struct{})}
	h := newHarness(t, iggy.Current, func(c *Config) { c.Txns = looked })
	h.create("tx", 1, nil)
	tp := fsm.TopicPartition{Topic: "tx", Partition: 0}
	init := st.apply(&fsm.InitTxnProducer{TransactionalID: "a", TimeoutMs: 60_000, ExpectedID: -1, ExpectedEpoch: -1})
	prod := fsm.TxnProducer{TransactionalID: "a", ProducerID: init.ProducerID, Epoch: init.Epoch}
	bld := records.Builder{ProducerID: init.ProducerID, ProducerEpoch: init.Epoch, Transactional: true}
	st.apply(&fsm.AddExtTxnPartitions{TxnProducer: prod, Partitions: []fsm.TopicPartition{tp}, Firsts: []int64{0}})
	if res := h.produce("tx", 0, batch(t, bld, records.Record{Value: []byte("aborted")})); res.Err != nil {
		t.Fatal(res.Err)
	}
	st.apply(&fsm.EndTxn{TxnProducer: prod, Commit: false})
	offs, err := h.b.WriteMarker(h.ctx, prod.ProducerID, prod.Epoch, false, 1_750_000_000_000, []fsm.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	next := bld
	next.BaseSequence = 1
	done := make(chan gateway.ProduceResult, 1)
	looked.arm()
	go func() { done <- h.produce("tx", 0, batch(t, next, records.Record{Value: []byte("next")})) }()
	<-looked.looked // the batch found the previous transaction ending
	// What the coordinator applied meanwhile reaches this node.
	st.apply(&fsm.CompleteTxn{TxnProducer: prod, Partitions: []fsm.TopicPartition{tp}, Offsets: offs})
	st.apply(&fsm.AddExtTxnPartitions{TxnProducer: prod, Partitions: []fsm.TopicPartition{tp}, Firsts: []int64{offs[0] + 1}})
	if res := <-done; res.Err != nil || res.BaseOffset != offs[0]+1 {
		t.Fatalf("the next transaction's batch: %+v, want written at %d", res, offs[0]+1)
	}
}

// lookSignal is the FSM that closes looked at the first TxnProducerState
// after arm.
type lookSignal struct {
	*fsm.FSM
	armed  atomic.Bool
	once   sync.Once
	looked chan struct{}
}

func (l *lookSignal) arm() { l.armed.Store(true) }

func (l *lookSignal) TxnProducerState(pid int64) (int16, fsm.TxnState, bool) {
	e, s, ok := l.FSM.TxnProducerState(pid)
	if l.armed.Load() {
		l.once.Do(func() { close(l.looked) })
	}
	return e, s, ok
}
