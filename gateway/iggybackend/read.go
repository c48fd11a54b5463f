package iggybackend

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

const (
	// maxPollCount bounds the messages asked for in one poll.
	maxPollCount = 10000
	// watchWindow is how long after its last Watch a partition is still
	// polled for writes from elsewhere: longer than the longest fetch wait.
	watchWindow = 35 * time.Second
	// boundsFresh is how old cached bounds may be for ListOffsets.
	boundsFresh = 50 * time.Millisecond
)

// reader is the Iggy consumer kgate polls with. Offsets are never stored
// in Iggy (they live in the FSM), so any id will do.
var reader = iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(0)}

func (b *Backend) poll(ctx context.Context, t *topic, p *partition, kind iggy.PollingKind, value uint64, count int) (*iggy.PolledMessages, error) {
	b.mu.RLock()
	stream, topicID := t.streamID(), t.topicID()
	b.mu.RUnlock()
	ctx, cancel := b.callCtx(ctx)
	defer cancel()
	r, err := b.client.PollMessages(ctx, iggy.Poll{Consumer: reader, Stream: stream, Topic: topicID,
		Partition: iggy.Partition(p.iggyID), Kind: kind, Value: value, Count: uint32(max(count, 1))})
	if err == nil && kind == iggy.PollOffset && b.client.Dialect() == iggy.Current {
		p.learnStarts(r.Messages)
	}
	return r, err
}

// pollHeld polls count messages from offset. After a kill -9, iggy-server
// 0.8.0 can answer InvalidOffset to a poll of many messages that spans the
// point where it was killed, while every message there is still served to
// smaller polls (seen in TestRealServerKill9Idempotent, about 1 run in 3):
// below the partition's end a refused poll is retried with half as many
// messages, down to one, so readers get past that point.
func (b *Backend) pollHeld(ctx context.Context, t *topic, p *partition, offset, end int64, count int) (*iggy.PolledMessages, error) {
	for {
		r, err := b.poll(ctx, t, p, iggy.PollOffset, uint64(max(offset, 0)), count)
		if err == nil || !errors.Is(err, iggy.ErrInvalidOffset) || offset >= end || count == 1 {
			return r, err
		}
		count /= 2
	}
}

// Read polls Iggy from offset and re-frames the messages as Kafka batches.
func (b *Backend) Read(ctx context.Context, name string, part int32, offset int64, maxBytes int) (gateway.ReadResult, error) {
	return b.ReadInto(ctx, name, part, offset, maxBytes, nil)
}

