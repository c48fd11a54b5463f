package iggybackend

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

// TestReadAheadServesTheNextRead: a consumer reading through a backlog in
// answers smaller than the backlog gets each next answer from what the
// previous poll kept or from the poll started when the previous answer was
// made, every record exactly once and in order; reads poll Iggy about
// once per pollBytes of backlog, and nothing is read ahead at the end.
func TestReadAheadServesTheNextRead(t *testing.T) {
	forDialects(t, func(t *testing.T, d iggy.Dialect) {
		h := newHarness(t, d)
		h.create("backlog", 1, nil)
		const n, per = 6000, 100 // 6 MB: more than one poll's pollBytes
		for i := range n / per {
			var recs []records.Record
			for j := range per {
				recs = append(recs, records.Record{Value: []byte(fmt.Sprintf("v%04d%s", i*per+j, bytes.Repeat([]byte("x"), 990))), Timestamp: 1})
			}
			if res := h.produce("backlog", 0, batch(t, plain, recs...)); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		base := h.srv.Requests(iggy.CodePollMessages) // a legacy produce polls for its offsets
		polls := func() int { return h.srv.Requests(iggy.CodePollMessages) - base }
		p := h.b.topics["backlog"].parts[0]
		var got []records.Record
		off := int64(0)
		answers := 0
		for len(got) < n {
			res, err := h.b.Read(h.ctx, "backlog", 0, off, 20_000) // about 19 records an answer
			if err != nil {
				t.Fatal(err)
			}
			answers++
			if len(res.Records) == 0 {
				t.Fatalf("empty answer at %d of %d", off, n)
			}
			for b := res.Records; len(b) > 0; {
				hdr, recs, err := records.Records(b, 64<<20)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, recs...)
				off = hdr.LastOffset() + 1
				b = b[hdr.Size():]
			}
			p.mu.Lock()
			ahead := p.ahead
			p.mu.Unlock()
			if off < n {
				// The next answer is kept or being polled before it is
				// asked for.
				if ahead == nil || ahead.offset != off {
					t.Fatalf("after reading up to %d of %d the read-ahead is %+v, want one at %d", off, n, ahead, off)
				}
				<-ahead.done
			} else if ahead != nil {
				t.Fatalf("a read-ahead at %d was started at the end of the partition", ahead.offset)
			}
		}
		// 6 MB in polls of pollBytes (4 MiB) or more: two polls, where
		// polls of the answers' size would have been over 300. A legacy
		// server is polled by the answers' size, each read ahead.
		if d == iggy.Current && polls() > 3 {
			t.Fatalf("%d polls for %d answers: reads did not use what earlier polls kept", polls(), answers)
		}
		if d == iggy.Legacy && polls() != answers {
			t.Fatalf("%d polls for %d answers, want one each (the first by the read, the others ahead)", polls(), answers)
		}
		for i, r := range got {
			if want := fmt.Sprintf("v%04d", i); r.Offset != int64(i) || string(r.Value[:5]) != want {
				t.Fatalf("record %d: offset %d value %q, want %s", i, r.Offset, r.Value[:5], want)
			}
		}
	})
}

// TestReadAheadNotServedAfterRecreate: a read-ahead of a topic that is
// deleted and created again under the same name is never used for it.
func TestReadAheadNotServedAfterRecreate(t *testing.T) {
	h := newHarness(t, iggy.Current)
	h.create("again", 1, nil)
	var old []records.Record
	for i := range 40 {
		old = append(old, records.Record{Value: []byte(fmt.Sprintf("old-%02d%s", i, bytes.Repeat([]byte("o"), 990))), Timestamp: 1})
	}
	h.produce("again", 0, batch(t, plain, old...))
	if _, err := h.b.Read(h.ctx, "again", 0, 0, 10_000); err != nil {
		t.Fatal(err)
	}
	h.b.life.Lock()
	started := len(h.b.aheadKept)
	h.b.life.Unlock()
	if started == 0 {
		t.Fatal("no read-ahead after a partial read of a backlog")
	}
	if err := h.b.DeleteTopic(h.ctx, "again"); err != nil {
		t.Fatal(err)
	}
	h.create("again", 1, nil)
	var fresh []records.Record
	for i := range 40 {
		fresh = append(fresh, records.Record{Value: []byte(fmt.Sprintf("new-%02d", i)), Timestamp: 1})
	}
	h.produce("again", 0, batch(t, plain, fresh...))
	got, _ := h.readAll("again", 0, 0)
	if len(got) != 40 {
		t.Fatalf("read %d records of the new topic, want 40", len(got))
	}
	for i, r := range got {
		if want := fmt.Sprintf("new-%02d", i); string(r.Value) != want {
			t.Fatalf("record %d is %.6q, want %s: a read-ahead of the deleted topic was served", i, r.Value, want)
		}
	}
}
