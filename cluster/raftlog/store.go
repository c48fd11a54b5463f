// Package raftlog is the node's Raft log and stable store: Raft entries in
// append-only segment files, and the current term and vote in a small file
// replaced atomically.
//
// Each StoreLogs batch is written with one write and, with Fsync, one
// fsync. Every entry carries its length, a CRC-32C and the bounds of its
// batch, so that opening the log cuts an unfinished last batch (a write torn
// by a crash, never acknowledged) and reports damage anywhere else as an
// error. Compaction (DeleteRange of the head) removes whole segment files
// and records the new first index durably first; truncation of the tail
// (DeleteRange of a conflicting suffix) removes later files and truncates
// the one holding the new end.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Options configure a Store.
type Options struct {
	// Fsync syncs every batch, truncation and metadata change before
	// returning (--fsync). Without it the kernel writes them when it
	// likes: a process crash loses nothing acknowledged, a power loss may.
	Fsync bool
	// SegmentSize is the size after which appends go to a new segment
	// file (default 64 MiB: a few dozen record batches of megabytes, so
	// that files are rarely created and compaction frees space in
	// reasonable steps).
	SegmentSize int64
	Logger      *slog.Logger
	// References: entries are read from outside Raft (ReadData) after
	// Raft compacted them, and compaction keeps them until SetPin says no
	// reference needs them (see retained.go).
	References bool
}

// Store implements raft.LogStore, raft.MonotonicLogStore and
// raft.StableStore over the files of one directory.
type Store struct {
	dir  string
	opts Options
	log  *slog.Logger
	lock *os.File

	// wmu serialises changes (StoreLogs, DeleteRange, Close). Appends
	// write and sync the file holding only wmu, so that GetLog, which
	// takes mu, reads on meanwhile.
	wmu     sync.Mutex
	buf     []byte         // encoding buffer of StoreLogs, reused
	direct  []directBodyAt // StoreLogs' entries written from their own bodies, reused
	failed  error          // a write or sync failed: the file's state is unknown, refuse further changes
	meta    meta           // durable first index and last tail cut
	install base           // a snapshot installed, until the next change of the log (NoteInstall)
	base    base           // the snapshot the log starts after, when kept past one (see base.go)

	// mu guards the fields below. Entries are visible to readers once
	// they are in segs' offsets, after they were written (and synced).
	mu          sync.RWMutex
	segs        []*segment // by base index; the last one takes appends
	first, last uint64     // 0, 0: the log is empty
	closed      bool
	retained    []*segment // compacted, kept for references; by base index
	pin         uint64     // references name no entry below it (0: none)
	pinKnown    bool       // false: keep every compacted entry (see SetPin)

	stable stable
}

var (
	_ raft.LogStore          = (*Store)(nil)
	_ raft.MonotonicLogStore = (*Store)(nil)
	_ raft.StableStore       = (*Store)(nil)
)

// ErrClosed is returned by a Store after Close.
var ErrClosed = errors.New("raft log closed")

const (
	metaFile   = "meta"
	stableFile = "stable"
	lockFile   = "lock"
)

// Open opens the log in dir, creating it if there is none.
func Open(dir string, opts Options) (*Store, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = 64 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, opts: opts, log: opts.Logger, lock: lock, pinKnown: !opts.References}
	if err := s.open(); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("raft log %s: %w", dir, err)
	}
	return s, nil
}

