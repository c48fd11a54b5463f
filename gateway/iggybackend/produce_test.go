package iggybackend

import (
	"bytes"
	"testing"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

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

// TestProduceKeepsNoData: the backend says (ReleasesProduceData) that a
// batch's bytes may be reused once Produce's wait has returned, and the
// gateway then reads the next request into them: overwriting every batch
// right after its wait, while more batches (several per round) are on
// their way, changes nothing that is read back.
func TestProduceKeepsNoData(t *testing.T) {
	forDialects(t, func(t *testing.T, d iggy.Dialect) {
		h := newHarness(t, d)
		if !h.b.ReleasesProduceData() {
			t.Fatal("the Iggy backend should release produce data")
		}
		h.create("reuse", 1, nil)
		const batches, perBatch = 40, 50
		var want [][]byte
		var waits []func() []gateway.ProduceResult
		var datas [][]byte
		for i := range batches {
			var recs []records.Record
			for j := range perBatch {
				v := bytes.Repeat([]byte{byte('a' + (i+j)%26)}, 1000+i)
				want = append(want, v)
				recs = append(recs, records.Record{Value: v, Timestamp: 1_700_000_000_000})
			}
			pb := batch(t, plain, recs...)
			pb.Topic, pb.Partition = "reuse", 0
			datas = append(datas, pb.Data)
			waits = append(waits, h.b.Produce(h.ctx, []gateway.ProduceBatch{pb}))
		}
		for i, wait := range waits {
			if res := wait()[0]; res.Err != nil || res.BaseOffset != int64(i*perBatch) {
				t.Fatalf("batch %d: offset %d, %v", i, res.BaseOffset, res.Err)
			}
			for k := range datas[i] {
				datas[i][k] = 0xee // what the gateway's next request might hold
			}
		}
		got, _ := h.readAll("reuse", 0, 0)
		if len(got) != len(want) {
			t.Fatalf("read %d records, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i].Value, want[i]) {
				t.Fatalf("record %d changed after its batch's buffer was reused: %q…", i, got[i].Value[:min(8, len(got[i].Value))])
			}
		}
	})
}
