package iggybackend

import (
	"errors"
	"log/slog"
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