func (s *Store) open() error {
	var err error
	if s.stable.kv, err = readStable(filepath.Join(s.dir, stableFile)); err != nil {
		return err
	}
	if s.meta, err = readMeta(filepath.Join(s.dir, metaFile)); err != nil {
		return err
	}
	if s.base, err = readBase(filepath.Join(s.dir, baseFile)); err != nil {
		return err
	}
	if err := s.openRetained(); err != nil {
		return err
	}
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range names {
		if filepath.Ext(e.Name()) == ".tmp" { // an atomic replacement that did not finish
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
				return err
			}
			continue
		}
		base, ok := parseSegName(e.Name())
		if !ok {
			continue
		}
		f, err := os.OpenFile(filepath.Join(s.dir, e.Name()), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		s.segs = append(s.segs, &segment{base: base, f: f})
	}
	sort.Slice(s.segs, func(i, j int) bool { return s.segs[i].base < s.segs[j].base })

	for i, seg := range s.segs {
		lastSeg := i == len(s.segs)-1
		r, err := scan(seg.f, seg.base, lastSeg, s.meta.cut)
		if err != nil {
			return fmt.Errorf("%s: %w", segName(seg.base), err)
		}
		seg.offs, seg.size = r.offs, r.committed
		// A log that ends at its cut point ends inside a batch: the next
		// batch must follow in the same file (see activeFor).
		seg.cutEnd = lastSeg && len(r.offs) > 0 && seg.end() == s.meta.cut
		if r.committed == r.fileSize {
			continue
		}
		if !lastSeg {
			return fmt.Errorf("%s is damaged: %s at offset %d (not the last segment, so not a torn write)", segName(seg.base), orWhy(r), r.failAt)
		}
		if err := s.cutTail(seg, r); err != nil {
			return err
		}
	}

	// Segments wholly below the recorded first index: a compaction removed
	// (or retired) them and stopped before that reached the disk.
	for len(s.segs) > 0 && s.segs[0].end() < s.meta.first {
		if err := s.retire(s.segs[0], s.segs[0].end()); err != nil {
			return err
		}
		s.segs = s.segs[1:]
	}
	for i := 1; i < len(s.segs); i++ {
		prev, seg := s.segs[i-1], s.segs[i]
		if len(prev.offs) == 0 {
			return fmt.Errorf("segment %s is empty but not the last", segName(prev.base))
		}
		if seg.base != prev.end()+1 {
			return fmt.Errorf("segment %s follows %s, which ends at entry %d: entries missing", segName(seg.base), segName(prev.base), prev.end())
		}
	}
	if len(s.segs) > 0 {
		s.first = max(s.segs[0].base, s.meta.first)
		s.last = s.segs[len(s.segs)-1].end()
	}
	if s.last < s.first || len(s.segs) == 0 {
		// No entries, at most an empty segment file created for a batch
		// that was never written: the next batch may start anywhere.
		s.first, s.last = 0, 0
		for _, seg := range s.segs {
			if err := s.retire(seg, seg.end()); err != nil {
				return err
			}
		}
		s.segs = nil
	}
	return nil
}

func orWhy(r scanResult) string {
	if r.failAt < 0 {
		return "an unfinished batch"
	}
	return r.failWhy
}

// cutTail removes an unfinished batch at the end of the last segment: the
// write a crash interrupted, which StoreLogs never returned for. If an
// intact entry of a later batch follows the damage, the damaged entries
// were acknowledged and the log is reported broken instead.
func (s *Store) cutTail(seg *segment, r scanResult) error {
	torn := seg.base + uint64(len(r.offs))
	at, found, err := laterBatchAfter(seg.f, r.committed, r.fileSize, torn)
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("%s is damaged: %s at offset %d, and an intact later entry follows at offset %d (not a torn write)", segName(seg.base), orWhy(r), r.failAt, at)
	}
	s.log.Warn("raft log: cutting an unfinished write at the end of the log", "segment", segName(seg.base),
		"offset", r.committed, "bytes", r.fileSize-r.committed, "why", orWhy(r), "last_entry", torn-1)
	if err := seg.f.Truncate(r.committed); err != nil {
		return err
	}
	if s.opts.Fsync {
		return seg.f.Sync()
	}
	return nil
}

// FirstIndex implements raft.LogStore.
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.first, nil
}

// LastIndex implements raft.LogStore.
func (s *Store) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.last, nil
}

// IsMonotonic tells Raft that the log has no gaps: after installing a
// snapshot it deletes the whole log rather than leaving older entries below
// a gap.
func (s *Store) IsMonotonic() bool { return true }

// GetLog implements raft.LogStore. The entry's checksum is verified on
// every read; its Data and Extensions are its own, not shared.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if s.last == 0 || index < s.first || index > s.last {
		if s.baseEntry(index, l) {
			return nil
		}
		return raft.ErrLogNotFound
	}
	seg := s.segFor(index)
	off, n := seg.span(index)
	b := make([]byte, n)
	if _, err := seg.f.ReadAt(b, off); err != nil {
		return fmt.Errorf("raft log entry %d: %w", index, err)
	}
	h, err := decodeHeader(b)
	if err != nil || !checkEntry(&h, b) || h.index != index {
		return fmt.Errorf("raft log entry %d in %s at offset %d is damaged", index, segName(seg.base), off)
	}
	decodeEntry(&h, b, l)
	return nil
}

