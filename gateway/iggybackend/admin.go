package iggybackend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
)

// supportedConfigs are the topic configs an Iggy topic can honour.
const retentionMs = "retention.ms"

func retention(configs map[string]string) (ms int64, set bool, err error) {
	for k, v := range configs {
		switch k {
		case retentionMs:
			ms, err = strconv.ParseInt(v, 10, 64)
			if err != nil || ms < -1 {
				return 0, false, invalidConfig("retention.ms %q is not a number ≥ -1", v)
			}
			set = true
		case "cleanup.policy":
			if v != "delete" {
				return 0, false, invalidConfig("Iggy topics apply cleanup.policy=delete only (not %q)", v)
			}
		}
	}
	return ms, set, nil
}

// invalidConfig is INVALID_CONFIG with a reason (errors.Is still matches).
func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", kerr.InvalidConfig, fmt.Sprintf(format, args...))
}

// CreateTopic creates the Iggy topic (and the stream if missing).
func (b *Backend) CreateTopic(ctx context.Context, spec gateway.TopicSpec) error {
	ms, hasRet, err := retention(spec.Configs)
	if err != nil {
		return err
	}
	streamName, iname := b.cfg.Topics.where(b.cfg.Stream, spec.Name)
	if spec.Partitions > 1000 {
		return invalidConfig("an Iggy topic has at most 1000 partitions")
	}
	cfg := b.cfg.Topics.topicConfig(spec.Name, iname, spec.Partitions, ms, hasRet)
	cfg.MessagesRequiredToSave = b.cfg.SaveEvery
	cctx, cancel := b.callCtx(ctx)
	defer cancel()
	_, err = b.client.CreateTopic(cctx, iggy.NamedID(streamName), cfg)
	if errors.Is(err, iggy.ErrStreamNotFound) {
		if _, serr := b.client.CreateStream(cctx, streamName); serr != nil && !errors.Is(serr, iggy.ErrStreamAlreadyExists) {
			return kafkaError(serr)
		}
		_, err = b.client.CreateTopic(cctx, iggy.NamedID(streamName), cfg)
	}
	switch {
	case errors.Is(err, iggy.ErrTopicAlreadyExists):
		_, _ = b.loadTopic(cctx, spec.Name, streamName, iname)
		return kerr.TopicAlreadyExists
	case errors.Is(err, iggy.ErrInvalidTopic), errors.Is(err, iggy.ErrInvalidTopicSize):
		return fmt.Errorf("%w: %v", kerr.InvalidTopicException, err)
	case errors.Is(err, iggy.ErrTooManyPartitions), errors.Is(err, iggy.ErrInvalidPartitionsCount):
		return kerr.InvalidPartitions
	case err != nil:
		return kafkaError(err)
	}
	_, err = b.loadTopic(cctx, spec.Name, streamName, iname)
	return kafkaError(err)
}

// DeleteTopic deletes the Iggy topic (never the stream).
func (b *Backend) DeleteTopic(ctx context.Context, name string) error {
	t := b.lookup(name)
	if t == nil {
		return kerr.UnknownTopicOrPartition
	}
	cctx, cancel := b.callCtx(ctx)
	defer cancel()
	err := b.client.DeleteTopic(cctx, t.streamID(), t.topicID())
	if err != nil && !errors.Is(err, iggy.ErrTopicNotFound) {
		return kafkaError(err)
	}
	b.mu.Lock()
	if b.topics[name] == t {
		b.dropLocked(name)
	}
	b.mu.Unlock()
	if err != nil {
		return kerr.UnknownTopicOrPartition
	}
	return nil
}

// CreatePartitions grows a topic to count partitions.
func (b *Backend) CreatePartitions(ctx context.Context, name string, count int32) error {
	t := b.lookup(name)
	if t == nil {
		return kerr.UnknownTopicOrPartition
	}
	b.mu.RLock()
	have := int32(len(t.parts))
	b.mu.RUnlock()
	if count <= have {
		return kerr.InvalidPartitions
	}
	if count-have > 1000 {
		return invalidConfig("Iggy adds at most 1000 partitions at a time")
	}
	cctx, cancel := b.callCtx(ctx)
	defer cancel()
	if err := b.client.CreatePartitions(cctx, t.streamID(), t.topicID(), uint32(count-have)); err != nil {
		if errors.Is(err, iggy.ErrTooManyPartitions) || errors.Is(err, iggy.ErrInvalidPartitionsCount) {
			return kerr.InvalidPartitions
		}
		return kafkaError(err)
	}
	_, err := b.loadTopic(cctx, name, t.stream, t.iggy)
	return kafkaError(err)
}

// AlterTopicConfigs maps retention.ms to the topic's message expiry; an
// Iggy topic has no place for other Kafka configs.
func (b *Backend) AlterTopicConfigs(ctx context.Context, name string, configs map[string]string) error {
	t := b.lookup(name)
	if t == nil {
		return kerr.UnknownTopicOrPartition
	}
	for k := range configs {
		if k != retentionMs {
			return invalidConfig("the Iggy backend stores only retention.ms, not %s", k)
		}
	}
	ms, set, err := retention(configs)
	if err != nil {
		return err
	}
	expiry := uint64(math.MaxUint64) // absent: back to never
	if set {
		expiry = expiryMicros(ms)
	}
	b.mu.RLock()
	c := iggy.TopicConfig{Name: t.iggy, Compression: t.info.Compression, MessageExpiry: expiry,
		MaxTopicSize: t.info.MaxTopicSize, ReplicationFactor: max(t.info.ReplicationFactor, 1)}
	b.mu.RUnlock()
	cctx, cancel := b.callCtx(ctx)
	defer cancel()
	if err := b.client.UpdateTopic(cctx, t.streamID(), t.topicID(), c); err != nil {
		return kafkaError(err)
	}
	b.mu.Lock()
	t.info.MessageExpiry = expiry
	b.mu.Unlock()
	return nil
}
