package iggybackend

import (
	"slices"

	"github.com/kgate/kgate/gateway/iggy"
)

// maxStarts bounds the batch starts a partition remembers (8 bytes each):
// enough for a consumer reading close behind the producers.
const maxStarts = 512

// noteBatch records that Iggy stored n messages from base as one batch
// (one SendMessages of this node, current dialect: iggy-server 0.9 keeps
// each as one batch). Starts are kept ascending; one at or below the last
// known means the partition went back, and the older starts are dropped.
func (p *partition) noteBatch(base, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := len(p.starts); k > 0 && base < p.starts[k-1] {
		p.starts = p.starts[:0]
	}
	if k := len(p.starts); k == 0 || p.starts[k-1] != base {
		p.starts = append(p.starts, base)
	}
	p.starts = append(p.starts, base+n) // where the next batch starts
	p.trimStartsLocked()
}

// trimStartsLocked keeps the newest starts once there are more than
// maxStarts: the ones a consumer close behind the producers needs.
func (p *partition) trimStartsLocked() {
	if len(p.starts) > maxStarts {
		p.starts = append(p.starts[:0], p.starts[len(p.starts)-maxStarts/2:]...)
	}
}

// forgetStarts drops the known batch starts (the partition went back).
func (p *partition) forgetStarts() {
	p.mu.Lock()
	p.starts = p.starts[:0]
	p.mu.Unlock()
}

// alignCount turns a poll of count messages from offset into one that
// ends where a stored batch ends, when that is known: iggy-server 0.9
// re-hashes a batch a poll cuts, and the next poll, starting inside it,
// walks it again from its start. The poll ends at the last known start
// within count, or, when that would make it less than half as long, at
// the first beyond it within twice count; otherwise count is kept.
// Which batches are read never depends on this, only how many at once.
func (p *partition) alignCount(offset int64, count int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.starts
	if len(s) == 0 || offset < s[0] || offset >= s[len(s)-1] {
		return count
	}
	limit := offset + int64(count)
	// i is the first start beyond limit.
	i, _ := slices.BinarySearch(s, limit+1)
	if i > 0 && s[i-1] > offset && s[i-1]-offset >= int64(count)/2 {
		return int(s[i-1] - offset)
	}
	if i < len(s) && s[i]-offset <= 2*int64(count) {
		return min(int(s[i]-offset), maxPollCount)
	}
	return count
}

// learnStarts notes the batch starts a poll's reply shows: iggy-server 0.9
// (and the test double) stamps every message of a stored batch with the
// batch's one append time, so where the time changes between two messages
// in a row a stored batch starts. That makes the starts of batches other
// nodes or Iggy clients sent known once read, as this node's own sends are
// (noteBatch). Two batches stored within the same microsecond read as one,
// which only makes a poll end at the later start.
func (p *partition) learnStarts(msgs []iggy.PolledMessage) {
	var found []int64
	if len(msgs) > 0 && msgs[0].Offset == 0 {
		found = append(found, 0) // a partition's first batch
	}
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Timestamp != msgs[i-1].Timestamp && msgs[i].Offset == msgs[i-1].Offset+1 {
			found = append(found, int64(msgs[i].Offset))
		}
	}
	if len(found) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range found {
		if i, ok := slices.BinarySearch(p.starts, s); !ok {
			p.starts = slices.Insert(p.starts, i, s)
		}
	}
	p.trimStartsLocked()
}
