package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// countingStore is an in-memory raft.LogStore that counts the reads that
// reach it and can be made to fail its writes.
type countingStore struct {
	*raft.InmemStore
	mu        sync.Mutex
	reads     int
	failWrite error
}

func (s *countingStore) GetLog(idx uint64, l *raft.Log) error {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.InmemStore.GetLog(idx, l)
}

func (s *countingStore) StoreLogs(logs []*raft.Log) error {
	if s.failWrite != nil {
		return s.failWrite
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *countingStore) readsSoFar() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

func entries(from, to uint64, dataBytes int) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		data := make([]byte, dataBytes)
		copy(data, fmt.Sprint(i))
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data})
	}
	return logs
}

// served reads idx through the cache, checks it is the entry stored, and
// reports whether the read reached the store.
func served(t *testing.T, c *logCache, s *countingStore, idx uint64) (fromStore bool) {
	t.Helper()
	before := s.readsSoFar()
	var l raft.Log
	if err := c.GetLog(idx, &l); err != nil {
		t.Fatalf("GetLog(%d): %v", idx, err)
	}
	if l.Index != idx || string(l.Data[:len(fmt.Sprint(idx))]) != fmt.Sprint(idx) {
		t.Fatalf("GetLog(%d) gave entry %d with data %q", idx, l.Index, l.Data[:8])
	}
	return s.readsSoFar() > before
}

func TestLogCacheKeepsTheNewestEntriesWithinItsBytes(t *testing.T) {
	s := &countingStore{InmemStore: raft.NewInmemStore()}
	// Entries of 1 MiB against a budget of 8 MiB: seven of them fit with
	// their overhead.
	c := newLogCache(s, 512, 8<<20)
	for i := uint64(1); i <= 40; i += 4 {
		if err := c.StoreLogs(entries(i, i+3, 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(34); i <= 40; i++ {
		if served(t, c, s, i) {
			t.Errorf("entry %d, among the newest 8 MiB, was read from the store", i)
		}
	}
	for _, i := range []uint64{1, 20, 33} {
		if !served(t, c, s, i) {
			t.Errorf("entry %d, older than the newest 8 MiB, came from the cache", i)
		}
	}
	if c.bytes > 8<<20 {
		t.Errorf("the cache holds %d bytes, over its 8 MiB", c.bytes)
	}

	// One entry larger than the budget is still kept (the newest always is).
	if err := c.StoreLogs(entries(41, 41, 9<<20)); err != nil {
		t.Fatal(err)
	}
	if served(t, c, s, 41) {
		t.Error("the newest entry, alone over the budget, was read from the store")
	}
	if !served(t, c, s, 40) {
		t.Error("entry 40 stayed beside an entry that fills the budget alone")
	}
}

func TestLogCacheBoundedInEntries(t *testing.T) {
	s := &countingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(s, 16, 1<<30)
	for i := uint64(1); i <= 100; i++ {
		if err := c.StoreLog(entries(i, i, 100)[0]); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(85); i <= 100; i++ {
		if served(t, c, s, i) {
			t.Errorf("entry %d, among the newest 16, was read from the store", i)
		}
	}
	if !served(t, c, s, 84) {
		t.Error("entry 84, the 17th newest, came from the cache")
	}
}

func TestLogCacheForgetsWhatTheStoreNoLongerHolds(t *testing.T) {
	s := &countingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(s, 512, 32<<20)
	if err := c.StoreLogs(entries(1, 10, 64)); err != nil {
		t.Fatal(err)
	}
	// A follower's conflicting tail: Raft deletes it and stores the
	// leader's entries in its place.
	if err := c.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := c.GetLog(8, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(8) after its deletion: %v, entry %d", err, l.Index)
	}
	replaced := entries(6, 8, 64)
	for _, e := range replaced {
		e.Term = 2
	}
	if err := c.StoreLogs(replaced); err != nil {
		t.Fatal(err)
	}
	if err := c.GetLog(7, &l); err != nil || l.Term != 2 {
		t.Fatalf("GetLog(7) after it was replaced: term %d, %v", l.Term, err)
	}

	// A store that fails keeps nothing.
	s.failWrite = errors.New("disk full")
	if err := c.StoreLogs(entries(9, 9, 64)); err == nil {
		t.Fatal("a failed store was not reported")
	}
	if err := c.GetLog(9, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(9) after its store failed: %v, entry %d", err, l.Index)
	}
	s.failWrite = nil

	// A store that does not follow on (the log restarted after a snapshot
	// was installed) starts the cache again.
	if err := c.StoreLogs(entries(100, 102, 64)); err != nil {
		t.Fatal(err)
	}
	for i := uint64(100); i <= 102; i++ {
		if served(t, c, s, i) {
			t.Errorf("entry %d was read from the store", i)
		}
	}
	if c.first != 100 || c.last != 102 {
		t.Errorf("cache holds [%d, %d], want [100, 102]", c.first, c.last)
	}
}

func TestLogCacheReadsBesideStores(t *testing.T) {
	s := &countingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(s, 64, 1<<20)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			last, _ := c.LastIndex()
			from := uint64(1)
			if last > 80 {
				from = last - 80
			}
			for i := from; i <= last; i++ {
				var l raft.Log
				if err := c.GetLog(i, &l); err != nil || l.Index != i {
					t.Errorf("GetLog(%d): entry %d, %v", i, l.Index, err)
					return
				}
			}
		}
	}()
	for i := uint64(1); i <= 3000; i += 3 {
		if err := c.StoreLogs(entries(i, i+2, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
}

// The node's Raft reads through the cache: a compile-time check that it
// is a complete raft.LogStore that passes on monotonicity.
var (
	_ raft.LogStore          = (*logCache)(nil)
	_ raft.MonotonicLogStore = (*logCache)(nil)
)
