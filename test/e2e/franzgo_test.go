package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFranzGo(t *testing.T) {
	runScenario(t, kafkaClient{
		name:        "franz-go",
		codecs:      allCodecs,
		createTopic: kadmCreateTopic,
		produce:     franzProduce,
		verify: func(ctx context.Context, bootstrap, topic string, from, to int) error {
			return kgoVerify(ctx, bootstrap, topic, newChecker(genRecord, from, to, time.Time{}))
		},
	})
}

// TestFranzGoAcks0 produces with acks=0 (fire and forget) and waits until
// every record shows up.
func TestFranzGoAcks0(t *testing.T) {
	srv := startKgate(t)
	topic := fmt.Sprintf("e2e-acks0-%d", time.Now().UnixNano()%1e9)
	const n = 999
	step(t, "create topic (kadm)", createTimeout, func(ctx context.Context) error {
		return kadmCreateTopic(ctx, srv.bootstrap(), topic)
	})
	step(t, "produce acks=0", produceTimeout, func(ctx context.Context) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.bootstrap()),
			kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return err
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, kgoRecords(topic, 0, n)...).FirstErr()
	})
	step(t, "kgo verify", verifyTimeout, func(ctx context.Context) error {
		return kgoVerify(ctx, srv.bootstrap(), topic, newChecker(genRecord, 0, n, time.Time{}))
	})
}

func kgoCodec(codec string) (kgo.CompressionCodec, error) {
	switch codec {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown codec %q", codec)
}

func kgoRecords(topic string, from, to int) []*kgo.Record {
	recs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		w := genRecord(i)
		r := &kgo.Record{
			Topic:     topic,
			Partition: w.Partition,
			Key:       []byte(w.Key),
			Value:     []byte(w.Value),
			Timestamp: time.UnixMilli(w.Timestamp),
		}
		for _, h := range w.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
		}
		recs = append(recs, r)
	}
	return recs
}

// franzProduce produces with an idempotent acks=all producer, except for
// codec "none", which uses a plain acks=1 producer.
func franzProduce(ctx context.Context, bootstrap, topic string, from, to int, codec string) error {
	cc, err := kgoCodec(codec)
	if err != nil {
		return err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ProducerBatchCompression(cc),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond),
	}
	if codec == "none" {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.ProduceSync(ctx, kgoRecords(topic, from, to)...).FirstErr()
}

// kgoVerify reads partitions 0..2 of topic from the start with kgo until c
// is complete, then checks the high watermarks leave nothing unread.
func kgoVerify(ctx context.Context, bootstrap, topic string, c *checker) error {
	parts := map[int32]kgo.Offset{}
	for p := range numPartitions {
		parts[int32(p)] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	for !c.complete() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("incomplete after %v: %s", ctx.Err(), c.progress())
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("fetch %s[%d]: %w (progress %s)", t, p, err, c.progress())
			}
		})
		if ferr != nil {
			return ferr
		}
		var rerr error
		fs.EachRecord(func(r *kgo.Record) {
			if rerr != nil {
				return
			}
			g := gotRecord{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli()}
			for _, h := range r.Headers {
				g.Headers = append(g.Headers, header{h.Key, string(h.Value)})
			}
			rerr = c.add(g)
		})
		if rerr != nil {
			return rerr
		}
	}
	return checkEndOffsets(ctx, kadm.NewClient(cl), topic, c)
}

// checkEndOffsets fails if a partition's high watermark is beyond the
// records the checker expects.
func checkEndOffsets(ctx context.Context, adm *kadm.Client, topic string, c *checker) error {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("ListOffsets(latest): %w", err)
	}
	for p := range numPartitions {
		o, ok := ends.Lookup(topic, int32(p))
		if !ok {
			return fmt.Errorf("ListOffsets(latest): partition %d missing", p)
		}
		if o.Err != nil {
			return fmt.Errorf("ListOffsets(latest) partition %d: %w", p, o.Err)
		}
		if o.Offset != int64(c.expected(p)) {
			return fmt.Errorf("partition %d: high watermark %d, want %d", p, o.Offset, c.expected(p))
		}
	}
	return nil
}
