package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"slices"
	"sync"
)

// stable holds Raft's few stable keys (current term, last vote). Raft sets
// them rarely (on elections) and each must be durable before it returns,
// so every Set rewrites the whole small file atomically.
type stable struct {
	mu sync.Mutex
	kv map[string][]byte
}

// errNotFound: hashicorp/raft recognises a missing key by this text.
var errNotFound = errors.New("not found")

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// The stable file: a CRC-32C of the rest, the number of keys, then each key
// and value with its u32 length.
func encodeStable(kv map[string][]byte) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(kv)))
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[k])))
		b = append(b, kv[k]...)
	}
	binary.LittleEndian.PutUint32(b, crc32c(b[4:]))
	return b
}

func readStable(path string) (map[string][]byte, error) {
	kv := map[string][]byte{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return kv, nil
	}
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("%s is damaged", path)
	if len(b) < 8 || crc32c(b[4:]) != binary.LittleEndian.Uint32(b) {
		return nil, bad
	}
	n := binary.LittleEndian.Uint32(b[4:])
	b = b[8:]
	field := func() ([]byte, bool) {
		if len(b) < 4 {
			return nil, false
		}
		l := binary.LittleEndian.Uint32(b)
		if uint64(len(b)-4) < uint64(l) {
			return nil, false
		}
		v := b[4 : 4+l]
		b = b[4+l:]
		return v, true
	}
	for range n {
		k, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return nil, bad
		}
		kv[string(k)] = slices.Clone(v)
	}
	if len(b) != 0 {
		return nil, bad
	}
	return kv, nil
}

// Set implements raft.StableStore.
func (s *Store) Set(key, val []byte) error {
	s.stable.mu.Lock()
	defer s.stable.mu.Unlock()
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	kv := maps.Clone(s.stable.kv)
	kv[string(key)] = slices.Clone(val)
	if err := WriteFileAtomic(s.dir, stableFile, encodeStable(kv), s.opts.Fsync); err != nil {
		return fmt.Errorf("raft stable store: %w", err)
	}
	s.stable.kv = kv
	return nil
}

// Get implements raft.StableStore.
func (s *Store) Get(key []byte) ([]byte, error) {
	s.stable.mu.Lock()
	defer s.stable.mu.Unlock()
	v, ok := s.stable.kv[string(key)]
	if !ok {
		return nil, errNotFound
	}
	return slices.Clone(v), nil
}

// SetUint64 implements raft.StableStore.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft stable key %q holds %d bytes, not a uint64", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
