package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// The newest Raft entries are kept in memory (logCache) so that the
// leader's replication and a follower's apply, which read an entry right
// after it was stored, need not read it back from the log files. The cache
// holds at most cacheEntries entries and cacheBytes of their data.
const (
	cacheEntries = 512
	cacheBytes   = 32 << 20
)

// logCache is raft.LogCache bounded in bytes as well as in entries.
// raft.LogCache(512) kept the last 512 entries whatever their size: with
// produce requests proposed as entries of up to 1 MiB that was up to
// 512 MiB of record data held on every node, a heap that grew with every
// entry stored until it was full (each entry's pages faulted in fresh, a
// fault for every 4 KiB written), and peak RSS of 470-710 MiB under the
// three-node produce benchmark, where 32 MiB of entries serves the same
// reads (docs/benchmarks.md, "Raft entries kept in memory").
//
// It holds the run of consecutive indexes [first, last] stored last; a
// store that does not continue that run starts a new one.
type logCache struct {
	store    raft.LogStore
	maxBytes int

	mu          sync.RWMutex
	ring        []*raft.Log // entry i at ring[i%len(ring)], for first <= i <= last
	first, last uint64      // first > last: empty
	bytes       int         // entrySize of the entries held
}

func newLogCache(store raft.LogStore, entries, maxBytes int) *logCache {
	return &logCache{store: store, maxBytes: maxBytes, ring: make([]*raft.Log, entries), first: 1}
}

// entrySize is what an entry holds on to in memory, near enough.
func entrySize(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + 128 }

// IsMonotonic passes on the store's (raft.MonotonicLogStore), as
// raft.LogCache does.
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (c *logCache) GetLog(idx uint64, l *raft.Log) error {
	c.mu.RLock()
	var cached *raft.Log
	if idx >= c.first && idx <= c.last {
		cached = c.ring[idx%uint64(len(c.ring))]
	}
	c.mu.RUnlock()
	if cached != nil && cached.Index == idx {
		*l = *cached
		return nil
	}
	return c.store.GetLog(idx, l)
}

func (c *logCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores logs and, once they are stored, keeps them.
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if c.first > c.last || l.Index != c.last+1 {
			c.clear()
			c.first, c.last = l.Index, l.Index-1
		}
		for c.last-c.first+1 >= uint64(len(c.ring)) {
			c.dropFirst()
		}
		c.last = l.Index
		c.ring[l.Index%uint64(len(c.ring))] = l
		c.bytes += entrySize(l)
		for c.bytes > c.maxBytes && c.first < c.last {
			c.dropFirst()
		}
	}
	return nil
}

func (c *logCache) dropFirst() {
	slot := &c.ring[c.first%uint64(len(c.ring))]
	c.bytes -= entrySize(*slot)
	*slot = nil
	c.first++
}

func (c *logCache) clear() {
	clear(c.ring)
	c.first, c.last, c.bytes = 1, 0, 0
}

func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }
func (c *logCache) LastIndex() (uint64, error)  { return c.store.LastIndex() }

// DeleteRange forgets every cached entry, as raft.LogCache does: Raft
// deletes a range to compact the log or to cut a follower's conflicting
// tail, and neither is on a path where the cache matters.
func (c *logCache) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	c.clear()
	c.mu.Unlock()
	return c.store.DeleteRange(lo, hi)
}
