package iggybackend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
	"github.com/kgate/kgate/gateway/records"
)

// The real-server tier of the backend (IGGY_SERVER_BIN): what only a real
// iggy-server shows — crashes, restarts on lost data, id reuse.

func realServer(t *testing.T, durable bool) *iggytest.RealServer {
	t.Helper()
	bin := os.Getenv(iggytest.EnvServerBin)
	if bin == "" {
		t.Skipf("real-server tier SKIPPED: set %s to an iggy-server binary", iggytest.EnvServerBin)
	}
	start := iggytest.StartReal
	if durable {
		start = func(bin, dir string, _ ...string) (*iggytest.RealServer, error) {
			return iggytest.StartRealDurable(bin, dir)
		}
	}
	r, err := start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("iggy-server log:\n%s", r.LogTail(30))
		}
		r.Close()
	})
	return r
}

// readBack reads a partition from its start as a consumer would and
// returns its records and the offsets that Iggy refuses to serve even one
// at a time. Reads get retriable errors until the pool has dropped the
// connections the last kill broke, as a Kafka client's would: each offset
// gets 5 s.
func readBack(t *testing.T, h *harness, topic string) ([]records.Record, []int64) {
	t.Helper()
	var out []records.Record
	var holes []int64
	tp, pp, _ := h.b.part(topic, 0)
	deadline := time.Now().Add(5 * time.Second)
	for off := int64(0); ; {
		res, err := h.b.Read(h.ctx, topic, 0, off, 1<<20)
		if err != nil {
			if _, perr := h.b.poll(h.ctx, tp, pp, iggy.PollOffset, uint64(off), 1); errors.Is(perr, iggy.ErrInvalidOffset) && off < res.HighWatermark {
				holes = append(holes, off)
				off++
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("reads at %d still fail after 5 s: %v", off, err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		deadline = time.Now().Add(5 * time.Second)
		if len(res.Records) == 0 {
			return out, holes
		}
		for b := res.Records; len(b) > 0; {
			hdr, recs, err := records.Records(b, 64<<20)
			if err != nil {
				t.Fatalf("fetched batch does not parse: %v", err)
			}
			out = append(out, recs...)
			off = hdr.LastOffset() + 1
			b = b[hdr.Size():]
		}
	}
}

func value(i int) records.Record {
	return records.Record{Value: fmt.Appendf(nil, "v%d", i), Timestamp: time.Now().UnixMilli()}
}

// TestRealServerLostData: an Iggy server that comes back without records
// kgate acknowledged is noticed and reported (LostData), and no produce is
// answered with an offset below one already acknowledged as if nothing had
// happened.
func TestRealServerLostData(t *testing.T) {
	t.Run("restart on an empty data directory", func(t *testing.T) {
		r := realServer(t, true)
		h := newHarnessAt(t, r.Addr(), r.Username, r.Password, func(c *Config) { c.SaveEvery = 1 })
		h.create("t", 1, nil)
		for i := range 10 {
			if res := h.produce("t", 0, batch(t, plain, value(i))); res.Err != nil || res.BaseOffset != int64(i) {
				t.Fatalf("produce %d: %+v", i, res)
			}
		}
		r.Kill()
		if err := r.Restart(true); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the loss reported", func() bool { return h.b.LostData() > 0 })
		res := h.produce("t", 0, batch(t, plain, value(10)))
		if !errors.Is(res.Err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("produce to the vanished topic: %+v, want UNKNOWN_TOPIC_OR_PARTITION", res)
		}
	})
	t.Run("kill -9 with unsaved messages", func(t *testing.T) {
		// Iggy's default buffering: acknowledged messages not yet on disk.
		r := realServer(t, false)
		h := newHarnessAt(t, r.Addr(), r.Username, r.Password)
		h.create("t", 1, nil)
		for i := range 10 {
			if res := h.produce("t", 0, batch(t, plain, value(i))); res.Err != nil || res.BaseOffset != int64(i) {
				t.Fatalf("produce %d: %+v", i, res)
			}
		}
		r.Kill()
		if err := r.Restart(false); err != nil {
			t.Fatal(err)
		}
		var res gateway.ProduceResult
		for try := 0; ; try++ {
			res = h.produce("t", 0, batch(t, plain, value(10)))
			if res.Err == nil {
				break
			}
			if try == 20 {
				t.Fatalf("produce after the restart keeps failing: %v", res.Err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if h.b.LostData() == 0 {
			t.Fatalf("Iggy lost 10 acknowledged records and the produce was answered offset %d without a report", res.BaseOffset)
		}
		if _, err := h.b.Read(h.ctx, "t", 0, 10, 1<<20); !errors.Is(err, kerr.OffsetOutOfRange) && res.BaseOffset < 10 {
			t.Fatalf("a fetch past the new end: %v, want OFFSET_OUT_OF_RANGE", err)
		}
	})
}

// TestRealServerKill9Idempotent: an idempotent producer retrying every
// failed batch (as Kafka clients do) while the server is killed with
// SIGKILL and restarted on its data: every batch is stored exactly once,
// in order, also those whose send was cut off with an unknown outcome.
func TestRealServerKill9Idempotent(t *testing.T) {
	r := realServer(t, true)
	h := newHarnessAt(t, r.Addr(), r.Username, r.Password, func(c *Config) {
		c.SaveEvery = 1
	})
	h.create("idem", 1, nil)
	const batches, per = 300, 5
	// Two kills: each may cost an offset on iggy-server 0.8.0 (below).
	kills := []int{60, 160}
	var killed sync.WaitGroup
	pending := false // killed and not restarted yet
	failed := 0
	for seq, k := 0, 0; seq < batches; seq++ {
		bld := records.Builder{ProducerID: 7, ProducerEpoch: 0, BaseSequence: int32(seq * per)}
		recs := make([]records.Record, per)
		for i := range recs {
			recs[i] = value(seq*per + i)
		}
		pb := batch(t, bld, recs...)
		if k < len(kills) && seq == kills[k] {
			// Kill while this batch is on its way.
			k++
			pending = true
			killed.Add(1)
			go func() {
				defer killed.Done()
				time.Sleep(time.Millisecond)
				r.Kill()
			}()
		}
		for try := 0; ; try++ {
			res := h.produce("idem", 0, pb)
			if res.Err == nil {
				break
			}
			failed++
			if pending {
				killed.Wait()
				pending = false
				if err := r.Restart(false); err != nil {
					t.Fatal(err)
				}
			}
			if try == 100 {
				t.Fatalf("batch %d: still failing after %d tries: %v", seq, try, res.Err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	got, holes := readBack(t, h, "idem")
	// iggy-server 0.8.0 killed while it writes can keep an offset it
	// never serves again, not even alone and not after another restart,
	// about 1 run in 3 (0.9 never did in the same test): a server defect.
	// kgate answers a read there KAFKA_STORAGE_ERROR, as a broker answers
	// a record it cannot read; such holes must sit where a kill struck.
	if len(holes) > 0 {
		v, _ := iggytest.Version(os.Getenv(iggytest.EnvServerBin))
		if !strings.HasPrefix(v, "0.8.") && !strings.HasPrefix(v, "0.7.") {
			t.Fatalf("iggy-server %s does not serve offsets %v it acknowledged", v, holes)
		}
		for _, o := range holes {
			near := false
			for _, k := range kills {
				near = near || (o >= int64(k*per) && o < int64((k+20)*per))
			}
			if !near {
				t.Fatalf("offset %d cannot be read and is not where a kill struck (kills at %v of %d-record batches)", o, kills, per)
			}
		}
		t.Logf("iggy-server %s lost offsets %v where it was killed (a server defect; reads there get KAFKA_STORAGE_ERROR)", v, holes)
	}
	if len(got)+len(holes) != batches*per {
		t.Fatalf("read back %d records and %d holes, want %d in all (each batch once)", len(got), len(holes), batches*per)
	}
	// Every record once, in order: an idempotent retry across a kill wrote
	// nothing twice.
	next := 0
	for i, rec := range got {
		var v int
		if _, err := fmt.Sscanf(string(rec.Value), "v%d", &v); err != nil || v < next {
			t.Fatalf("record %d is %q after v%d: a batch written twice or out of order", i, rec.Value, next-1)
		}
		next = v + 1
	}
	if failed == 0 {
		t.Fatal("no send failed: the kills did not hit the load")
	}
	t.Logf("%d kills, %d failed sends retried", len(kills), failed)
}

// TestRealServerTopicChurn: while one node keeps producing to a steady
// topic, another deletes, re-creates and grows a topic the first node has
// cached, and creates others that may take its numeric id. The first node
// never writes into the wrong topic: a send to the deleted topic fails,
// and after the re-creation it lands in the new topic only.
func TestRealServerTopicChurn(t *testing.T) {
	r := realServer(t, false)
	a := newHarnessAt(t, r.Addr(), r.Username, r.Password)
	b := newHarnessAt(t, r.Addr(), r.Username, r.Password)
	a.create("steady", 2, nil)
	ctx, stop := context.WithCancel(context.Background())
	var steady sync.WaitGroup
	sent := [2]int{}
	var steadyErr error
	steady.Add(1)
	go func() {
		defer steady.Done()
		for i := 0; ctx.Err() == nil; i++ {
			p := int32(i % 2)
			if res := a.produce("steady", p, batch(t, plain, value(sent[p]))); res.Err != nil {
				steadyErr = fmt.Errorf("partition %d, record %d: %w", p, sent[p], res.Err)
				return
			}
			sent[p]++
		}
	}()

	// serverDefect: iggy-server 0.9.0-edge.5 deletes a topic's partitions
	// on its shard after it answered the delete; a topic created at once
	// gets the same numeric id and, for a moment, shows the deleted one's
	// messages (and the server drops connections as it deletes). Seen
	// about 1 run in 15 on a loaded machine; what kgate sent after the
	// delete never shows there.
	serverDefect := false
	for round := range 5 {
		a.create("churn", 1, nil)
		before := fmt.Sprintf("v%d", round*100)
		if res := a.produce("churn", 0, batch(t, plain, value(round*100))); res.Err != nil {
			t.Fatalf("round %d: %v", round, res.Err)
		}
		// Node b replaces it behind a's back with another topic, which
		// Iggy may give the deleted topic's numeric id.
		if err := b.b.DeleteTopic(b.ctx, "churn"); err != nil {
			t.Fatal(err)
		}
		other := fmt.Sprintf("other-%d", round)
		b.create(other, 1, nil)
		res := a.produce("churn", 0, batch(t, plain, value(round*100+1)))
		if res.Err == nil {
			t.Fatalf("round %d: a send to the deleted topic succeeded (offset %d)", round, res.BaseOffset)
		}
		if recs, _ := b.readAll(other, 0, 0); len(recs) != 0 {
			for _, rec := range recs {
				if string(rec.Value) != before {
					t.Fatalf("round %d: %s holds %q, sent to the deleted topic after its deletion", round, other, rec.Value)
				}
			}
			t.Logf("round %d: %s shows the deleted topic's %d message(s) (the server's deletion still running): stopping the churn", round, other, len(recs))
			serverDefect = true
			break
		}
		// Re-created under the same name and grown: a's next send lands
		// in the new topic.
		b.create("churn", 1, nil)
		if err := b.b.CreatePartitions(b.ctx, "churn", 3); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "node a sees three partitions", func() bool {
			info, ok := a.b.Topic("churn")
			return ok && info.Partitions == 3
		})
		for p := range int32(3) {
			if res := a.produce("churn", p, batch(t, plain, value(round*100+2))); res.Err != nil || res.BaseOffset != 0 {
				t.Fatalf("round %d: send to the re-created topic's partition %d: %+v", round, p, res)
			}
		}
		if err := a.b.DeleteTopic(a.ctx, "churn"); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	steady.Wait()
	if steadyErr != nil {
		if !serverDefect {
			t.Fatalf("steady topic: %v", steadyErr)
		}
		t.Logf("steady topic, while the server deleted the other: %v", steadyErr)
	}
	for p := range int32(2) {
		got, _ := a.readAll("steady", p, 0)
		// A send that failed as the server dropped its connection may have
		// been stored: at most that one record more.
		if len(got) != sent[p] && !(steadyErr != nil && len(got) == sent[p]+1) {
			t.Fatalf("steady partition %d holds %d records, %d were acknowledged", p, len(got), sent[p])
		}
		for i, rec := range got {
			if string(rec.Value) != fmt.Sprintf("v%d", i) {
				t.Fatalf("steady partition %d record %d is %q", p, i, rec.Value)
			}
		}
	}
}
