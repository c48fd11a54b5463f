package iggybackend

import (
	"testing"
	"time"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

// DescribeProducers on Iggy: an idempotent producer with its last sequence
// and the time of its last batch; a transactional one with the start of its
// open transaction, which goes once the transaction completes; another node
// (no sequences of its own) still lists the open transaction.
func TestProducersOverIggy(t *testing.T) {
	forDialects(t, func(t *testing.T, d iggy.Dialect) {
		st := newTxnFSM(t)
		h := newHarness(t, d, func(c *Config) { c.Txns = st.f })
		h.create("p", 1, nil)
		other := newHarnessOn(t, h.srv, func(c *Config) { c.Txns = st.f }) // started after the topic: it knows it
		tp := fsm.TopicPartition{Topic: "p", Partition: 0}
		if got, err := h.b.Producers("p", 0); err != nil || len(got) != 0 {
			t.Fatalf("producers of an empty partition: %+v, %v", got, err)
		}

		before := time.Now().UnixMilli()
		idem := records.Builder{ProducerID: 7, ProducerEpoch: 2, BaseSequence: 0}
		if res := h.produce("p", 0, batch(t, idem, records.Record{Value: []byte("a")}, records.Record{Value: []byte("b")})); res.Err != nil {
			t.Fatal(res.Err)
		}
		idem.BaseSequence = 2
		if res := h.produce("p", 0, batch(t, idem, records.Record{Value: []byte("c")})); res.Err != nil || res.BaseOffset != 2 {
			t.Fatalf("second batch: %+v", res)
		}
		after := time.Now().UnixMilli()

		init := st.apply(&fsm.InitTxnProducer{TransactionalID: "x", TimeoutMs: 60_000, ExpectedID: -1, ExpectedEpoch: -1})
		prod := fsm.TxnProducer{TransactionalID: "x", ProducerID: init.ProducerID, Epoch: init.Epoch}
		next, _ := h.b.NextOffsets(h.ctx, []fsm.TopicPartition{tp})
		st.apply(&fsm.AddExtTxnPartitions{TxnProducer: prod, Partitions: []fsm.TopicPartition{tp}, Firsts: next})
		txn := records.Builder{ProducerID: init.ProducerID, ProducerEpoch: init.Epoch, Transactional: true}
		if res := h.produce("p", 0, batch(t, txn, records.Record{Value: []byte("t")})); res.Err != nil || res.BaseOffset != 3 {
			t.Fatalf("transactional batch: %+v", res)
		}

		got, err := h.b.Producers("p", 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("producers: %+v, %v", got, err)
		}
		idemSt, txnSt := got[0], got[1]
		if idemSt.ID != 7 {
			idemSt, txnSt = got[1], got[0]
		}
		if idemSt.ID != 7 || idemSt.Epoch != 2 || idemSt.LastSequence != 2 || idemSt.TxnStart != -1 || idemSt.CoordinatorEpoch != -1 ||
			idemSt.LastTimestamp < before || idemSt.LastTimestamp > after {
			t.Fatalf("idempotent producer %+v, want id 7 epoch 2 last sequence 2, written in [%d, %d], no transaction", idemSt, before, after)
		}
		wantTxn := gateway.ProducerState{ID: init.ProducerID, Epoch: init.Epoch, LastSequence: 0, TxnStart: 3, CoordinatorEpoch: -1}
		if txnSt.LastTimestamp < after {
			t.Fatalf("transactional producer's last timestamp %d, before its batch (after %d)", txnSt.LastTimestamp, after)
		}
		txnSt.LastTimestamp = 0
		if txnSt != wantTxn {
			t.Fatalf("transactional producer %+v, want %+v", txnSt, wantTxn)
		}

		// A node that did not write the partition knows the open transaction.
		if got, err := other.b.Producers("p", 0); err != nil || len(got) != 1 ||
			got[0] != (gateway.ProducerState{ID: init.ProducerID, Epoch: init.Epoch, LastSequence: -1, LastTimestamp: -1, TxnStart: 3, CoordinatorEpoch: -1}) {
			t.Fatalf("producers on another node: %+v, %v", got, err)
		}

		st.apply(&fsm.EndTxn{TxnProducer: prod, Commit: true})
		offs, err := h.b.WriteMarker(h.ctx, prod.ProducerID, prod.Epoch, true, 1_750_000_000_000, []fsm.TopicPartition{tp})
		if err != nil {
			t.Fatal(err)
		}
		st.apply(&fsm.CompleteTxn{TxnProducer: prod, Commit: true, Partitions: []fsm.TopicPartition{tp}, Offsets: offs})
		got, _ = h.b.Producers("p", 0)
		for _, p := range got {
			if p.TxnStart != -1 {
				t.Fatalf("producer %+v still has a transaction after the commit", p)
			}
		}
		if got, _ := other.b.Producers("p", 0); len(got) != 0 {
			t.Fatalf("producers on another node after the commit: %+v", got)
		}
	})
}

// Describing while the partition is written (the race detector checks that
// the sender's changes are read under its lock).
func TestProducersWhileWriting(t *testing.T) {
	h := newHarness(t, iggy.Current)
	h.create("w", 1, nil)
	var batches []gateway.ProduceBatch
	bld := records.Builder{ProducerID: 9, ProducerEpoch: 0}
	for i := range 50 {
		bld.BaseSequence = int32(i)
		batches = append(batches, batch(t, bld, records.Record{Value: []byte("v")}))
	}
	done := make(chan error, 1)
	go func() {
		for _, pb := range batches {
			if res := h.produce("w", 0, pb); res.Err != nil {
				done <- res.Err
				return
			}
		}
		done <- nil
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			got, err := h.b.Producers("w", 0)
			if err != nil || len(got) != 1 || got[0].ID != 9 || got[0].LastSequence != 49 {
				t.Fatalf("producers after 50 batches: %+v, %v", got, err)
			}
			return
		default:
		}
		if _, err := h.b.Producers("w", 0); err != nil {
			t.Fatal(err)
		}
	}
}
