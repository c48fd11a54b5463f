package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/embedded"
)

// releasingBackend is the embedded backend declared a ProduceDataReleaser
// (as the Iggy backend is), so the gateway reuses produce request buffers.
// It hands the embedded backend copies and checks, once each produce is
// through, that the gateway had not yet reused the bytes it was given.
type releasingBackend struct {
	*embedded.Backend
	reusedEarly atomic.Int64
}

func (b *releasingBackend) ReleasesProduceData() bool { return true }

func (b *releasingBackend) Produce(ctx context.Context, batches []gateway.ProduceBatch) func() []gateway.ProduceResult {
	given := make([][]byte, len(batches))
	copies := make([]gateway.ProduceBatch, len(batches))
	for i, pb := range batches {
		given[i] = pb.Data
		pb.Data = bytes.Clone(pb.Data)
		copies[i] = pb
	}
	wait := b.Backend.Produce(ctx, copies)
	return func() []gateway.ProduceResult {
		res := wait()
		for i := range given {
			if !bytes.Equal(given[i], copies[i].Data) {
				b.reusedEarly.Add(1)
			}
		}
		return res
	}
}

// TestProduceBuffersReused: with a backend that keeps no produce data, large
// produce requests, several in flight on one connection, are read into
// reused buffers; every record reads back exactly, and no buffer was reused
// before its request was through.
func TestProduceBuffersReused(t *testing.T) {
	var rb *releasingBackend
	n := startNodeOpts(t, nil, false, nodeOpts{wrap: func(b *embedded.Backend) gateway.Backend {
		rb = &releasingBackend{Backend: b}
		return rb
	}})
	createTopic(t, n.addr, "reuse", 2, nil)
	// Not idempotent, so that up to five requests (of up to 256 KiB: the
	// linger fills them) are in flight at once.
	prod := newClient(t, n.addr, kgo.DefaultProduceTopic("reuse"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5),
		kgo.ProducerBatchMaxBytes(256<<10), kgo.ProducerLinger(20*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	const total = 4000
	want := map[string]bool{}
	var recs []*kgo.Record
	for i := range total {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, 900+i%200)
		v = fmt.Appendf(v, "#%d", i)
		want[string(v)] = true
		recs = append(recs, &kgo.Record{Value: v, Partition: int32(i % 2)})
	}
	if err := prod.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cons := newClient(t, n.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"reuse": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()},
	}))
	ctx := testCtx(t)
	var got []*kgo.Record
	for len(got) < total {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(got), total)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got = append(got, fs.Records()...)
	}
	sort.Slice(got, func(i, j int) bool { return string(got[i].Value) < string(got[j].Value) })
	for _, g := range got {
		if !want[string(g.Value)] {
			t.Fatalf("read a record never produced (partition %d offset %d): %q…", g.Partition, g.Offset, g.Value[:16])
		}
		delete(want, string(g.Value))
	}
	if len(want) != 0 || len(got) != total {
		t.Fatalf("read %d records, %d produced ones missing", len(got), len(want))
	}
	if n := rb.reusedEarly.Load(); n > 0 {
		t.Fatalf("%d produce requests' buffers were reused before the backend was through", n)
	}
}

// TestLargeAnswersOnSeveralConnections: answers larger than a connection
// keeps (connBufferBytes) are encoded in buffers shared between
// connections once written; consumers reading the same records at once on
// their own connections each get them exactly.
func TestLargeAnswersOnSeveralConnections(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "large", 3, nil)
	prod := newClient(t, n.addr, kgo.DefaultProduceTopic("large"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	const total = 4500 // 1.5 MiB a partition
	want := make([][]byte, total)
	var recs []*kgo.Record
	for i := range total {
		want[i] = fmt.Appendf(bytes.Repeat([]byte{byte('a' + i%26)}, 1000), "#%d", i)
		recs = append(recs, &kgo.Record{Value: want[i], Partition: int32(i % 3), Key: fmt.Appendf(nil, "%d", i)})
	}
	if err := prod.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	errs := make(chan error, 3)
	ctx := testCtx(t)
	for range 3 {
		cons := newClient(t, n.addr, kgo.FetchMaxBytes(16<<20), kgo.FetchMaxPartitionBytes(4<<20),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				"large": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()},
			}))
		go func() {
			seen := 0
			for seen < total {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					errs <- fmt.Errorf("consumed %d of %d records before timeout", seen, total)
					return
				}
				if err := fs.Err(); err != nil {
					errs <- err
					return
				}
				for _, r := range fs.Records() {
					var i int
					if _, err := fmt.Sscan(string(r.Key), &i); err != nil || i < 0 || i >= total || !bytes.Equal(r.Value, want[i]) {
						errs <- fmt.Errorf("partition %d offset %d: key %q does not match its value %q…", r.Partition, r.Offset, r.Key, r.Value[:8])
						return
					}
					seen++
				}
			}
			errs <- nil
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
