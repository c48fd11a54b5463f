package iggybackend

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
)

// partition is the node's view of one Iggy partition: its bounds as last
// seen, the fetches waiting on it, and the queue of sends this node makes
// to it (one at a time, in arrival order).
type partition struct {
	b      *Backend
	topic  *topic // guarded by b.mu
	index  int32
	iggyID uint32

	mu      sync.Mutex
	start   int64 // first offset still stored
	end     int64 // next offset
	seenAt  time.Time
	watch   chan struct{}
	queue   []*sendItem
	sending bool
	// producers is the sender's (one at a time); it changes them, and
	// their fields, under prodMu so that DescribeProducers may read them.
	prodMu    sync.Mutex
	producers map[int64]*producer
	ahead     *readAhead // the poll started for the next read, if any
	starts    []int64    // offsets where stored batches start, ascending (noteBatch)

	// lost counts the times the partition's next offset went back (see
	// wentBack); the sender drops its producer state when it moves.
	lost     atomic.Int64
	lostSeen int64 // lost as last seen by the sender; sender only
	// away is set when a membership change made another node this
	// partition's leader (ownershipLoop) or a send found it led elsewhere:
	// that node may have written batches this node's producer state does
	// not know, so the sender drops the state before its next send.
	away atomic.Bool

	watchedAt atomic.Int64 // unix nanos of the last Watch
	avgSize   atomic.Int64 // average stored message size, for poll counts
}

func newPartition(b *Backend, t *topic, index int32, id uint32) *partition {
	p := &partition{b: b, topic: t, index: index, iggyID: id, producers: map[int64]*producer{}}
	p.avgSize.Store(1024)
	return p
}

// bounds derives Kafka's log start and next offset from Iggy's partition
// description: current_offset is the last offset, 0 also when empty (§8).
func bounds(pi iggy.PartitionInfo) (start, end int64) {
	if pi.MessagesCount == 0 {
		if pi.CurrentOffset == 0 {
			return 0, 0
		}
		return int64(pi.CurrentOffset) + 1, int64(pi.CurrentOffset) + 1
	}
	end = int64(pi.CurrentOffset) + 1
	return max(end-int64(pi.MessagesCount), 0), end
}

// observe merges a fresh description; bounds only move forward, and a
// change wakes the fetches waiting on the partition. A next offset below
// the one already seen is reported (wentBack) and taken as it is.
func (p *partition) observe(pi iggy.PartitionInfo, at time.Time) {
	start, end := bounds(pi)
	if pi.MessagesCount > 0 && pi.SizeBytes > 0 {
		p.avgSize.Store(max(int64(pi.SizeBytes/pi.MessagesCount), 16))
	}
	p.mu.Lock()
	// Iggy describes a partition whose only message (offset 0) expired
	// as it does an empty one: that is not a step back.
	if end < p.end && !(pi.CurrentOffset == 0 && pi.MessagesCount == 0 && p.end == 1) {
		from := p.end
		p.start, p.end = start, end
		p.mu.Unlock()
		p.wentBack(from, end)
		p.mu.Lock()
	}
	changed := end > p.end || start > p.start
	p.start = max(p.start, start)
	p.end = max(p.end, end)
	p.seenAt = at
	var ch chan struct{}
	if changed {
		ch, p.watch = p.watch, nil
	}
	p.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// advance records offsets this node just wrote.
func (p *partition) advance(end int64) {
	p.mu.Lock()
	var ch chan struct{}
	if end > p.end {
		p.end = end
		ch, p.watch = p.watch, nil
	}
	p.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// wentBack reports that the partition's next offset went back from from
// to to: Iggy lost acknowledged messages (restarted on an empty or older
// data directory, or killed while holding unsaved messages) or the topic
// was deleted and re-created under the same name and id. Offsets from to
// on will be handed out again, so it is an error, never papered over:
// the producer state is dropped, consumers past to get
// OFFSET_OUT_OF_RANGE, and the topic is re-read.
func (p *partition) wentBack(from, to int64) {
	p.lost.Add(1)
	b := p.b
	b.lost.Add(1)
	b.mu.RLock()
	name := p.topic.name
	b.mu.RUnlock()
	b.log.Error("iggy partition went back: acknowledged records are gone and their offsets will be reused "+
		"(the Iggy server lost data, or the topic was re-created behind kgate)",
		"topic", name, "partition", p.index, "next_offset_was", from, "next_offset_now", to)
	p.wake()
	b.kickRefresh()
}

// wake releases every waiting fetch (the topic changed shape or vanished).
func (p *partition) wake() {
	p.mu.Lock()
	ch := p.watch
	p.watch = nil
	p.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

func (p *partition) bounds() (start, end int64, seenAt time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start, p.end, p.seenAt
}

func (p *partition) watchChan() <-chan struct{} {
	p.watchedAt.Store(time.Now().UnixNano())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watch == nil {
		p.watch = make(chan struct{})
	}
	return p.watch
}
