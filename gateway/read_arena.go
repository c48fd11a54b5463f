package gateway

import (
	"context"
	"math/bits"
	"sync"
)

// ReaderInto is a backend that can read a partition into buffers its
// caller hands out (alloc returns one of n bytes), so that fetches reuse
// their buffers.
type ReaderInto interface {
	ReadInto(ctx context.Context, topic string, partition int32, offset int64, maxBytes int, alloc func(n int) []byte) (ReadResult, error)
}

// Read buffers are pooled in power-of-two classes from 64 KiB to 16 MiB;
// smaller and larger reads get buffers of their own (a fetch of a thousand
// partitions of a few records each must not hold a thousand 64 KiB
// buffers, and a small buffer costs little to zero and collect).
const (
	minReadClass = 16 // 64 KiB
	maxReadClass = 24 // 16 MiB
)

// readPools holds the fetch read buffers between fetches, one pool a class.
type readPools [maxReadClass - minReadClass + 1]sync.Pool // of *[]byte

// readArena gives one fetch the buffers its partition reads fill, and takes
// them all back once the answer that holds them is encoded. A buffer made
// afresh for every read cost a consuming node about a tenth of its CPU in
// zeroing it and as much again in collecting it.
type readArena struct {
	pools *readPools
	mu    sync.Mutex // a fetch reads partitions in parallel
	held  []*[]byte
}

func newReadArena(pools *readPools) *readArena { return &readArena{pools: pools} }

// readArena is a fetch's arena, nil when the backend cannot read into one.
func (s *Server) readArena() *readArena {
	if s.readerInto == nil {
		return nil
	}
	return newReadArena(&s.readPools)
}

// alloc returns a buffer of n bytes whose content is undefined.
func (a *readArena) alloc(n int) []byte {
	class := bits.Len(uint(n - 1))
	if n < 1<<minReadClass || class > maxReadClass {
		return make([]byte, n)
	}
	bp, _ := a.pools[class-minReadClass].Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 1<<class)
		bp = &b
	}
	a.mu.Lock()
	a.held = append(a.held, bp)
	a.mu.Unlock()
	return (*bp)[:n]
}

// release hands every buffer back. Nothing may read them afterwards: the
// connection's writer calls it once the answer is encoded.
func (a *readArena) release() {
	a.mu.Lock()
	held := a.held
	a.held = nil
	a.mu.Unlock()
	for _, bp := range held {
		a.pools[bits.Len(uint(cap(*bp)-1))-minReadClass].Put(bp)
	}
}

// read reads a partition into a's buffers, or as the backend does without
// an arena (a is nil).
func (s *Server) read(ctx context.Context, a *readArena, topic string, partition int32, offset int64, maxBytes int) (ReadResult, error) {
	if a != nil {
		return s.readerInto.ReadInto(ctx, topic, partition, offset, maxBytes, a.alloc)
	}
	return s.backend.Read(ctx, topic, partition, offset, maxBytes)
}
