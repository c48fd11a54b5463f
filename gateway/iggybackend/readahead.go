package iggybackend

import (
	"context"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/internal/worktime"
)

// A partition's read-ahead: when a read fills its answer, the poll for the
// next one starts at once, so Iggy's round trip overlaps the client's
// handling of this answer instead of following its next Fetch. Messages
// once stored do not change, so a read-ahead is used whenever the next
// read asks for the offset it starts at, from the same topic (not one
// deleted and re-created meanwhile) and nothing in the partition went back.
type readAhead struct {
	t      *topic
	offset int64
	lost   int64
	done   chan struct{}
	r      *iggy.PolledMessages
	err    error
	// follow is the poll started for the offset after a kept rest, held
	// for the read that takes the rest's last message (keepRest).
	follow *readAhead
	large  bool // a poll of pollBytes' worth, or its rest: what a read leaves is kept
}

const (
	// readAheads bounds the read-aheads in flight, so that they never take
	// every Iggy connection from produces and other reads.
	readAheads = 4
	// readAheadsKept bounds the read-aheads held for reads to come: one
	// not taken (its consumer went away) is dropped once this many newer
	// ones were started.
	readAheadsKept = 16
	// readAheadMaxBytes bounds the answers read ahead for (a Fetch's
	// partition limit is 1 MiB by default), and so what a read-ahead holds.
	readAheadMaxBytes = 8 << 20
	// pollBytes is the least a read polls for (pollCount); what its
	// client does not take is kept (keepRest), so a partition holds at
	// most one such poll's messages.
	pollBytes = 4 << 20
	// keepRoom is how many of the readAheadsKept may be held when a read
	// polls pollBytes: a consumer of many partitions at once polls each
	// by its byte limit instead of polling rests that would be dropped
	// before their reads come.
	keepRoom = readAheadsKept * 3 / 4
)

// keptAhead is a read-ahead started, in Backend.aheadKept (under
// Backend.life).
type keptAhead struct {
	p  *partition
	ra *readAhead
}

// startReadAhead polls count messages from offset in the background for
// p's next read, unless readAheads are running or the backend is closing.
func (b *Backend) startReadAhead(t *topic, p *partition, offset int64, count int, large bool) {
	b.life.Lock()
	defer b.life.Unlock()
	if ra := b.startPoll(t, p, offset, count, large); ra != nil {
		b.hold(p, ra)
	}
}

// startPoll polls count messages from offset in the background and
// returns the read-ahead that will hold them, or nil when readAheads are
// running or the backend is closing; under b.life. large is whether count
// is pollBytes' worth (pollCount), whose rest is kept.
func (b *Backend) startPoll(t *topic, p *partition, offset int64, count int, large bool) *readAhead {
	if b.closing {
		return nil
	}
	select {
	case b.aheadSlots <- struct{}{}:
	default:
		return nil
	}
	ra := &readAhead{t: t, offset: offset, lost: p.lost.Load(), done: make(chan struct{}), large: large}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ra.r, ra.err = b.poll(b.ctx, t, p, iggy.PollOffset, uint64(offset), p.alignCount(offset, count))
		<-b.aheadSlots
		close(ra.done)
	}()
	return ra
}

// hold makes ra the one p's next read may take; under b.life.
func (b *Backend) hold(p *partition, ra *readAhead) {
	if b.closing {
		return
	}
	p.mu.Lock()
	p.ahead = ra
	p.mu.Unlock()
	b.keptAdd(p, ra)
}

// holdFollow holds ra, the poll started after a rest, for p's next read.
func (b *Backend) holdFollow(p *partition, ra *readAhead) {
	b.life.Lock()
	defer b.life.Unlock()
	b.hold(p, ra)
}

// keepRest keeps msgs, the tail of the poll r that a read did not put in
// its answer, for p's next read from msgs[0]: held as a finished
// read-ahead, so it is used under the same conditions (same offset, same
// topic, nothing went back) and dropped as one is (a newer read-ahead or
// rest replaces it, readAheadsKept bounds those held). Stored messages
// never change, so serving them later is serving what a poll would. When
// the partition holds more past the rest (below end), the poll for it
// starts now (follow), so it runs while the client reads the rest; from
// was the rest r came from, if any, whose follow is carried over; lost is
// p.lost as it was before r was polled, so a rest of messages polled
// before the partition went back is never served.
func (b *Backend) keepRest(t *topic, p *partition, from *readAhead, r *iggy.PolledMessages, msgs []iggy.PolledMessage, lost, end int64, count int) {
	rest := *r // the same reply: Release of the rest hands it back
	rest.Messages = msgs
	done := make(chan struct{})
	close(done)
	ra := &readAhead{t: t, offset: int64(msgs[0].Offset), lost: lost, done: done, r: &rest, large: true}
	b.life.Lock()
	defer b.life.Unlock()
	after := int64(msgs[len(msgs)-1].Offset) + 1
	switch {
	case from != nil && from.follow != nil && from.follow.offset == after:
		ra.follow = from.follow
	case after < end:
		ra.follow = b.startPoll(t, p, after, count, true)
	}
	b.hold(p, ra)
}

// roomToKeep reports whether fewer than keepRoom rests and read-aheads
// are held.
func (b *Backend) roomToKeep() bool {
	b.life.Lock()
	defer b.life.Unlock()
	held := 0
	for _, k := range b.aheadKept {
		k.p.mu.Lock()
		if k.p.ahead == k.ra {
			held++
		}
		k.p.mu.Unlock()
	}
	return held < keepRoom
}

// keptAdd records ra as held for p, dropping the oldest held beyond
// readAheadsKept; under b.life.
func (b *Backend) keptAdd(p *partition, ra *readAhead) {
	b.aheadKept = append(b.aheadKept, keptAhead{p, ra})
	if len(b.aheadKept) > readAheadsKept {
		old := b.aheadKept[0]
		b.aheadKept = append(b.aheadKept[:0], b.aheadKept[1:]...)
		old.p.mu.Lock()
		if old.p.ahead == old.ra {
			old.p.ahead = nil
		}
		old.p.mu.Unlock()
	}
}

// takeReadAhead hands a read from offset the read-ahead started for it, if
// any, waiting for it to finish; nil means the read polls itself.
func (p *partition) takeReadAhead(ctx context.Context, t *topic, offset int64) *readAhead {
	p.mu.Lock()
	ra := p.ahead
	if ra != nil && ra.offset == offset {
		p.ahead = nil
	}
	p.mu.Unlock()
	if ra == nil || ra.offset != offset || ra.t != t {
		return nil
	}
	endWait := worktime.Wait(ctx)
	select {
	case <-ra.done:
	case <-ctx.Done():
		endWait()
		return nil
	}
	endWait()
	if ra.err != nil || len(ra.r.Messages) == 0 || p.lost.Load() != ra.lost {
		return nil
	}
	return ra
}
