package iggybackend

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
	"github.com/kgate/kgate/gateway/records"
)

// TestAlignCount: a poll ends where a stored batch ends when one is known
// near its count, and keeps its count otherwise.
func TestAlignCount(t *testing.T) {
	p := &partition{}
	for _, b := range [][2]int64{{0, 100}, {100, 100}, {200, 2000}, {2200, 50}} {
		p.noteBatch(b[0], b[1])
	}
	for _, c := range []struct {
		offset int64
		count  int
		want   int
	}{
		{0, 250, 200},     // the last start within the count
		{0, 150, 100},     // ditto
		{0, 120, 100},     // ditto
		{150, 100, 50},    // from inside a batch, to its end
		{200, 1500, 2000}, // the next start lies beyond, within twice the count
		{200, 500, 500},   // too far beyond: as asked
		{2200, 30, 50},    // the last known batch
		{2250, 10, 10},    // past what is known
		{3000, 10, 10},
	} {
		if got := p.alignCount(c.offset, c.count); got != c.want {
			t.Errorf("alignCount(%d, %d) = %d, want %d", c.offset, c.count, got, c.want)
		}
	}
	// A batch stored below the known starts: the partition went back.
	p.noteBatch(50, 10)
	if got := p.alignCount(0, 250); got != 250 {
		t.Errorf("after the partition went back alignCount(0, 250) = %d, want 250", got)
	}
	if got := p.alignCount(50, 15); got != 10 {
		t.Errorf("alignCount(50, 15) = %d, want 10 (the batch stored after going back)", got)
	}
	for i := range int64(5 * maxStarts) {
		p.noteBatch(1000+i*3, 3)
	}
	if len(p.starts) > maxStarts || !slices.IsSorted(p.starts) {
		t.Fatalf("%d starts kept (at most %d), sorted %v", len(p.starts), maxStarts, slices.IsSorted(p.starts))
	}
	last := int64(1000 + (5*maxStarts-1)*3)
	if got := p.alignCount(last-30, 31); got != 30 {
		t.Errorf("alignCount near the newest batches = %d, want 30", got)
	}
}

// TestLearnStarts: the starts a poll's reply shows (where the append
// time changes, and a partition's offset 0) join the starts of the node's
// own sends, and polls then end on them.
func TestLearnStarts(t *testing.T) {
	p := &partition{}
	p.noteBatch(5000, 100) // a send of this node, later in the partition
	msg := func(off, ts uint64) iggy.PolledMessage { return iggy.PolledMessage{Offset: off, Timestamp: ts} }
	var reply []iggy.PolledMessage
	for off := range uint64(300) {
		reply = append(reply, msg(off, 10+off/100)) // batches at 0, 100 and 200
	}
	p.learnStarts(reply)
	if want := []int64{0, 100, 200, 5000, 5100}; !slices.Equal(p.starts, want) {
		t.Fatalf("starts %v, want %v", p.starts, want)
	}
	if got := p.alignCount(0, 250); got != 200 {
		t.Errorf("alignCount(0, 250) = %d, want 200", got)
	}
	// A reply from inside a batch: its first message is not a start.
	p.learnStarts([]iggy.PolledMessage{msg(350, 20), msg(351, 20), msg(352, 21)})
	if want := []int64{0, 100, 200, 352, 5000, 5100}; !slices.Equal(p.starts, want) {
		t.Fatalf("starts %v, want %v", p.starts, want)
	}
	p.learnStarts(reply) // known already
	if len(p.starts) != 6 {
		t.Fatalf("starts %v after learning the same again", p.starts)
	}
	for i := range uint64(2 * maxStarts) {
		p.learnStarts([]iggy.PolledMessage{msg(10_000+2*i, i), msg(10_001+2*i, i+1)})
	}
	if len(p.starts) > maxStarts || !slices.IsSorted(p.starts) || p.starts[len(p.starts)-1] != int64(10_001+2*(2*maxStarts-1)) {
		t.Fatalf("%d starts kept (at most %d, the newest), sorted %v", len(p.starts), maxStarts, slices.IsSorted(p.starts))
	}
}

// produceSized produces batches of the given record counts (1,000-byte
// values "v<offset>") and returns the offsets where each starts, and the
// end.
func produceSized(t *testing.T, h *harness, topic string, sizes []int) []int64 {
	t.Helper()
	starts := []int64{0}
	n := 0
	for _, size := range sizes {
		var recs []records.Record
		for range size {
			recs = append(recs, records.Record{Value: []byte(fmt.Sprintf("v%06d%s", n, bytes.Repeat([]byte("x"), 993))), Timestamp: 1})
			n++
		}
		res := h.produce(topic, 0, batch(t, plain, recs...))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if res.BaseOffset != starts[len(starts)-1] {
			t.Fatalf("batch stored at %d, want %d", res.BaseOffset, starts[len(starts)-1])
		}
		starts = append(starts, int64(n))
	}
	return starts
}

