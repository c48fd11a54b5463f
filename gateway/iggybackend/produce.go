package iggybackend

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

const (
	// maxSendBytes bounds the payload of one SendMessages (Current frames
	// stop at 64 MiB).
	maxSendBytes = 16 << 20
	// maxProducers bounds the idempotence table of a partition.
	maxProducers = 10000
)

// sendItem is one Kafka batch on its way to Iggy.
type sendItem struct {
	batch     gateway.ProduceBatch
	msgs      []iggy.Message
	size      int
	res       gateway.ProduceResult
	dup       bool  // a retry of a batch written before
	control   bool  // a transaction marker the coordinator writes, whoever leads the partition
	txn       bool  // a transactional batch, checked again right before its send (recheckTxn)
	dupOffset int64 // its first offset
	done      chan struct{}
}

func (it *sendItem) finish(err error) {
	if err != nil {
		it.res = gateway.ProduceResult{Err: err, BaseOffset: -1, LogStartOffset: -1}
	}
	close(it.done)
}

// Produce converts each batch to Iggy messages and queues it on its
// partition; the returned function waits for Iggy's answers.
func (b *Backend) Produce(ctx context.Context, batches []gateway.ProduceBatch) func() []gateway.ProduceResult {
	items := make([]*sendItem, len(batches))
	for i, pb := range batches {
		it := &sendItem{batch: pb, done: make(chan struct{})}
		items[i] = it
		_, p, err := b.part(pb.Topic, pb.Partition)
		if err != nil {
			it.finish(err)
			continue
		}
		hdr, recs, err := records.Records(pb.Data, b.cfg.MaxUncompressed)
		if err != nil {
			it.finish(kerr.CorruptMessage)
			continue
		}
		if hdr.Transactional() {
			if err := b.checkTxnBatch(ctx, pb); err != nil {
				it.finish(err)
				continue
			}
			it.txn = true
		}
		msgs, err := EncodeBatch(recs, hdr, b.ids.forBatch(pb))
		if err != nil {
			if errors.Is(err, ErrRecordTooLarge) {
				it.finish(kerr.MessageTooLarge)
			} else {
				b.log.Warn("cannot encode batch for iggy", "topic", pb.Topic, "partition", pb.Partition, "err", err)
				it.finish(kerr.CorruptMessage)
			}
			continue
		}
		it.msgs = msgs
		for _, m := range msgs {
			it.size += len(m.Payload) + 64
		}
		if !b.enqueue(p, it) {
			it.finish(kerr.KafkaStorageError)
		}
	}
	return func() []gateway.ProduceResult {
		out := make([]gateway.ProduceResult, len(items))
		for i, it := range items {
			<-it.done
			out[i] = it.res
		}
		return out
	}
}

// ReleasesProduceData: nothing of a batch's bytes is kept once the
// function Produce returns has returned (its records are copied into a
// SendMessages body, sent before each batch is answered), so the gateway
// may reuse produce request buffers.
func (b *Backend) ReleasesProduceData() bool { return true }

// enqueue adds it to p's queue, starting p's sender if idle. It fails once
// the backend is closing.
func (b *Backend) enqueue(p *partition, it *sendItem) bool {
	b.life.Lock()
	defer b.life.Unlock()
	if b.closing {
		return false
	}
	p.mu.Lock()
	p.queue = append(p.queue, it)
	start := !p.sending
	p.sending = true
	p.mu.Unlock()
	if start {
		b.wg.Add(1)
		go p.sendLoop()
	}
	return true
}

// sendLoop drains the queue: each round sends every queued batch (up to
// maxSendBytes) in one SendMessages, in arrival order.
func (p *partition) sendLoop() {
	defer p.b.wg.Done()
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.sending = false
			p.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(p.queue) && (n == 0 || size+p.queue[n].size <= maxSendBytes) {
			size += p.queue[n].size
			n++
		}
		round := p.queue[:n:n]
		p.queue = p.queue[n:]
		p.mu.Unlock()
		p.send(round)
	}
}

