package fsm

import (
	"fmt"
	"math"
	"sort"

	"github.com/kgate/kgate/fsm/partlog"
)

// Idempotence bookkeeping, as Kafka's ProducerStateManager keeps it.
const (
	recentBatches       = 5                 // Kafka's max.in.flight for idempotence
	maxProducersPerPart = 1000              // eviction starts above this
	producerIdleMs      = 24 * 3600 * 1000  // Kafka's producer.id.expiration.ms
	maxSequence         = math.MaxInt32 + 1 // sequences wrap at 2^31
)

type producerState struct {
	epoch  int16
	lastTs int64         // NowMs of its last append
	recent []batchRecord // oldest first, at most recentBatches
	// coordEpoch is the coordinator epoch of the last WriteTxnMarkers
	// marker for it here, when hasCoordEpoch (kgate's own markers carry
	// none: its coordinator has no epoch).
	coordEpoch    int32
	hasCoordEpoch bool
}

type batchRecord struct {
	firstSeq, lastSeq int32
	firstOffset       int64
	lastOffsetDelta   int32
}

// AppendResult is one batch's outcome, in the order of Append.Batches.
type AppendResult struct {
	Code           int16
	BaseOffset     int64
	LogStartOffset int64
	// LogAppendTime is the time the batch was stamped with when its topic
	// keeps append times (message.timestamp.type=LogAppendTime); 0 or -1
	// when it was not stamped.
	LogAppendTime int64
}

// AppendResults answers an Append.
type AppendResults struct{ Results []AppendResult }

func (f *FSM) applyAppend(c *Append) any {
	out := &AppendResults{Results: make([]AppendResult, len(c.Batches))}
	for i := range c.Batches {
		r, err := f.appendBatch(c.NowMs, &c.Batches[i])
		if err != nil {
			return ioFailure(fmt.Sprintf("append to %s/%d", c.Batches[i].Topic, c.Batches[i].Partition), err)
		}
		out.Results[i] = r
	}
	return out
}

func (f *FSM) appendBatch(now int64, b *Batch) (AppendResult, error) {
	t, p := f.topicPartition(b.Topic, b.Partition)
	if p == nil {
		return AppendResult{Code: ErrUnknownTopicOrPartition, BaseOffset: -1, LogStartOffset: -1}, nil
	}
	txnl := b.ProducerID >= 0 && transactionalBatch(b.Data)
	if txnl {
		f.mu.RLock()
		code := f.checkTxnBatchLocked(b)
		f.mu.RUnlock()
		if code != ErrNone {
			return AppendResult{Code: code, BaseOffset: -1, LogStartOffset: p.Log.Start()}, nil
		}
	}
	var ps *producerState
	if b.ProducerID >= 0 {
		p.prodMu.Lock()
		defer p.prodMu.Unlock()
		var dup *batchRecord
		var code int16
		ps, dup, code = p.checkSequence(b, f.FeatureLevel() >= LevelIdleExpiry)
		if code != ErrNone {
			return AppendResult{Code: code, BaseOffset: -1, LogStartOffset: p.Log.Start()}, nil
		}
		if dup != nil {
			// A retry of a batch already written: answer with its offsets.
			return AppendResult{BaseOffset: dup.firstOffset, LogStartOffset: p.Log.Start()}, nil
		}
	}
	appendTime := int64(-1)
	// t.Configs without f.mu: only Apply, on this goroutine, changes it.
	if f.FeatureLevel() >= LevelLogAppendTime && t.Configs["message.timestamp.type"] == "LogAppendTime" {
		appendTime = now
	}
	var base int64
	var err error
	if f.opts.References && f.res != nil && f.applying != 0 {
		// The batch is in the entry being applied, as the client sent it:
		// the partition names it there (stamped on reading, if it must be).
		ref := partlog.Ref{Index: f.applying, Pos: uint32(b.DataPos), Len: uint32(len(b.Data))}
		base, err = p.Log.AppendRef(ref, b.LastOffsetDelta, b.MaxTimestamp, appendTime)
	} else if appendTime != -1 {
		base, err = p.Log.Append(partlog.StampAppendTime(b.Data, now), b.LastOffsetDelta, now)
	} else {
		base, err = p.Log.Append(b.Data, b.LastOffsetDelta, b.MaxTimestamp)
	}
	if err != nil {
		return AppendResult{}, err
	}
	if b.ProducerID >= 0 {
		p.recordBatch(now, b, ps, base)
	}
	if _, open := p.ongoing[b.ProducerID]; txnl && !open {
		p.ongoing[b.ProducerID] = base
	}
	return AppendResult{BaseOffset: base, LogStartOffset: p.Log.Start(), LogAppendTime: appendTime}, nil
}

