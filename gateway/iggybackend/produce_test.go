package iggybackend

import "testing"

func TestProducerRemembersBatchOffsets(t *testing.T) {
	ps := newProducer(0)
	ps.remember(0, 10, 100)      // sequences 0-9 at offsets 100-109
	ps.remember(10, 5, 110)      // contiguous: joins the run
	ps.remember(15, 5, 200)      // other writes in between: a new run
	ps.remember(1<<31-3, 6, 300) // wraps: 2147483645..2147483647, 0..2
	if len(ps.runs) != 3 {
		t.Errorf("runs = %v, want three (two contiguous batches joined)", ps.runs)
	}
	for _, c := range []struct {
		seq  int32
		want int64
		ok   bool
	}{
		// 0..2 were written again after the wrap: the newer run answers.
		{0, 303, true}, {1, 304, true}, {9, 109, true}, {10, 110, true}, {14, 114, true},
		{15, 200, true}, {19, 204, true}, {20, 0, false},
		{1<<31 - 3, 300, true}, {1<<31 - 1, 302, true}, {2, 305, true},
	} {
		got, ok := ps.offsetOf(c.seq)
		if ok != c.ok || got != c.want {
			t.Errorf("offsetOf(%d) = %d, %v; want %d, %v", c.seq, got, ok, c.want, c.ok)
		}
	}
}

func TestProducerRunsAreBounded(t *testing.T) {
	ps := newProducer(0)
	for i := range int64(1000) {
		ps.remember(int32(i), 1, 2*i) // never contiguous in offsets
	}
	if len(ps.runs) != rememberRuns {
		t.Fatalf("%d runs kept, want %d", len(ps.runs), rememberRuns)
	}
	if _, ok := ps.offsetOf(999 - rememberRuns); ok {
		t.Error("a run older than the bound is still remembered")
	}
	if off, ok := ps.offsetOf(999); !ok || off != 1998 {
		t.Errorf("offsetOf(999) = %d, %v; want 1998", off, ok)
	}
}