// ReadInto is Read framing the batches into a buffer alloc returns
// (gateway.ReaderInto), sized from the polled messages; without alloc, or
// when the estimate falls short, into buffers of its own.
func (b *Backend) ReadInto(ctx context.Context, name string, part int32, offset int64, maxBytes int, alloc func(int) []byte) (gateway.ReadResult, error) {
	res := gateway.ReadResult{HighWatermark: -1, LogStartOffset: -1}
	t, p, err := b.part(name, part)
	if err != nil {
		return res, err
	}
	start, end, _ := p.bounds()
	if offset < start {
		// The cached start may be stale in the other direction only after
		// retention; re-read before refusing.
		if err := b.refreshBounds(ctx, t); err == nil {
			start, end, _ = p.bounds()
		}
	}
	res.HighWatermark, res.LogStartOffset = end, start
	if offset < start {
		return res, kerr.OffsetOutOfRange
	}
	// Only iggy-server 0.9 (current dialect) pays for polls that cut its
	// stored batches; 0.8.0 indexes every message and is polled by the
	// client's limit, as the larger polls cost it more CPU per GB.
	current := b.client.Dialect() == iggy.Current
	large := current && b.roomToKeep()
	count := pollCount(maxBytes, p.avgSize.Load(), large)
	var r *iggy.PolledMessages
	lost := p.lost.Load() // as when the messages were polled, for a rest of them
	ra := p.takeReadAhead(ctx, t, offset)
	if ra != nil {
		r, large, lost = ra.r, ra.large, ra.lost
	} else {
		if r, err = b.pollHeld(ctx, t, p, offset, end, p.alignCount(offset, count)); err != nil {
			b.noteError("poll", name, part, err)
			return res, kafkaError(err)
		}
	}
	msgs := r.Messages
	for len(msgs) > 0 && int64(msgs[0].Offset) < offset {
		msgs = msgs[1:] // a stored batch may start before the offset asked for
	}
	switch {
	case len(r.Messages) > 0:
		last := int64(r.Messages[len(r.Messages)-1].Offset)
		p.advance(max(int64(r.CurrentOffset), last) + 1)
	case r.CurrentOffset > 0:
		p.advance(int64(r.CurrentOffset) + 1)
	}
	start, end, _ = p.bounds()
	res.HighWatermark, res.LogStartOffset = end, start
	if len(msgs) == 0 {
		if offset > end {
			// Iggy reports 0 both for an empty partition and for one
			// holding only offset 0: ask for the counts before refusing.
			if err := b.refreshBounds(ctx, t); err == nil {
				start, end, _ = p.bounds()
				res.HighWatermark, res.LogStartOffset = end, start
			}
			if offset > end {
				return res, kerr.OffsetOutOfRange
			}
		}
		return res, nil
	}
	var out []byte
	if alloc != nil {
		_, size := framedPrefix(msgs, maxBytes)
		out = alloc(size)[:0]
	}
	size, taken := 0, 0
	for len(msgs) > 0 {
		prev := len(out)
		grown, n, err := AppendBatch(out, msgs, maxBytes-prev)
		if err != nil {
			b.log.Error("cannot frame iggy messages as a kafka batch", "topic", name, "partition", part, "err", err)
			return res, kerr.KafkaStorageError
		}
		if prev > 0 && len(grown) > maxBytes {
			break // out keeps the batches before this one
		}
		out = grown
		for _, m := range msgs[:n] {
			size += len(m.Payload) + len(m.UserHeaders) + 64
		}
		taken += n
		msgs = msgs[n:]
		if len(out) >= maxBytes {
			break
		}
	}
	if taken > 0 {
		p.avgSize.Store(max(int64(size/taken), 16))
	}
	// The rest of a large poll is kept, and any rest of at least half an
	// answer; a few messages left by a poll of the client's limit are
	// polled again with the next answer's worth.
	if len(msgs) > 0 && current && (large || 2*len(msgs) >= taken) {
		// Polled, but not in this answer: kept for the next read, which
		// asks for msgs[0] when the client took the whole answer.
		b.keepRest(t, p, ra, r, msgs, lost, end, count)
	} else {
		next := int64(r.Messages[len(r.Messages)-1].Offset) + 1
		if len(msgs) > 0 {
			next = int64(msgs[0].Offset) // polled, but not in this answer
		}
		// The answer holds copies (BuildBatch): the poll's reply can go back.
		b.client.Release(r)
		if ra != nil && ra.follow != nil && ra.follow.offset == next {
			b.holdFollow(p, ra.follow) // started when the rest was kept
		} else if next < end && maxBytes <= readAheadMaxBytes {
			// A consumer reading through a backlog asks for next.
			b.startReadAhead(t, p, next, count, large)
		}
	}
	res.Records = out
	return res, nil
}

// framedPrefix estimates how many of msgs fit a Kafka answer of maxBytes
// (the first always does) and the bytes they take as Kafka batches: each
// message's payload and headers, a record's framing, a batch header.
func framedPrefix(msgs []iggy.PolledMessage, maxBytes int) (n, size int) {
	size = records.HeaderSize
	for _, m := range msgs {
		size += len(m.Payload) + len(m.UserHeaders) + 32
		n++
		if size >= maxBytes {
			break
		}
	}
	return n, size
}

// pollCount is the messages a read with the client's byte limit maxBytes
// polls, at avg bytes a message: with room to keep a rest, at least
// pollBytes' worth, the rest kept for the next reads (keepRest).
// iggy-server 0.9 serves a poll that starts or ends inside a batch it
// stored at a cost (it walks its batches from the last index entry before
// the start, and re-hashes a cut batch), so fewer, larger polls cut fewer
// batches per GB.
func pollCount(maxBytes int, avg int64, keep bool) int {
	per := int(max(avg, 1))
	count := maxBytes/per + 1
	if keep && maxBytes <= readAheadMaxBytes {
		count = max(count, pollBytes/per+1)
	}
	return min(max(count, 1), maxPollCount)
}

// Watch returns a channel closed when the partition next grows, by a send
// through this node at once or by the watch loop for other writers.
func (b *Backend) Watch(name string, part int32) (<-chan struct{}, error) {
	_, p, err := b.part(name, part)
	if err != nil {
		return nil, err
	}
	return p.watchChan(), nil
}

