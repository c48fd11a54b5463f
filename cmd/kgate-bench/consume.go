package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeResult is the outcome of one consume phase.
type consumeResult struct {
	records  int64 // records read
	bytes    int64 // value bytes read
	expected int64 // records between the start and end offsets
	elapsed  time.Duration
}

// consume reads every partition of topic from its start offset to the end
// offset in ranges with a fresh, group-less client. It fails on a fetch
// error, a duplicate or out-of-order offset, a record of the wrong size, or
// cfg.consumeTimeout.
func consume(ctx context.Context, log *slog.Logger, cfg config, topic string, ranges map[int32]partitionRange) (*consumeResult, error) {
	res := &consumeResult{}
	// next is the next offset expected per partition still being read.
	next := map[int32]int64{}
	assign := map[int32]kgo.Offset{}
	for p, r := range ranges {
		res.expected += r.end - r.start
		if r.end > r.start {
			next[p] = r.start
			assign[p] = kgo.NewOffset().At(r.start)
		}
	}
	if len(next) == 0 {
		return res, nil
	}

	cl, err := kgo.NewClient(append(clientOpts(cfg, log),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
	)...)
	if err != nil {
		return nil, fmt.Errorf("consumer client: %w", err)
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(ctx, cfg.consumeTimeout)
	defer cancel()

	start := time.Now()
	for len(next) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("consume timed out after %v with %d of %d records read", cfg.consumeTimeout, res.records, res.expected)
			}
			return res, err
		}
		var errs []error
		fetches.EachError(func(t string, p int32, err error) {
			errs = append(errs, fmt.Errorf("fetch %s/%d: %w", t, p, err))
		})
		if len(errs) > 0 {
			return res, errors.Join(errs...)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			want, reading := next[r.Partition]
			switch {
			case !reading || r.Offset >= ranges[r.Partition].end:
				return // beyond the produced range
			case r.Offset < want:
				errs = append(errs, fmt.Errorf("partition %d: offset %d read again or out of order (expected >= %d)", r.Partition, r.Offset, want))
				return
			case len(r.Value) != cfg.recordBytes:
				errs = append(errs, fmt.Errorf("partition %d offset %d: value is %d bytes, want %d", r.Partition, r.Offset, len(r.Value), cfg.recordBytes))
			}
			res.records++
			res.bytes += int64(len(r.Value))
			if r.Offset+1 >= ranges[r.Partition].end {
				delete(next, r.Partition)
			} else {
				next[r.Partition] = r.Offset + 1
			}
		})
		if len(errs) > 0 {
			return res, errors.Join(errs...)
		}
	}
	res.elapsed = time.Since(start)
	return res, nil
}