// readFrom reads one answer of at most maxBytes from off and returns its
// records.
// readAll reads a partition from offset 0 to end in answers of maxBytes,
// checking every record and that nothing is missing.
func readAll(t *testing.T, h *harness, topic string, end int64, maxBytes int) {
	t.Helper()
	var got []records.Record
	for off := int64(0); off < end; {
		recs := readFrom(t, h, topic, off, maxBytes)
		if len(recs) == 0 {
			t.Fatalf("empty answer at %d of %d", off, end)
		}
		checkRecords(t, recs, off)
		got = append(got, recs...)
		off += int64(len(recs))
	}
	if int64(len(got)) != end {
		t.Fatalf("read %d records, want %d", len(got), end)
	}
}

func readFrom(t *testing.T, h *harness, topic string, off int64, maxBytes int) []records.Record {
	t.Helper()
	res, err := h.b.Read(h.ctx, topic, 0, off, maxBytes)
	if err != nil {
		t.Fatalf("read at %d: %v", off, err)
	}
	var got []records.Record
	for b := res.Records; len(b) > 0; {
		hdr, recs, err := records.Records(b, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recs...)
		b = b[hdr.Size():]
	}
	return got
}

// checkRecords fails unless recs are the records from off on, in order.
func checkRecords(t *testing.T, recs []records.Record, off int64) {
	t.Helper()
	for i, r := range recs {
		want := off + int64(i)
		if r.Offset != want || string(r.Value[:7]) != fmt.Sprintf("v%06d", want) {
			t.Fatalf("record %d from %d: offset %d value %.7q, want offset %d", i, off, r.Offset, r.Value, want)
		}
	}
}

// TestPollsEndOnStoredBatches: against a current-dialect server, a
// consumer reading in answers far smaller than a poll reads every record
// once and in order, and every poll kgate makes for it starts and ends
// where a batch it sent starts (or at the partition's end): iggy-server
// 0.9 serves such polls without cutting a stored batch.
func TestPollsEndOnStoredBatches(t *testing.T) {
	h := newHarness(t, iggy.Current)
	h.create("aligned", 1, nil)
	starts := produceSized(t, h, "aligned", []int{700, 1300, 900, 2500, 400, 1800, 300, 1100})
	end := starts[len(starts)-1]
	before := len(h.srv.Polls())
	readAll(t, h, "aligned", end, 100_000) // about 95 records an answer
	polls := h.srv.Polls()[before:]
	// Read-aheads still running when the last answer was made finish
	// meanwhile; any of them is checked the same way.
	if len(polls) == 0 || len(polls) > 8 {
		t.Fatalf("%d polls for %d records in answers of about 95: want a few large ones", len(polls), end)
	}
	for _, p := range polls {
		if p.Kind != uint8(iggy.PollOffset) {
			continue
		}
		from, to := int64(p.Value), int64(p.Value)+int64(p.Count)
		if !slices.Contains(starts, from) || to < end && !slices.Contains(starts, to) {
			t.Errorf("poll of %d messages from %d does not start and end on the stored batches %v", p.Count, from, starts)
		}
	}
}