func (p *partition) send(round []*sendItem) {
	b := p.b
	ctx, cancel := b.callCtx(b.ctx)
	defer cancel()
	if n := p.lost.Load(); n != p.lostSeen {
		// The partition went back: what is known of producers refers to
		// records that are gone.
		p.lostSeen = n
		p.prodMu.Lock()
		clear(p.producers)
		p.prodMu.Unlock()
		p.forgetStarts()
	}
	b.mu.RLock()
	name := p.topic.name
	b.mu.RUnlock()
	b.noteMembership()
	nodes, _ := b.cfg.Nodes.LiveNodes()
	if leaderOf(nodes, name, p.index) != b.cfg.Nodes.Self().ID {
		// Led elsewhere now: two writers would order a producer's batches
		// differently on each node. Markers are the exception: the
		// coordinator writes them after the transaction's batches were
		// acknowledged, so there is no order between them to lose.
		p.away.Store(true)
		markers := round[:0:0]
		for _, it := range round {
			if it.control {
				markers = append(markers, it)
			} else {
				it.finish(kerr.NotLeaderForPartition)
			}
		}
		if len(markers) == 0 {
			return
		}
		round = markers
	} else if p.away.Swap(false) {
		// Led elsewhere since the last send, even if led here again: the
		// other node may have written batches this node's producer state
		// does not know, and a retry of one of them would look like the
		// next batch and be written twice. Rebuild from Iggy (resync).
		p.prodMu.Lock()
		clear(p.producers)
		p.prodMu.Unlock()
	}
	var accepted []*sendItem
	var undo []func()
	var msgs []iggy.Message
	var parts [][]iggy.Message // each new batch's messages
	for _, it := range round {
		if it.txn {
			if err := b.recheckTxn(it.batch); err != nil {
				it.finish(err)
				continue
			}
		}
		if it.batch.ProducerID >= 0 {
			off, dup, rollback, err := p.checkSequence(ctx, it.batch)
			if err != nil {
				it.finish(err)
				continue
			}
			if dup {
				it.dup, it.dupOffset = true, off
				accepted = append(accepted, it)
				continue
			}
			undo = append(undo, rollback)
		}
		accepted = append(accepted, it)
		parts = append(parts, it.msgs)
	}
	if len(parts) == 1 {
		msgs = parts[0] // most rounds carry one batch: no copy
	} else {
		msgs = slices.Concat(parts...)
	}
	if len(accepted) == 0 {
		return
	}
	fail := func(err error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		for _, it := range accepted {
			it.finish(err)
		}
	}
	// forget is fail for a send whose outcome is unknown (the connection
	// broke or timed out after the request went out): Iggy may hold the
	// batches. What this node knows of their producers is dropped, so
	// their retries look the producers up in the partition's tail
	// (resync) and find the batches there if they were stored.
	forget := func(err error) {
		p.prodMu.Lock()
		for _, it := range accepted {
			if it.batch.ProducerID >= 0 && !it.dup {
				delete(p.producers, it.batch.ProducerID)
			}
		}
		p.prodMu.Unlock()
		for _, it := range accepted {
			it.finish(err)
		}
	}
	if len(msgs) == 0 { // only retries of written batches
		for _, it := range accepted {
			p.answerDup(it)
		}
		return
	}
	b.mu.RLock()
	t := p.topic
	stream, topicID := t.streamID(), t.topicID()
	b.mu.RUnlock()

	_, endBefore, _ := p.bounds()
	conf, dialect, err := b.client.SendMessages(ctx, stream, topicID, iggy.ToPartition(p.iggyID), msgs)
	if err != nil {
		b.noteError("send", t.name, p.index, err)
		if outcomeUnknown(err) {
			forget(produceError(err))
		} else {
			fail(produceError(err))
		}
		return
	}
	base := int64(-1)
	if dialect == iggy.Current && len(conf) > 0 {
		base = int64(conf[0].BaseOffset)
	} else {
		// Legacy replies carry no offsets; a Current reply carries none when
		// it answers a replay of a send that had committed (after a
		// transient 57).
		base = p.locate(ctx, stream, topicID, msgs[0].ID, len(msgs))
		if base < 0 && dialect == iggy.Current {
			err := fmt.Errorf("iggy acknowledged a replayed send whose messages cannot be found")
			b.noteError("send", t.name, p.index, err)
			fail(kerr.RequestTimedOut)
			return
		}
	}
	if base >= 0 && base < endBefore {
		// Iggy stored the batch below offsets already acknowledged: it
		// lost records. Never answer with reused offsets as if nothing
		// happened; the retry is answered once the loss is reported.
		p.mu.Lock()
		if p.end > base {
			p.end = base + int64(len(msgs))
			p.start = min(p.start, base)
		}
		p.mu.Unlock()
		p.wentBack(endBefore, base)
		fail(kerr.NotLeaderForPartition)
		return
	}
	start, _, _ := p.bounds()
	off := base
	for _, it := range accepted {
		if it.dup {
			continue
		}
		it.res = gateway.ProduceResult{BaseOffset: off, LogStartOffset: start}
		if it.batch.ProducerID >= 0 {
			p.recordOffsets(it.batch, off)
		}
		if off >= 0 {
			off += int64(len(it.msgs))
		}
	}
	if base >= 0 {
		if dialect == iggy.Current {
			p.noteBatch(base, int64(len(msgs)))
		}
		p.advance(base + int64(len(msgs)))
	}
	for _, it := range accepted {
		if it.dup {
			p.answerDup(it)
		} else {
			it.finish(nil)
		}
	}
}

