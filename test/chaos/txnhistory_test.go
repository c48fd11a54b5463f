package chaos

import (
	"testing"
)

// goodTxnHistory is a correct run: three inputs (one send unacknowledged
// but written), each copied once; a committed transaction, an aborted one
// and one of unknown outcome that did not commit; a reader that saw only
// committed records.
func goodTxnHistory() *TxnHistory {
	h := &TxnHistory{}
	h.AddInput(Produce{Value: "in-0", Acked: true, Partition: 0, Offset: 0})
	h.AddInput(Produce{Value: "in-1", Acked: true, Partition: 1, Offset: 0})
	h.AddInput(Produce{Value: "in-2", Err: "timed out"})
	h.AddAtom(AtomTxn{ID: 0, Size: 2, Commit: true, Ended: true})
	h.AddAtom(AtomTxn{ID: 1, Size: 2, Commit: false, Ended: true})
	h.AddAtom(AtomTxn{ID: 2, Size: 2, Commit: true, Err: "coordinator gone"})
	in := []Read{
		{Reader: "final", Partition: 0, Offset: 0, Value: "in-0"},
		{Reader: "final", Partition: 0, Offset: 1, Value: "in-2"},
		{Reader: "final", Partition: 1, Offset: 0, Value: "in-1"},
	}
	out := []Read{
		{Reader: "final", Partition: 0, Offset: 0, Value: OutValue("in-0")},
		{Reader: "final", Partition: 0, Offset: 1, Value: AtomValue(0, 0)},
		{Reader: "final", Partition: 0, Offset: 5, Value: OutValue("in-2")},
		{Reader: "final", Partition: 0, Offset: 7, Value: EndValue(0)},
		{Reader: "final", Partition: 1, Offset: 0, Value: AtomValue(0, 1)},
		{Reader: "final", Partition: 1, Offset: 2, Value: OutValue("in-1")},
		{Reader: "final", Partition: 1, Offset: 3, Value: EndValue(1)},
	}
	h.SetFinal(in, out)
	for _, r := range out[:3] {
		r.Reader = "committed"
		h.AddRead(r)
	}
	return h
}

func TestTxnCheckerPassesACorrectRun(t *testing.T) {
	if as := goodTxnHistory().CheckTxn(true, true); len(as) != 0 {
		t.Fatalf("anomalies in a correct history: %v", as)
	}
}

// TestTxnCheckerFindsFaults: each purpose-built faulty history yields its
// anomaly.
func TestTxnCheckerFindsFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    string
		drained bool
		break_  func(h *TxnHistory)
	}{
		{"aborted transaction read during the run", AbortedRead, true, func(h *TxnHistory) {
			h.AddRead(Read{Reader: "committed", Partition: 1, Offset: 1, Value: AtomValue(1, 1)})
		}},
		{"aborted transaction in the final read", AbortedRead, true, func(h *TxnHistory) {
			h.FinalOut = append(h.FinalOut, Read{Partition: 0, Offset: 2, Value: AtomValue(1, 0)}, Read{Partition: 1, Offset: 1, Value: AtomValue(1, 1)})
		}},
		{"uncommitted record read during the run", IntermediateRead, true, func(h *TxnHistory) {
			h.AddRead(Read{Reader: "committed", Partition: 1, Offset: 1, Value: AtomValue(2, 1)})
		}},
		{"half a transaction committed", TornTxn, true, func(h *TxnHistory) {
			h.FinalOut = append(h.FinalOut, Read{Partition: 0, Offset: 3, Value: AtomValue(2, 0)})
		}},
		{"acknowledged commit missing", LostCommitted, true, func(h *TxnHistory) {
			h.FinalOut = h.FinalOut[:1]
			h.FinalOut = append(h.FinalOut, Read{Partition: 0, Offset: 5, Value: OutValue("in-2")}, Read{Partition: 1, Offset: 2, Value: OutValue("in-1")})
		}},
		{"input offset committed without its output", LostOutput, true, func(h *TxnHistory) {
			h.FinalOut = append(h.FinalOut[:2], h.FinalOut[3:]...) // out:in-2 gone
		}},
		{"input copied twice", DuplicateOutput, true, func(h *TxnHistory) {
			h.FinalOut = append(h.FinalOut, Read{Partition: 1, Offset: 4, Value: OutValue("in-1")})
		}},
		{"transaction record twice", DuplicateOutput, true, func(h *TxnHistory) {
			h.FinalOut = append(h.FinalOut, Read{Partition: 1, Offset: 4, Value: AtomValue(0, 1)})
		}},
		{"copy of nothing", PhantomOutput, true, func(h *TxnHistory) {
			h.FinalOut = append(h.FinalOut, Read{Partition: 1, Offset: 4, Value: OutValue("in-9")})
		}},
		{"acknowledged input lost", Lost, true, func(h *TxnHistory) {
			h.FinalIn = h.FinalIn[1:]
			h.FinalOut = append(h.FinalOut[:0:0], h.FinalOut[1:]...)
		}},
		{"group not drained", UncommittedOffset, false, func(h *TxnHistory) {}},
		{"reader offsets going back", ReadOrder, true, func(h *TxnHistory) {
			h.AddRead(Read{Reader: "committed", Partition: 0, Offset: 1, Value: AtomValue(0, 0)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := goodTxnHistory()
			tc.break_(h)
			as := h.CheckTxn(true, tc.drained)
			if Summary(as)[tc.want] == 0 {
				t.Fatalf("want a %s anomaly, got %v", tc.want, as)
			}
		})
	}
}
