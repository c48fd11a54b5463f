package iggybackend

import "slices"

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