func (p *partition) answerDup(it *sendItem) {
	start, _, _ := p.bounds()
	off := it.dupOffset
	if ps := p.producers[it.batch.ProducerID]; off < 0 && ps != nil {
		off, _ = ps.offsetOf(it.batch.BaseSequence) // written in this very round
	}
	it.res = gateway.ProduceResult{BaseOffset: off, LogStartOffset: start}
	it.finish(nil)
}

// locate finds the offset of a message this node just sent to a legacy
// server, whose SendMessages reply carries no offsets: the expected
// offset is checked first, then the partition's tail is searched by id.
func (p *partition) locate(ctx context.Context, stream, topicID iggy.Identifier, id [16]byte, n int) int64 {
	_, end, _ := p.bounds()
	poll := iggy.Poll{Consumer: iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(0)},
		Stream: stream, Topic: topicID, Partition: iggy.Partition(p.iggyID)}
	poll.Kind, poll.Value, poll.Count = iggy.PollOffset, uint64(end), 1
	if r, err := p.b.client.PollMessages(ctx, poll); err == nil && len(r.Messages) > 0 && r.Messages[0].ID == id {
		return int64(r.Messages[0].Offset)
	}
	poll.Kind, poll.Value, poll.Count = iggy.PollLast, 0, uint32(min(n+1000, 10000))
	r, err := p.b.client.PollMessages(ctx, poll)
	if err != nil {
		return -1
	}
	for _, m := range r.Messages {
		if m.ID == id {
			return int64(m.Offset)
		}
	}
	return -1
}

// ---- idempotence ----

// producer is what a partition knows of one idempotent producer: the
// last sequence written in its epoch and where its recent batches went,
// so a retried batch is answered with its first offset.
type producer struct {
	epoch    int16
	lastSeq  int32    // -1: nothing written in this epoch
	runs     []seqRun // recent sequence runs, oldest first
	lastUsed time.Time
	lastTs   int64 // ms: when its last batch was written (DescribeProducers); -1 unknown
}

// seqRun is a run of consecutive sequences written at consecutive offsets:
// a batch, or several in a row (one entry per batch, not per record: a map
// of every record's sequence cost a seventh of the produce path's CPU).
type seqRun struct {
	first  int32 // first sequence
	count  int64 // sequences in the run
	offset int64 // offset of first
}