// ReadData fills b with the bytes of entry index's data from byte pos on,
// for an entry in the log or, with References, compacted and kept. The
// bytes are not checked against the entry's checksum: callers read a part
// of an entry and check what they read (a record batch's framing).
func (s *Store) ReadData(index uint64, pos int64, b []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	seg := s.holding(index)
	if seg == nil {
		return raft.ErrLogNotFound
	}
	off, n := seg.span(index)
	if pos < 0 || headerSize+pos+int64(len(b)) > n {
		return fmt.Errorf("raft log entry %d in %s: bytes %d to %d are not in its %d", index, s.segPath(seg), pos, pos+int64(len(b)), n-headerSize)
	}
	if _, err := seg.f.ReadAt(b, off+headerSize+pos); err != nil {
		return fmt.Errorf("raft log entry %d in %s: %w", index, s.segPath(seg), err)
	}
	return nil
}

// holding returns the segment holding entry index, in the log or (with
// References) compacted and kept; nil when there is none.
func (s *Store) holding(index uint64) *segment {
	lo := s.first
	if s.opts.References && len(s.segs) > 0 {
		lo = s.segs[0].base // entries compacted in the first file are kept with it
	}
	if s.last != 0 && index >= lo && index <= s.last {
		return s.segFor(index)
	}
	return s.retainedFor(index)
}

// segPath is the path of seg's file.
func (s *Store) segPath(seg *segment) string {
	if seg.retained {
		return filepath.Join(s.dir, retainedDir, segName(seg.base))
	}
	return filepath.Join(s.dir, segName(seg.base))
}

// segFor returns the segment holding index, which is in the log.
func (s *Store) segFor(index uint64) *segment {
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].base > index })
	return s.segs[i-1]
}

// StoreLog implements raft.LogStore.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the batch follows the last entry
// (or starts anywhere on an empty log) and is written in order, then
// synced once.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	first, last := logs[0].Index, logs[len(logs)-1].Index
	if first == 0 {
		return errors.New("raft log: entry index 0")
	}
	s.mu.RLock()
	prevLast := s.last
	s.mu.RUnlock()
	s.install = base{}
	if prevLast != 0 && first != prevLast+1 {
		return fmt.Errorf("raft log: appending entry %d after entry %d", first, prevLast)
	}
	for i, l := range logs {
		if l.Index != first+uint64(i) {
			return fmt.Errorf("raft log: entry %d after entry %d in one batch", l.Index, first+uint64(i)-1)
		}
	}
	if n := len(s.retained); prevLast == 0 && n > 0 && first <= s.retained[n-1].end() {
		// A log starts again after a snapshot of everything applied, and
		// every entry kept for references was applied: an entry at one of
		// their indexes would make a reference read another entry.
		return fmt.Errorf("raft log: entry %d where a compacted entry (up to %d) is kept for references", first, s.retained[n-1].end())
	}
	if prevLast == 0 && first < s.meta.first {
		// Entries below the recorded first index would be hidden on the
		// next open.
		if err := s.writeMeta(meta{first: first}); err != nil {
			return err
		}
	}

	seg, err := s.activeFor(first)
	if err != nil {
		return err
	}
	// Small entries are copied next to their headers; the body of a large
	// one is written from where it is, between the runs of the buffer:
	// copying a batch of megabytes into one buffer cost followers a fifth
	// of their CPU (growing the buffer included). The batch still goes to
	// the file in order before the one fsync, and a crash part-way leaves
	// an unfinished last batch, cut on the next open, as with one write.
	buf := s.buf[:0]
	direct := s.direct[:0]
	offs := make([]int64, 0, len(logs))
	size := int64(0)
	for _, l := range logs {
		offs = append(offs, seg.size+size)
		if buf, err = appendHeader(buf, l, first, last); err != nil {
			return err
		}
		body := len(l.Data) + len(l.Extensions)
		if body < directBody {
			buf = append(buf, l.Data...)
			buf = append(buf, l.Extensions...)
		} else {
			direct = append(direct, directBodyAt{bufEnd: len(buf), log: l})
		}
		size += headerSize + int64(body)
	}
	if err := s.writeBatch(seg, buf, direct, size); err != nil {
		s.failed = err
		return fmt.Errorf("raft log write: %w", err)
	}
	clear(direct) // keep no entry alive
	s.direct = direct[:0]
	if s.opts.Fsync {
		if err := seg.f.Sync(); err != nil {
			s.failed = err
			return fmt.Errorf("raft log fsync: %w", err)
		}
	}
	// Keep a buffer of ordinary size for the next batch, not the largest
	// one ever seen.
	if cap(buf) <= 16<<20 {
		s.buf = buf[:0]
	} else {
		s.buf = nil
	}

	s.mu.Lock()
	seg.offs = append(seg.offs, offs...)
	seg.size += size
	seg.cutEnd = false
	if s.last == 0 {
		s.first = first
	}
	s.last = last
	s.mu.Unlock()
	return nil
}