func lastSeq(b *Batch) int32 {
	return int32((int64(b.BaseSequence) + int64(b.LastOffsetDelta)) % maxSequence)
}

// checkSequence applies Kafka's rules: an older epoch is fenced; a new epoch
// starts at sequence 0; within an epoch a batch either repeats one of the
// recent batches (a duplicate) or continues right after the last one. A
// producer the partition has no state of (new, or expired) starts at any
// sequence when anySeq is set, as in Kafka since KIP-360; else at 0.
func (p *Partition) checkSequence(b *Batch, anySeq bool) (*producerState, *batchRecord, int16) {
	ps := p.producers[b.ProducerID]
	if ps == nil {
		if b.BaseSequence != 0 && !anySeq {
			return nil, nil, ErrUnknownProducerID
		}
		return nil, nil, ErrNone
	}
	switch {
	case b.ProducerEpoch < ps.epoch:
		return nil, nil, ErrInvalidProducerEpoch
	case b.ProducerEpoch > ps.epoch:
		if b.BaseSequence != 0 {
			return nil, nil, ErrOutOfOrderSequence
		}
		return ps, nil, ErrNone
	}
	last := lastSeq(b)
	for i := range ps.recent {
		r := &ps.recent[i]
		if r.firstSeq == b.BaseSequence && r.lastSeq == last {
			return ps, r, ErrNone
		}
	}
	if n := len(ps.recent); n > 0 {
		want := int32((int64(ps.recent[n-1].lastSeq) + 1) % maxSequence)
		if b.BaseSequence != want {
			return nil, nil, ErrOutOfOrderSequence
		}
	}
	return ps, nil, ErrNone
}

func (p *Partition) recordBatch(now int64, b *Batch, ps *producerState, base int64) {
	if ps == nil {
		p.evictProducers(now)
		ps = &producerState{}
		p.producers[b.ProducerID] = ps
	}
	if b.ProducerEpoch != ps.epoch {
		ps.epoch = b.ProducerEpoch
		ps.recent = ps.recent[:0]
	}
	ps.lastTs = now
	if len(ps.recent) == recentBatches {
		copy(ps.recent, ps.recent[1:])
		ps.recent = ps.recent[:recentBatches-1]
	}
	ps.recent = append(ps.recent, batchRecord{firstSeq: b.BaseSequence, lastSeq: lastSeq(b), firstOffset: base, lastOffsetDelta: b.LastOffsetDelta})
}

// evictProducers bounds the table before a new producer is added: first the
// idle ones, then the least recently used. Deterministic: it depends only on
// the stamped times and the producer ids.
func (p *Partition) evictProducers(now int64) {
	if len(p.producers) < maxProducersPerPart {
		return
	}
	ids := make([]int64, 0, len(p.producers))
	for id, ps := range p.producers {
		if now-ps.lastTs > producerIdleMs {
			delete(p.producers, id)
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) < maxProducersPerPart {
		return
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := p.producers[ids[i]], p.producers[ids[j]]
		if a.lastTs != b.lastTs {
			return a.lastTs < b.lastTs
		}
		return ids[i] < ids[j]
	})
	for _, id := range ids[:len(ids)-maxProducersPerPart+1] {
		delete(p.producers, id)
	}
}

// ExpireProducers drops the idempotence state of every producer idle for
// ExpirationMs (Kafka's producer.id.expiration.ms) without an open
// transaction in the partition. The leader proposes it with its clock's
// time; each replica decides from the same stamped times.
type ExpireProducers struct {
	NowMs        int64
	ExpirationMs int64
}

func (*ExpireProducers) Kind() Kind { return KindExpireProducers }
func (c *ExpireProducers) encode(e *enc) {
	e.i64(c.NowMs)
	e.i64(c.ExpirationMs)
}

// ExpireProducersResult counts the producer states dropped.
type ExpireProducersResult struct{ Removed int }

func (f *FSM) applyExpireProducers(c *ExpireProducers) any {
	if c.ExpirationMs < 0 {
		return &ExpireProducersResult{}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	removed := 0
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			removed += p.expireProducers(c.NowMs, c.ExpirationMs)
		}
	}
	return &ExpireProducersResult{Removed: removed}
}

// expireProducers drops the producers idle for expirationMs by now, except
// one with an open transaction here (Kafka keeps it too).
func (p *Partition) expireProducers(now, expirationMs int64) int {
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	n := 0
	for id, ps := range p.producers {
		if _, open := p.ongoing[id]; !open && now-ps.lastTs >= expirationMs {
			delete(p.producers, id)
			n++
		}
	}
	return n
}