const (
	// rememberRuns bounds the runs kept per producer: Kafka keeps five
	// batches; a gap in sequences or offsets (another producer's writes
	// in between) starts a run, so keep more.
	rememberRuns = 64
	// resyncScan is how many of a partition's last messages are read to
	// learn a producer this node does not know (after it took the
	// partition over from a failed or restarted node).
	resyncScan = 5000
)

func newProducer(epoch int16) *producer {
	return &producer{epoch: epoch, lastSeq: -1, lastTs: -1}
}

// seqSpan is the distance from sequence a to b, sequences wrapping at 2^31.
func seqSpan(a, b int32) int64 { return (int64(b) - int64(a) + 1<<31) % (1 << 31) }

// remember notes that count sequences from first were written from offset
// off on.
func (ps *producer) remember(first int32, count, off int64) {
	if n := len(ps.runs); n > 0 {
		last := &ps.runs[n-1]
		if last.offset+last.count == off && seqSpan(last.first, first) == last.count {
			last.count += count
			return
		}
	}
	ps.runs = append(ps.runs, seqRun{first: first, count: count, offset: off})
	if len(ps.runs) > rememberRuns {
		ps.runs = append(ps.runs[:0], ps.runs[len(ps.runs)-rememberRuns:]...)
	}
}

// offsetOf is the offset sequence seq was written at, if remembered.
func (ps *producer) offsetOf(seq int32) (int64, bool) {
	for i := len(ps.runs) - 1; i >= 0; i-- {
		r := ps.runs[i]
		if d := seqSpan(r.first, seq); d < r.count {
			return r.offset + d, true
		}
	}
	return 0, false
}

func lastSeq(pb gateway.ProduceBatch) int32 {
	return int32((int64(pb.BaseSequence) + int64(pb.LastOffsetDelta)) % (1 << 31))
}

// checkSequence applies Kafka's rules and records the batch tentatively
// (its offsets are filled in after the send; rollback undoes it if the
// send fails). A producer this node does not know, or whose sequence
// jumps, is first looked up in the partition's tail: message ids carry
// (producer, epoch, sequence), so a node taking a partition over still
// recognises a retry of a batch its predecessor wrote.
func (p *partition) checkSequence(ctx context.Context, pb gateway.ProduceBatch) (dupOffset int64, dup bool, rollback func(), err error) {
	ps := p.producers[pb.ProducerID]
	first := pb.BaseSequence
	stale := ps == nil || pb.ProducerEpoch == ps.epoch && first > ps.lastSeq+1 ||
		pb.ProducerEpoch == ps.epoch && first <= ps.lastSeq && !has(ps, first)
	if stale && (ps == nil || pb.ProducerEpoch >= ps.epoch) {
		if found := p.resync(ctx, pb.ProducerID, pb.ProducerEpoch); found != nil {
			ps = found
		}
	}
	if ps != nil {
		switch {
		case pb.ProducerEpoch < ps.epoch:
			return 0, false, nil, kerr.InvalidProducerEpoch
		case pb.ProducerEpoch == ps.epoch && first <= ps.lastSeq:
			if off, ok := ps.offsetOf(first); ok {
				return off, true, nil, nil
			}
			return 0, false, nil, kerr.DuplicateSequenceNumber
		case pb.ProducerEpoch == ps.epoch && first != ps.lastSeq+1:
			return 0, false, nil, kerr.OutOfOrderSequenceNumber
		}
	}
	// The rollback restores the entry and its last sequence: nothing else
	// of it changes before the send's offsets are recorded. (Copying the
	// whole state, up to 50,000 offsets, on every batch was half of
	// the produce path's CPU.)
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	saved := p.producers[pb.ProducerID]
	var savedSeq int32
	if saved != nil {
		savedSeq = saved.lastSeq
	}
	switch {
	case ps == nil:
		p.evictProducers()
		ps = newProducer(pb.ProducerEpoch)
	case pb.ProducerEpoch > ps.epoch:
		ps = newProducer(pb.ProducerEpoch)
	}
	p.producers[pb.ProducerID] = ps
	ps.lastUsed = time.Now()
	ps.lastSeq = lastSeq(pb)
	id := pb.ProducerID
	return 0, false, func() {
		p.prodMu.Lock()
		defer p.prodMu.Unlock()
		if saved == nil {
			delete(p.producers, id)
		} else {
			saved.lastSeq = savedSeq
			p.producers[id] = saved
		}
	}, nil
}