// TestKeptRestDroppedOnDoubt: what a poll kept past an answer is served
// only to the read that asks for exactly its first offset of the same
// partition as it was: a read elsewhere gets the records it asked for,
// retention past the kept records gives OFFSET_OUT_OF_RANGE, and after the
// partition went back the records are polled afresh.
func TestKeptRestDroppedOnDoubt(t *testing.T) {
	forDialects(t, func(t *testing.T, d iggy.Dialect) {
		h := newHarness(t, d)
		h.create("rest", 1, nil)
		starts := produceSized(t, h, "rest", []int{500, 500})
		end := starts[len(starts)-1]
		p := h.b.topics["rest"].parts[0]
		kept := func() int64 {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.ahead == nil {
				return -1
			}
			return p.ahead.offset
		}
		first := readFrom(t, h, "rest", 0, 20_000)
		checkRecords(t, first, 0)
		x := int64(len(first))
		if kept() != x {
			t.Fatalf("after an answer of %d records the partition keeps %d, want %d", x, kept(), x)
		}
		// A read elsewhere (the consumer seeked back, or forward).
		for _, off := range []int64{x - 10, x + 40, 0, x} {
			recs := readFrom(t, h, "rest", off, 20_000)
			if len(recs) == 0 {
				t.Fatalf("nothing read at %d", off)
			}
			checkRecords(t, recs, off)
		}
		// The partition went back (Iggy lost records, or the topic was
		// re-created behind kgate): a rest from before is not served.
		off := x + 200
		readFrom(t, h, "rest", off-20, 20_000)
		if kept() < 0 {
			t.Fatal("nothing kept after a partial answer")
		}
		at := kept()
		n := h.srv.Requests(iggy.CodePollMessages)
		p.wentBack(end, end)
		recs := readFrom(t, h, "rest", at, 20_000)
		checkRecords(t, recs, at)
		if h.srv.Requests(iggy.CodePollMessages) == n {
			t.Fatal("a read after the partition went back was served what was kept before")
		}
		// Retention removed the records kept for the next read.
		readFrom(t, h, "rest", at-20, 20_000)
		at = kept()
		if at < 0 {
			t.Fatal("nothing kept after a partial answer")
		}
		p.observe(iggy.PartitionInfo{ID: p.iggyID, CurrentOffset: uint64(end - 1), MessagesCount: uint64(end - at - 5)}, p.b.now())
		if _, err := h.b.Read(h.ctx, "rest", 0, at, 20_000); !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Fatalf("read at %d below the log start %d: %v, want OFFSET_OUT_OF_RANGE", at, at+5, err)
		}
	})
}

// TestManyPartitionsPollByTheirLimit: a consumer reading many partitions
// at once gets large polls with rests kept for a few of them only; the
// others are polled by the client's byte limit, as many rests would be
// dropped before their reads come.
func TestManyPartitionsPollByTheirLimit(t *testing.T) {
	h := newHarness(t, iggy.Current)
	const parts, per = 30, 300
	h.create("many", parts, nil)
	for i := range int32(parts) {
		var recs []records.Record
		for j := range per {
			recs = append(recs, records.Record{Value: []byte(fmt.Sprintf("v%06d%s", j, bytes.Repeat([]byte("x"), 993))), Timestamp: 1})
		}
		if res := h.produce("many", i, batch(t, plain, recs...)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	before := len(h.srv.Polls())
	const maxBytes = 50_000 // about 48 records
	for i := range int32(parts) {
		res, err := h.b.Read(h.ctx, "many", i, 0, maxBytes)
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("partition %d: %d bytes, %v", i, len(res.Records), err)
		}
	}
	large := 0
	for _, p := range h.srv.Polls()[before:] {
		if p.Count > 2*maxBytes/1000 {
			large++
		}
	}
	if large == 0 || large > keepRoom {
		t.Fatalf("%d of %d partitions polled more than their limit: want between 1 and %d", large, parts, keepRoom)
	}
}

// TestPollsOfOthersBatchesEndOnThem: a node that sent none of a
// partition's batches (it took the partition over, or Iggy clients wrote
// them) learns where they start from what its polls return, so when it
// reads them again (another consumer group, a consumer that seeked back)
// every poll starts and ends where a stored batch does, as for batches it
// sent itself; and each reader reads every record once and in order.
func TestPollsOfOthersBatchesEndOnThem(t *testing.T) {
	w := newHarness(t, iggy.Current)
	w.create("others", 1, nil)
	starts := produceSized(t, w, "others", []int{700, 1300, 900, 2500, 400, 1800, 300, 1100, 1500, 600})
	end := starts[len(starts)-1]
	r := newHarnessOn(t, w.srv, func(c *Config) { c.Nodes = &fakeNodes{self: 2, ids: []int32{2}} })
	readThrough := func() []iggytest.PollRequest {
		before := len(w.srv.Polls())
		readAll(t, r, "others", end, 300_000) // about 290 records an answer
		return w.srv.Polls()[before:]
	}
	cut := 0
	for _, p := range readThrough() {
		if from, to := int64(p.Value), int64(p.Value)+int64(p.Count); !slices.Contains(starts, from) || to < end && !slices.Contains(starts, to) {
			cut++
		}
	}
	if cut == 0 {
		t.Fatal("the first reading's polls all fell on the stored batches: the test shows nothing")
	}
	for _, p := range readThrough() {
		if p.Kind != uint8(iggy.PollOffset) {
			continue
		}
		from, to := int64(p.Value), int64(p.Value)+int64(p.Count)
		if !slices.Contains(starts, from) || to < end && !slices.Contains(starts, to) {
			t.Errorf("read again: poll of %d messages from %d does not start and end on the stored batches %v", p.Count, from, starts)
		}
	}
}
