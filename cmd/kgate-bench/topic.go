package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// createTopic creates topic with the given partitions and replication factor
// 1, then waits until every partition has a leader that serves it, so the
// produce phase does not time topic creation. (Apache Kafka lists a leader in
// its metadata slightly before that leader accepts writes, and a producer that
// hits NOT_LEADER_FOR_PARTITION waits for a metadata refresh.)
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	return createTopicRF(ctx, adm, topic, partitions, 1)
}

// createTopicRF is createTopic with a replication factor (-1: the broker's
// default).
func createTopicRF(ctx context.Context, adm *kadm.Client, topic string, partitions int, rf int16) error {
	resp, err := adm.CreateTopic(ctx, int32(partitions), rf, nil, topic)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if resp.Err != nil {
		return fmt.Errorf("create topic %s: %w", topic, resp.Err)
	}

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ready, why := topicReady(ctx, adm, topic, partitions)
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not ready: %s: %w", topic, why, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func topicReady(ctx context.Context, adm *kadm.Client, topic string, partitions int) (bool, string) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return false, err.Error()
	}
	td, ok := md.Topics[topic]
	switch {
	case !ok:
		return false, "missing from metadata"
	case td.Err != nil:
		return false, td.Err.Error()
	case len(td.Partitions) != partitions:
		return false, fmt.Sprintf("%d of %d partitions in metadata", len(td.Partitions), partitions)
	}
	for _, p := range td.Partitions {
		if p.Err != nil {
			return false, fmt.Sprintf("partition %d: %v", p.Partition, p.Err)
		}
		if p.Leader < 0 {
			return false, fmt.Sprintf("partition %d has no leader", p.Partition)
		}
	}
	// ListOffsets is answered by each partition's leader, so success means
	// the leaders have taken the partitions on.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false, "list offsets: " + err.Error()
	}
	if err := ends.Error(); err != nil {
		return false, "list offsets: " + err.Error()
	}
	if n := len(ends[topic]); n != partitions {
		return false, fmt.Sprintf("list offsets: %d of %d partitions", n, partitions)
	}
	return true, ""
}

// deleteTopic deletes topic, logging rather than failing: a leftover topic
// does not invalidate the measurements.
func deleteTopic(ctx context.Context, log *slog.Logger, adm *kadm.Client, topic string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		log.Warn("delete topic failed", "topic", topic, "err", err)
	}
}

// partitionRange is the offsets [start, end) of one partition.
type partitionRange struct{ start, end int64 }

// listOffsets returns the start and end offset of each partition of topic.
func listOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]partitionRange, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	out := map[int32]partitionRange{}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		s, ok := starts.Lookup(o.Topic, o.Partition)
		if !ok {
			errs = append(errs, fmt.Errorf("partition %d: no start offset", o.Partition))
			return
		}
		out[o.Partition] = partitionRange{start: s.Offset, end: o.Offset}
	})
	return out, errors.Join(errs...)
}

// waitStable waits until every partition of topic has its last stable offset
// at its high watermark: no transaction is open there, every marker written.
func waitStable(ctx context.Context, adm *kadm.Client, topic string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		why, err := unstable(ctx, adm, topic)
		if err == nil && why == "" {
			return nil
		}
		if err != nil {
			why = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not stable: %s: %w", topic, why, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// unstable returns why some partition of topic is not stable, or "".
func unstable(ctx context.Context, adm *kadm.Client, topic string) (string, error) {
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return "", fmt.Errorf("list stable offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return "", fmt.Errorf("list end offsets: %w", err)
	}
	why := ""
	ends.Each(func(o kadm.ListedOffset) {
		s, ok := stable.Lookup(o.Topic, o.Partition)
		if why == "" && (!ok || s.Offset != o.Offset) {
			why = fmt.Sprintf("partition %d: last stable offset %d, high watermark %d", o.Partition, s.Offset, o.Offset)
		}
	})
	return why, nil
}
