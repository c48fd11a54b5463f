package main

import (
	"context"
	"encoding/binary"
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
	controls int64 // control records (transaction markers) read
	elapsed  time.Duration
}

// keyCheck checks the keys (producer, sequence) of a batch mode's records:
// each must be one of the committed records and be read once.
type keyCheck struct {
	seen [][]bool // [producer][sequence]
}

func newKeyCheck(committed []int64) *keyCheck {
	k := &keyCheck{seen: make([][]bool, len(committed))}
	for i, n := range committed {
		k.seen[i] = make([]bool, n)
	}
	return k
}

func (k *keyCheck) check(key []byte) error {
	if len(key) != 12 {
		return fmt.Errorf("key is %d bytes, want 12", len(key))
	}
	idx, seq := binary.BigEndian.Uint32(key), binary.BigEndian.Uint64(key[4:])
	switch {
	case uint64(idx) >= uint64(len(k.seen)):
		return fmt.Errorf("key names producer %d of %d", idx, len(k.seen))
	case seq >= uint64(len(k.seen[idx])):
		return fmt.Errorf("producer %d record %d was not committed (%d were)", idx, seq, len(k.seen[idx]))
	case k.seen[idx][seq]:
		return fmt.Errorf("producer %d record %d read twice", idx, seq)
	}
	k.seen[idx][seq] = true
	return nil
}

// consume reads every partition of topic from its start offset to the end
// offset in ranges with a fresh, group-less client. It fails on a fetch
// error, a duplicate or out-of-order offset, a record of the wrong size, or
// cfg.consumeTimeout. In the batch modes (committed not nil: per producer,
// its records committed) it also checks each record's key against them; when
// transactional it reads read_committed, counting the transaction markers
// apart.
func consume(ctx context.Context, log *slog.Logger, cfg config, topic string, ranges map[int32]partitionRange, committed []int64) (*consumeResult, error) {
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

	opts := append(clientOpts(cfg, log), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}))
	if cfg.transactional() {
		// The markers are kept so that each partition's last offset (its
		// last commit marker) is seen and the read knows it is done.
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	}
	var keys *keyCheck
	if committed != nil {
		keys = newKeyCheck(committed)
	}
	cl, err := kgo.NewClient(opts...)
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
			case r.Attrs.IsControl():
				res.controls++
			case len(r.Value) != cfg.recordBytes:
				errs = append(errs, fmt.Errorf("partition %d offset %d: value is %d bytes, want %d", r.Partition, r.Offset, len(r.Value), cfg.recordBytes))
			default:
				if keys != nil {
					if err := keys.check(r.Key); err != nil {
						errs = append(errs, fmt.Errorf("partition %d offset %d: %w", r.Partition, r.Offset, err))
					}
				}
				res.records++
				res.bytes += int64(len(r.Value))
			}
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