// watchLoop re-reads, every PollInterval, the bounds of topics that have
// a partition some fetch waited on recently.
func (b *Backend) watchLoop() {
	defer b.wg.Done()
	tick := time.NewTicker(b.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-tick.C:
		}
		since := time.Now().Add(-watchWindow).UnixNano()
		b.mu.RLock()
		var watched []*topic
		for _, t := range b.topics {
			for _, p := range t.parts {
				if p.watchedAt.Load() > since {
					watched = append(watched, t)
					break
				}
			}
		}
		b.mu.RUnlock()
		for _, t := range watched {
			if err := b.refreshBounds(b.ctx, t); err != nil && b.ctx.Err() == nil {
				b.log.Debug("iggy watch poll failed", "topic", t.name, "err", err)
			}
		}
	}
}

// refreshBounds re-reads a topic's partitions.
func (b *Backend) refreshBounds(ctx context.Context, t *topic) error {
	b.mu.RLock()
	stream, topicID := t.streamID(), t.topicID()
	parts, info := t.parts, t.info // refresh updates info under b.mu
	b.mu.RUnlock()
	ctx, cancel := b.callCtx(ctx)
	defer cancel()
	td, found, err := b.client.GetTopic(ctx, stream, topicID)
	if err != nil {
		return err
	}
	if !found || !b.sameTopic(info, td.Topic) || len(td.Partitions) != len(parts) {
		return b.refresh(ctx) // deleted, re-created or re-partitioned
	}
	now := b.now()
	for _, pi := range td.Partitions {
		for _, p := range parts {
			if p.iggyID == pi.ID {
				p.observe(pi, now)
			}
		}
	}
	return nil
}

// Offsets returns the log start offset and the high watermark, re-read
// from Iggy unless just seen.
func (b *Backend) Offsets(ctx context.Context, name string, part int32) (int64, int64, error) {
	t, p, err := b.part(name, part)
	if err != nil {
		return -1, -1, err
	}
	if _, _, seen := p.bounds(); time.Since(seen) > boundsFresh {
		if err := b.refreshBounds(ctx, t); err != nil {
			b.noteError("offsets", name, part, err)
			return -1, -1, kafkaError(err)
		}
	}
	start, end, _ := p.bounds()
	return start, end, nil
}

// OffsetForTime finds the first record at or after ts. Iggy indexes its
// own append time, so that finds the starting point; the records' Kafka
// timestamps then decide, over a bounded scan.
func (b *Backend) OffsetForTime(ctx context.Context, name string, part int32, ts int64) (int64, int64, error) {
	t, p, err := b.part(name, part)
	if err != nil {
		return -1, -1, err
	}
	// Producers stamp records a little before Iggy appends them: start a
	// minute early.
	from := max(ts-60_000, 0) * 1000
	r, err := b.poll(ctx, t, p, iggy.PollTimestamp, uint64(from), 1000)
	if err != nil {
		return -1, -1, kafkaError(err)
	}
	for _, m := range r.Messages {
		if rec := decode(m); rec.Timestamp >= ts {
			return int64(m.Offset), rec.Timestamp, nil
		}
	}
	if len(r.Messages) == 0 {
		return -1, -1, nil
	}
	// Past the scan: fall back to Iggy's own time index.
	r, err = b.poll(ctx, t, p, iggy.PollTimestamp, uint64(max(ts, 0))*1000, 1)
	if err != nil {
		return -1, -1, kafkaError(err)
	}
	if len(r.Messages) == 0 {
		return -1, -1, nil
	}
	return int64(r.Messages[0].Offset), decode(r.Messages[0]).Timestamp, nil
}

// MaxTimestampOffset answers ListOffsets -3 with the last record: Iggy
// keeps no max-timestamp index, and records are stamped in append order
// unless producers set their own times.
func (b *Backend) MaxTimestampOffset(ctx context.Context, name string, part int32) (int64, int64, error) {
	t, p, err := b.part(name, part)
	if err != nil {
		return -1, -1, err
	}
	r, err := b.poll(ctx, t, p, iggy.PollLast, 0, 1)
	if err != nil {
		return -1, -1, kafkaError(err)
	}
	if len(r.Messages) == 0 {
		return -1, -1, nil
	}
	m := r.Messages[len(r.Messages)-1]
	return int64(m.Offset), decode(m).Timestamp, nil
}

// decode is the record Kafka clients see for m: a message whose kgate
// metadata does not parse is served as a native one, as BuildBatch does.
func decode(m iggy.PolledMessage) records.Record {
	if rec, err := DecodeMessage(m); err == nil {
		return rec
	}
	return DecodeNative(m)
}
