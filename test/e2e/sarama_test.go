package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func TestSarama(t *testing.T) {
	runScenario(t, kafkaClient{
		name:        "sarama",
		codecs:      allCodecs,
		createTopic: saramaCreateTopic,
		produce:     saramaProduce,
		verify:      saramaVerify,
	})
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "kgate-e2e-sarama"
	cfg.Version = sarama.V3_9_0_0
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	return cfg
}

// withDeadline runs fn, which cannot take a context, and gives up when ctx
// ends (fn's goroutine is then left to finish on its own).
func withDeadline(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func saramaCreateTopic(ctx context.Context, bootstrap, topic string) error {
	return withDeadline(ctx, func() error {
		adm, err := sarama.NewClusterAdmin([]string{bootstrap}, saramaConfig())
		if err != nil {
			return err
		}
		defer adm.Close()
		detail := &sarama.TopicDetail{NumPartitions: numPartitions, ReplicationFactor: 1, ConfigEntries: map[string]*string{}}
		for k, v := range topicConfig {
			detail.ConfigEntries[k] = &v
		}
		return adm.CreateTopic(topic, detail, false)
	})
}

func saramaCodec(codec string) (sarama.CompressionCodec, error) {
	switch codec {
	case "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return 0, fmt.Errorf("unknown codec %q", codec)
}

// saramaProduce uses an idempotent (acks=all) SyncProducer with manual
// partitioning.
func saramaProduce(ctx context.Context, bootstrap, topic string, from, to int, codec string) error {
	cc, err := saramaCodec(codec)
	if err != nil {
		return err
	}
	cfg := saramaConfig()
	cfg.Producer.Compression = cc
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	// 12 s of retries: after the Iggy tier's rolling restart the nodes can
	// disagree on partition leaders for several seconds (a replaced Raft
	// leader stays out of a node's broker list until gossip has news of it,
	// and the Iggy backend spreads leadership over that list); a CI run saw
	// Sarama's former 2 s budget run out. Kept as a known defect (issue 10/14
	// notes), not hidden: every record must still arrive exactly once.
	cfg.Producer.Retry.Max = 60
	cfg.Producer.Retry.Backoff = 200 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Net.MaxOpenRequests = 1

	msgs := make([]*sarama.ProducerMessage, 0, to-from)
	for i := from; i < to; i++ {
		w := genRecord(i)
		m := &sarama.ProducerMessage{
			Topic:     topic,
			Partition: w.Partition,
			Key:       sarama.StringEncoder(w.Key),
			Value:     sarama.StringEncoder(w.Value),
			Timestamp: time.UnixMilli(w.Timestamp),
		}
		for _, h := range w.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: []byte(h.Value)})
		}
		msgs = append(msgs, m)
	}
	return withDeadline(ctx, func() error {
		p, err := sarama.NewSyncProducer([]string{bootstrap}, cfg)
		if err != nil {
			return err
		}
		if err := p.SendMessages(msgs); err != nil {
			var perrs sarama.ProducerErrors
			if errors.As(err, &perrs) && len(perrs) > 0 {
				err = fmt.Errorf("%d of %d messages failed, first: %w", len(perrs), len(msgs), perrs[0].Err)
			}
			p.Close()
			return err
		}
		return p.Close()
	})
}

// saramaVerify consumes all partitions with the partition consumer
// (direct assignment, no group) from the oldest offset.
func saramaVerify(ctx context.Context, bootstrap, topic string, from, to int) error {
	c := newChecker(genRecord, from, to, time.Time{})
	cfg := saramaConfig()
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 500 * time.Millisecond
	client, err := sarama.NewClient([]string{bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	defer consumer.Close()

	msgs := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, numPartitions)
	for p := range numPartitions {
		pc, err := consumer.ConsumePartition(topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("ConsumePartition %d: %w", p, err)
		}
		defer pc.AsyncClose()
		go func() {
			perrs := pc.Errors()
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					select {
					case msgs <- m:
					case <-ctx.Done():
						return
					}
				case e, ok := <-perrs:
					if !ok {
						perrs = nil
						continue
					}
					select {
					case errs <- e:
					default:
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for !c.complete() {
		select {
		case m := <-msgs:
			g := gotRecord{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp.UnixMilli()}
			for _, h := range m.Headers {
				g.Headers = append(g.Headers, header{string(h.Key), string(h.Value)})
			}
			if err := c.add(g); err != nil {
				return err
			}
		case err := <-errs:
			return fmt.Errorf("partition consumer: %w (progress %s)", err, c.progress())
		case <-ctx.Done():
			return fmt.Errorf("incomplete after %v: %s", ctx.Err(), c.progress())
		}
	}
	for p := range numPartitions {
		hw, err := client.GetOffset(topic, int32(p), sarama.OffsetNewest)
		if err != nil {
			return fmt.Errorf("GetOffset(newest) partition %d: %w", p, err)
		}
		if hw != int64(c.expected(p)) {
			return fmt.Errorf("partition %d: high watermark %d, want %d", p, hw, c.expected(p))
		}
	}
	return nil
}