// directBody is the body size from which StoreLogs writes an entry's body
// from where it is instead of copying it into the batch buffer.
const directBody = 64 << 10

// directBodyAt is an entry whose body is written directly, after
// buf[:bufEnd] (and any earlier direct bodies).
type directBodyAt struct {
	bufEnd int
	log    *raft.Log
}

// writeBatch writes a batch of size bytes at the end of seg: the runs of buf
// between the direct bodies, and those bodies, in order.
func (s *Store) writeBatch(seg *segment, buf []byte, direct []directBodyAt, size int64) error {
	off, from := seg.size, 0
	write := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		_, err := seg.f.WriteAt(b, off)
		off += int64(len(b))
		return err
	}
	for _, d := range direct {
		if err := write(buf[from:d.bufEnd]); err != nil {
			return err
		}
		if err := write(d.log.Data); err != nil {
			return err
		}
		if err := write(d.log.Extensions); err != nil {
			return err
		}
		from = d.bufEnd
	}
	if err := write(buf[from:]); err != nil {
		return err
	}
	if off != seg.size+size {
		return fmt.Errorf("wrote %d bytes of a batch of %d", off-seg.size, size)
	}
	return nil
}

// activeFor returns the segment the batch starting at index goes to,
// creating a new one when there is none or the last one is full.
func (s *Store) activeFor(index uint64) (*segment, error) {
	if n := len(s.segs); n > 0 {
		seg := s.segs[n-1]
		// A segment that ends in a batch cut short by a truncation takes
		// the next batch, whose start shows that the cut one is complete.
		// An empty one is named for the entry it expects first.
		if len(seg.offs) > 0 && (seg.size < s.opts.SegmentSize || seg.cutEnd) || len(seg.offs) == 0 && seg.base == index {
			return seg, nil
		}
		if len(seg.offs) == 0 {
			return nil, fmt.Errorf("raft log: entry %d into the empty segment %s", index, segName(seg.base))
		}
	}
	path := filepath.Join(s.dir, segName(index))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if s.opts.Fsync {
		// The file must survive a crash once entries in it are
		// acknowledged.
		if err := SyncDir(s.dir); err != nil {
			f.Close()
			os.Remove(path)
			return nil, err
		}
	}
	seg := &segment{base: index, f: f}
	s.mu.Lock()
	s.segs = append(s.segs, seg)
	s.mu.Unlock()
	return seg, nil
}

func (s *Store) writable() error {
	if s.failed != nil {
		return fmt.Errorf("raft log: an earlier write failed, restart the node: %w", s.failed)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// DeleteRange implements raft.LogStore for the two ranges Raft deletes: a
// prefix (compaction after a snapshot) and a suffix (entries conflicting
// with a new leader's). A range in the middle is refused: it would leave a
// gap.
func (s *Store) DeleteRange(min, max uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	// Readers wait while files are removed or truncated under them.
	s.mu.Lock()
	defer s.mu.Unlock()
	install := s.install
	if !(min <= s.first && max < s.last) {
		s.install = base{} // a compaction of the head may run beside an install
	}
	if s.last == 0 || min > max || max < s.first || min > s.last {
		return nil
	}
	var err error
	switch {
	case min <= s.first && max >= s.last:
		kept := false
		if install.index != 0 {
			kept, err = s.keepPastSnapshot(install)
		}
		if !kept {
			err = s.deleteAll(max)
		}
	case min <= s.first:
		err = s.deleteHead(max)
	case max >= s.last:
		err = s.deleteTail(min)
	default:
		return fmt.Errorf("raft log: deleting entries %d..%d from the middle of %d..%d", min, max, s.first, s.last)
	}
	if err != nil {
		s.failed = err
	}
	return err
}

// deleteHead drops the entries up to max: the new first index is recorded
// before any file goes, so that a restart never finds an older one.
func (s *Store) deleteHead(max uint64) error {
	if err := s.writeMeta(meta{first: max + 1, cut: s.meta.cut}); err != nil {
		return err
	}
	s.first = max + 1
	for len(s.segs) > 1 && s.segs[1].base <= s.first {
		if err := s.retire(s.segs[0], s.segs[0].end()); err != nil {
			return err
		}
		s.segs = s.segs[1:]
	}
	return nil
}

// deleteAll empties the log (Raft does after installing a snapshot); the
// next batch may start at any index.
func (s *Store) deleteAll(max uint64) error {
	// Entries below the first are compacted ones still in the first file,
	// the rest Raft's, which it no longer needs. When the compacted ones
	// are kept, the file is cut after them, maybe inside a batch: the cut
	// point is recorded first, so that a crash before the file is moved
	// aside leaves a file the next open takes as it is, not as torn.
	var cut uint64
	if len(s.segs) > 0 && s.segs[0].base < s.first && s.pinned(s.first-1) {
		cut = s.first - 1
	}
	if err := s.writeMeta(meta{first: max + 1, cut: cut}); err != nil {
		return err
	}
	for len(s.segs) > 0 {
		seg := s.segs[len(s.segs)-1]
		var err error
		if seg.base < s.first {
			err = s.retire(seg, s.first-1)
		} else {
			err = s.removeSeg(seg)
		}
		if err != nil {
			return err
		}
		s.segs = s.segs[:len(s.segs)-1]
	}
	s.first, s.last = 0, 0
	return s.syncDirIf()
}

// deleteTail drops the entries from min on. Later segments go first, newest
// first, and their removal is made durable before the one holding min is
// truncated: a crash at any point leaves a prefix of the old log, and old
// entries can never reappear after new ones are appended at their indexes.
func (s *Store) deleteTail(min uint64) error {
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].base > min }) - 1
	for len(s.segs) > i+1 {
		if err := s.removeSeg(s.segs[len(s.segs)-1]); err != nil {
			return err
		}
		s.segs = s.segs[:len(s.segs)-1]
	}
	if err := s.syncDirIf(); err != nil {
		return err
	}
	// The new last entry may be in the middle of the batch it was written
	// with: record it as the cut point before cutting, so that a reopened
	// log does not take that batch for a torn write.
	if err := s.writeMeta(meta{first: s.meta.first, cut: min - 1}); err != nil {
		return err
	}
	seg := s.segs[i]
	off, _ := seg.span(min)
	if err := seg.f.Truncate(off); err != nil {
		return err
	}
	if s.opts.Fsync {
		if err := seg.f.Sync(); err != nil {
			return err
		}
	}
	seg.offs = slices.Clip(seg.offs[:min-seg.base])
	seg.size = off
	seg.cutEnd = len(seg.offs) > 0
	s.last = min - 1
	return nil
}