func has(ps *producer, seq int32) bool { _, ok := ps.offsetOf(seq); return ok }

// recordOffsets notes the offsets of a written batch.
func (p *partition) recordOffsets(pb gateway.ProduceBatch, base int64) {
	ps := p.producers[pb.ProducerID]
	if ps == nil || base < 0 {
		return
	}
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	ps.remember(pb.BaseSequence, int64(pb.LastOffsetDelta)+1, base)
	ps.lastTs = time.Now().UnixMilli()
}

// resync rebuilds a producer's state from the partition's last messages;
// nil when none of them is the producer's in that epoch or later.
func (p *partition) resync(ctx context.Context, pid int64, epoch int16) *producer {
	b := p.b
	b.mu.RLock()
	t := p.topic
	b.mu.RUnlock()
	r, err := b.poll(ctx, t, p, iggy.PollLast, 0, resyncScan)
	if err != nil {
		b.noteError("resync", t.name, p.index, err)
		return nil
	}
	var ps *producer
	for _, m := range r.Messages {
		mpid, mepoch, seq, ok := parseID(m.ID)
		if !ok || mpid != pid || mepoch < epoch {
			continue
		}
		if ps == nil || mepoch > ps.epoch {
			ps = newProducer(mepoch)
		}
		if mepoch == ps.epoch {
			ps.remember(seq, 1, int64(m.Offset))
			if ps.lastSeq < 0 || seq > ps.lastSeq {
				ps.lastSeq = seq
				ps.lastTs = int64(m.Timestamp / 1000)
			}
		}
	}
	if ps != nil {
		p.prodMu.Lock()
		p.evictProducers()
		p.producers[pid] = ps
		p.prodMu.Unlock()
	}
	return ps
}

func (p *partition) evictProducers() {
	if len(p.producers) < maxProducers {
		return
	}
	var oldest int64
	var at time.Time
	for id, ps := range p.producers {
		if at.IsZero() || ps.lastUsed.Before(at) {
			oldest, at = id, ps.lastUsed
		}
	}
	delete(p.producers, oldest)
}

// ---- message ids ----

// idSource hands out message ids: random-prefixed counters for plain
// batches, and (producer id, epoch, sequence) for idempotent ones, so a
// retried batch carries the same ids as its first attempt.
type idSource struct {
	prefix [6]byte
	next   atomic.Uint64
}

// idMarker ends the ids of idempotent batches.
var idMarker = [2]byte{'k', 'g'}

func newIDSource() *idSource {
	s := &idSource{}
	_, _ = rand.Read(s.prefix[:])
	return s
}

// parseID reads an idempotent batch's message id.
func parseID(id [16]byte) (pid int64, epoch int16, seq int32, ok bool) {
	if id[14] != idMarker[0] || id[15] != idMarker[1] {
		return 0, 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(id[0:])), int16(binary.LittleEndian.Uint16(id[8:])),
		int32(binary.LittleEndian.Uint32(id[10:])), true
}

func (s *idSource) forBatch(pb gateway.ProduceBatch) func() [16]byte {
	if pb.ProducerID < 0 {
		return func() [16]byte {
			var id [16]byte
			binary.LittleEndian.PutUint64(id[0:], s.next.Add(1))
			copy(id[8:14], s.prefix[:])
			return id
		}
	}
	seq := int64(pb.BaseSequence)
	return func() [16]byte {
		var id [16]byte
		binary.LittleEndian.PutUint64(id[0:], uint64(pb.ProducerID))
		binary.LittleEndian.PutUint16(id[8:], uint16(pb.ProducerEpoch))
		binary.LittleEndian.PutUint32(id[10:], uint32(seq%(1<<31)))
		copy(id[14:], idMarker[:])
		seq++
		return id
	}
}