func (s *Store) removeSeg(seg *segment) error {
	seg.f.Close()
	return os.Remove(filepath.Join(s.dir, segName(seg.base)))
}

func (s *Store) syncDirIf() error {
	if !s.opts.Fsync {
		return nil
	}
	return SyncDir(s.dir)
}

// meta is what the log records outside its segments, in a small file
// replaced atomically: first is the first index after the last compaction
// (entries below it are gone even if a file still holds them), cut the
// last entry left by the last tail truncation (0: none since the log was
// last emptied).
type meta struct{ first, cut uint64 }

// The meta file: first and cut (see writePair).
func (s *Store) writeMeta(m meta) error {
	if err := writePair(s.dir, metaFile, m.first, m.cut, s.opts.Fsync); err != nil {
		return err
	}
	s.meta = m
	return nil
}

func readMeta(path string) (meta, error) {
	first, cut, err := readPair(path)
	return meta{first: first, cut: cut}, err
}

// The small files beside the segments (meta, base) each hold two numbers:
// a and b as little-endian u64, then their CRC-32C; replaced atomically.
func writePair(dir, name string, a, b uint64, sync bool) error {
	buf := binary.LittleEndian.AppendUint64(nil, a)
	buf = binary.LittleEndian.AppendUint64(buf, b)
	buf = binary.LittleEndian.AppendUint32(buf, crc32c(buf))
	return WriteFileAtomic(dir, name, buf, sync)
}

// readPair reads a file of writePair; a missing one reads as two zeros.
func readPair(path string) (uint64, uint64, error) {
	buf, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if len(buf) != 20 || crc32c(buf[:16]) != binary.LittleEndian.Uint32(buf[16:]) {
		return 0, 0, fmt.Errorf("%s is damaged", path)
	}
	return binary.LittleEndian.Uint64(buf), binary.LittleEndian.Uint64(buf[8:]), nil
}

// Close implements io.Closer: it waits for a change under way and closes
// the files. The data is already where the last call left it.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.closeFiles()
}

func (s *Store) closeFiles() error {
	var err error
	for _, seg := range slices.Concat(s.segs, s.retained) {
		if cerr := seg.f.Close(); err == nil {
			err = cerr
		}
	}
	s.segs, s.retained = nil, nil
	s.lock.Close() // releases the flock
	return err
}

var _ io.Closer = (*Store)(nil)

// lockDir takes the lock file of the log directory, so that a second
// process on the same data directory fails to start instead of writing the
// same files. It waits a little for a process that is just exiting.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s (is another kgate using this data directory?): %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
