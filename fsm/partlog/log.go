// Package partlog stores one partition's record batches in segment files.
//
// The log is changed only by the FSM while it applies commands, so it never
// fsyncs on append: the Raft log is the durable copy, and a crash is repaired
// by truncating to the last checkpoint and replaying (see fsm.Open).
package partlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Batch header field positions (Kafka record batch, magic 2).
const (
	headerPeek        = 27 // base offset .. last offset delta
	offLength         = 8
	offLastDelta      = 23
	offMaxTimestamp   = 35
	offCRC            = 17
	offAttributes     = 21 // the CRC covers the batch from here on
	attrLogAppendTime = 0x08
	minBatchSize      = 61
	indexIntervalSize = 4096
	segmentSuffix     = ".log"
)

// StampAppendTime returns a copy of batch marked as holding append times,
// now its timestamp, with its CRC made again: what a Kafka broker writes
// for a LogAppendTime topic. (A copy: batch is a Raft entry's bytes.) A
// batch shorter than a header is returned as it is, for Append to refuse.
func StampAppendTime(batch []byte, now int64) []byte {
	if len(batch) < minBatchSize {
		return batch
	}
	out := bytes.Clone(batch)
	attrs := binary.BigEndian.Uint16(out[offAttributes:])
	binary.BigEndian.PutUint16(out[offAttributes:], attrs|attrLogAppendTime)
	binary.BigEndian.PutUint64(out[offMaxTimestamp:], uint64(now))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli) // the batch CRC's polynomial

// ErrOffsetOutOfRange is returned for reads outside [Start, Next].
var ErrOffsetOutOfRange = errors.New("partlog: offset out of range")

// Log is one partition's log. Appends come from one goroutine (the FSM);
// reads may come from any number.
type Log struct {
	dir          string
	segmentBytes int64

	mu       sync.RWMutex
	segments []*segment
	start    int64 // log start offset
	next     int64 // offset the next appended record gets
	wake     chan struct{}
	// writeAt writes segment files (os.File.WriteAt; tests make it fail).
	writeAt func(f *os.File, b []byte, off int64) (int, error)
}

type segment struct {
	base       int64
	path       string
	f          *os.File
	size       int64
	maxTs      int64
	index      []indexEntry // sparse: batch start positions, every ~4 KiB
	lastIdxPos int64
}

type indexEntry struct {
	offset int64 // base offset of the batch
	pos    int64
}

// Open opens (creating if needed) the log in dir and brings it to exactly
// [start, next): batches at or after next are cut off and segments wholly
// before start are removed, so the files agree with the FSM checkpoint.
func Open(dir string, start, next int64, segmentBytes int64) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if segmentBytes <= 0 {
		segmentBytes = 64 << 20
	}
	l := &Log{dir: dir, segmentBytes: segmentBytes, start: start, next: next, wake: make(chan struct{}),
		writeAt: (*os.File).WriteAt}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, segmentSuffix) {
			continue
		}
		b, err := strconv.ParseInt(strings.TrimSuffix(name, segmentSuffix), 10, 64)
		if err != nil {
			continue
		}
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var scans []segmentScan
	for _, b := range bases {
		path := filepath.Join(dir, segmentName(b))
		if b >= next {
			if err := os.Remove(path); err != nil {
				return nil, err
			}
			continue
		}
		sc, err := openSegment(path, b, next)
		if err != nil {
			l.closeSegments()
			return nil, err
		}
		l.segments = append(l.segments, sc.s)
		scans = append(scans, sc)
	}
	// Below next every byte was synced before the checkpoint that gave next
	// was written, so each segment must run whole up to the next one's base
	// and the last up to next. A batch that is missing or unreadable there
	// is damage, not a torn tail: cutting it would serve offsets below the
	// high watermark as empty and destroy the intact batches after it, so
	// opening fails instead.
	// Only whole segments may be missing, at the front: retention after the
	// checkpoint removed them, and replaying the log trims the start again.
	for i, sc := range scans {
		want := next
		if i+1 < len(scans) {
			want = scans[i+1].s.base
		}
		if sc.end != want {
			l.closeSegments()
			return nil, fmt.Errorf("partlog: %s is damaged: its batches end at offset %d, where %d was synced (offsets %d to %d are missing or unreadable)",
				sc.s.path, sc.end, want, sc.end, want-1)
		}
	}
	for _, sc := range scans {
		if sc.fileSize != sc.s.size {
			// Past next (the checkpoint's end) or a torn batch after it.
			if err := sc.s.f.Truncate(sc.s.size); err != nil {
				l.closeSegments()
				return nil, err
			}
		}
	}
	if err := l.dropBeforeLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) closeSegments() {
	for _, s := range l.segments {
		s.f.Close()
	}
	l.segments = nil
}

// SetSegmentBytes changes the size at which the active segment rolls, from
// the next append on (a topic's segment.bytes altered).
func (l *Log) SetSegmentBytes(n int64) {
	if n <= 0 {
		n = 64 << 20
	}
	l.mu.Lock()
	l.segmentBytes = n
	l.mu.Unlock()
}

func segmentName(base int64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

// segmentScan is what openSegment found in a segment file.
type segmentScan struct {
	s        *segment // size: the bytes of whole batches below next
	end      int64    // the offset after its last such batch (base if none)
	fileSize int64
}

// openSegment scans the batches of a segment file below next, rebuilding its
// index. It does not cut what follows them: Open decides whether that is a
// tail to cut or damage.
func openSegment(path string, base, next int64) (segmentScan, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return segmentScan{}, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return segmentScan{}, err
	}
	s := &segment{base: base, path: path, f: f, maxTs: -1, lastIdxPos: -indexIntervalSize}
	var hdr [minBatchSize]byte
	var pos int64
	end := base
	for pos+minBatchSize <= st.Size() {
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			break
		}
		bo := int64(binary.BigEndian.Uint64(hdr[0:]))
		size := int64(binary.BigEndian.Uint32(hdr[offLength:])) + 12
		if bo >= next || size < minBatchSize || pos+size > st.Size() {
			break
		}
		s.noteBatch(bo, pos, int64(binary.BigEndian.Uint64(hdr[offMaxTimestamp:])))
		end = bo + int64(int32(binary.BigEndian.Uint32(hdr[offLastDelta:]))) + 1
		pos += size
	}
	s.size = pos
	return segmentScan{s: s, end: end, fileSize: st.Size()}, nil
}

func (s *segment) noteBatch(baseOffset, pos, maxTs int64) {
	if pos-s.lastIdxPos >= indexIntervalSize || len(s.index) == 0 {
		s.index = append(s.index, indexEntry{offset: baseOffset, pos: pos})
		s.lastIdxPos = pos
	}
	if maxTs > s.maxTs {
		s.maxTs = maxTs
	}
}

func (s *segment) remove() error {
	s.f.Close()
	return os.Remove(s.path)
}

// Start is the log start offset.
func (l *Log) Start() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// Next is the offset the next record gets: the high watermark.
func (l *Log) Next() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.next
}

// Bounds returns the start and next offsets together.
func (l *Log) Bounds() (start, next int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start, l.next
}

// Size is the bytes held on disk.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// Wait returns a channel closed by the next append (or trim).
func (l *Log) Wait() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.wake
}

// Append writes one batch at Next(), putting that offset into the batch's
// base offset field on disk (batch itself is not modified: it may be shared
// with the Raft log cache). lastOffsetDelta and maxTs come from its header.
func (l *Log) Append(batch []byte, lastOffsetDelta int32, maxTs int64) (base int64, err error) {
	if len(batch) < minBatchSize {
		return 0, fmt.Errorf("partlog: batch of %d bytes", len(batch))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	base = l.next
	s, err := l.activeLocked(base, int64(len(batch)))
	if err != nil {
		return 0, err
	}
	var prefix [8]byte
	binary.BigEndian.PutUint64(prefix[:], uint64(base))
	_, err = l.writeAt(s.f, prefix[:], s.size)
	if err == nil {
		_, err = l.writeAt(s.f, batch[8:], s.size+8)
	}
	if err != nil {
		// A full disk can take part of the batch. Nothing counts it (size,
		// index and next stay), and the file is cut back so that it holds
		// only whole batches; were the cut to fail too, Open cuts a
		// partial batch off at the next start.
		if terr := s.f.Truncate(s.size); terr != nil {
			err = fmt.Errorf("%w (and cutting the partial batch off: %v)", err, terr)
		}
		return 0, err
	}
	s.noteBatch(base, s.size, maxTs)
	s.size += int64(len(batch))
	l.next = base + int64(lastOffsetDelta) + 1
	close(l.wake)
	l.wake = make(chan struct{})
	return base, nil
}

func (l *Log) activeLocked(base, n int64) (*segment, error) {
	if k := len(l.segments); k > 0 {
		s := l.segments[k-1]
		if s.size == 0 || s.size+n <= l.segmentBytes {
			return s, nil
		}
	}
	// A new segment starts empty: nothing at or past base is in any file
	// (Open removed such files), so there is nothing to scan.
	path := filepath.Join(l.dir, segmentName(base))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s := &segment{base: base, path: path, f: f, maxTs: -1, lastIdxPos: -indexIntervalSize}
	l.segments = append(l.segments, s)
	return s, nil
}

// Read returns whole batches starting with the one that holds offset, up to
// maxBytes, but always at least that first batch (KIP-74). It reads from one
// segment; the caller fetches again for more. A read at Next() returns nil.
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.ReadWith(offset, maxBytes, nil)
}

// ReadWith is Read into a buffer of n bytes that alloc returns (nil: a new
// one), for callers that reuse their buffers.
func (l *Log) ReadWith(offset int64, maxBytes int, alloc func(n int) []byte) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if offset < l.start || offset > l.next {
		return nil, ErrOffsetOutOfRange
	}
	if offset == l.next || len(l.segments) == 0 {
		return nil, nil
	}
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	for ; i < len(l.segments); i++ {
		s := l.segments[i]
		pos, err := s.find(offset)
		if err != nil {
			return nil, err
		}
		if pos >= s.size {
			continue // offset lies past this segment's last batch
		}
		end, err := s.extent(pos, maxBytes)
		if err != nil {
			return nil, err
		}
		var buf []byte
		if alloc != nil {
			buf = alloc(int(end - pos))
		} else {
			buf = make([]byte, end-pos)
		}
		n, err := s.f.ReadAt(buf, pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		// Only what was read: a reused buffer holds older bytes past it.
		return buf[:n], nil
	}
	return nil, nil
}

// find returns the position of the first batch whose last offset is >= offset.
func (s *segment) find(offset int64) (int64, error) {
	j := sort.Search(len(s.index), func(j int) bool { return s.index[j].offset > offset }) - 1
	var pos int64
	if j >= 0 {
		pos = s.index[j].pos
	}
	var hdr [headerPeek]byte
	for pos < s.size {
		if _, err := s.f.ReadAt(hdr[:], pos); err != nil {
			return 0, err
		}
		base := int64(binary.BigEndian.Uint64(hdr[0:]))
		last := base + int64(int32(binary.BigEndian.Uint32(hdr[offLastDelta:])))
		if last >= offset {
			return pos, nil
		}
		pos += int64(binary.BigEndian.Uint32(hdr[offLength:])) + 12
	}
	return pos, nil
}

// extent returns the end of the run of whole batches from pos that fits in
// maxBytes, with at least one batch.
func (s *segment) extent(pos int64, maxBytes int) (int64, error) {
	var hdr [12]byte
	end := pos
	for end < s.size {
		if _, err := s.f.ReadAt(hdr[:], end); err != nil {
			return 0, err
		}
		size := int64(binary.BigEndian.Uint32(hdr[offLength:])) + 12
		if end > pos && end+size-pos > int64(maxBytes) {
			break
		}
		end += size
	}
	return end, nil
}

// FindTimestamp returns the first batch whose max timestamp is >= ts, or nil
// when there is none. The caller looks inside it for the exact record.
func (l *Log) FindTimestamp(ts int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var hdr [minBatchSize]byte
	for _, s := range l.segments {
		if s.maxTs < ts {
			continue
		}
		for pos := int64(0); pos < s.size; {
			if _, err := s.f.ReadAt(hdr[:], pos); err != nil {
				return nil, err
			}
			size := int64(binary.BigEndian.Uint32(hdr[offLength:])) + 12
			base := int64(binary.BigEndian.Uint64(hdr[0:]))
			last := base + int64(int32(binary.BigEndian.Uint32(hdr[offLastDelta:])))
			if last >= l.start && int64(binary.BigEndian.Uint64(hdr[offMaxTimestamp:])) >= ts {
				buf := make([]byte, size)
				if _, err := s.f.ReadAt(buf, pos); err != nil {
					return nil, err
				}
				return buf, nil
			}
			pos += size
		}
	}
	return nil, nil
}

// SegmentInfo describes one segment for retention decisions.
type SegmentInfo struct {
	Base  int64 // first offset
	End   int64 // offset after its last record
	Bytes int64
	MaxTs int64
}

// Segments lists the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segments))
	for i, s := range l.segments {
		end := l.next
		if i+1 < len(l.segments) {
			end = l.segments[i+1].base
		}
		out[i] = SegmentInfo{Base: s.base, End: end, Bytes: s.size, MaxTs: s.maxTs}
	}
	return out
}

// TrimTo moves the log start offset forward to start and deletes segments
// that then hold nothing readable.
func (l *Log) TrimTo(start int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if start <= l.start {
		return nil
	}
	if start > l.next {
		start = l.next
	}
	l.start = start
	if err := l.dropBeforeLocked(); err != nil {
		return err
	}
	close(l.wake)
	l.wake = make(chan struct{})
	return nil
}

// dropBeforeLocked deletes segments that hold no offset at or after start.
func (l *Log) dropBeforeLocked() error {
	for len(l.segments) > 0 {
		end := l.next
		if len(l.segments) > 1 {
			end = l.segments[1].base
		}
		if end > l.start {
			return nil
		}
		if err := l.segments[0].remove(); err != nil {
			return err
		}
		l.segments = l.segments[1:]
	}
	return nil
}

// Reset empties the log and sets both start and next to offset: used when a
// snapshot is restored and the data is streamed in again.
func (l *Log) Reset(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segments {
		if err := s.remove(); err != nil {
			return err
		}
	}
	l.segments = nil
	l.start, l.next = offset, offset
	close(l.wake)
	l.wake = make(chan struct{})
	return nil
}

// Sync flushes every segment to stable storage (before a checkpoint).
func (l *Log) Sync() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segments {
		if err := s.f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// Range is a frozen view of a run of batches, readable after the log moves
// on: snapshots take it on the FSM goroutine and stream it later.
type Range struct {
	parts []rangePart
	n     int64
}

type rangePart struct {
	f        *os.File
	path     string
	pos, end int64
}

// RangeFile is one segment file's part of a Range: bytes [Pos, End) of the
// file at Path. Segment files are only appended to past synced data, so
// those bytes stay as they are for as long as the file (or a hard link to
// it) exists.
type RangeFile struct {
	Path     string
	Pos, End int64
}

// Files lists the segment files the range reads, in order.
func (r *Range) Files() []RangeFile {
	out := make([]RangeFile, len(r.parts))
	for i, p := range r.parts {
		out[i] = RangeFile{Path: p.path, Pos: p.pos, End: p.end}
	}
	return out
}

// Len is the number of bytes in the range.
func (r *Range) Len() int64 { return r.n }

// WriteTo copies the range to w.
func (r *Range) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, p := range r.parts {
		m, err := io.Copy(w, io.NewSectionReader(p.f, p.pos, p.end-p.pos))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Sync flushes the range's files to stable storage. A file that retention
// removed from the log after the range was taken is synced here or never.
func (r *Range) Sync() error {
	for _, p := range r.parts {
		if err := p.f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the range's files.
func (r *Range) Close() error {
	for _, p := range r.parts {
		p.f.Close()
	}
	r.parts = nil
	return nil
}

// Range returns the batches holding offsets in [start, next) as they are now.
// Each segment is opened again so that a later trim, which deletes files,
// cannot pull the bytes away.
func (l *Log) Range() (*Range, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	r := &Range{}
	for _, s := range l.segments {
		pos, err := s.find(l.start)
		if err == nil && pos < s.size {
			var f *os.File
			if f, err = os.Open(s.path); err == nil {
				r.parts = append(r.parts, rangePart{f, s.path, pos, s.size})
				r.n += s.size - pos
			}
		}
		if err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Close closes the segment files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	for _, s := range l.segments {
		if err := s.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	l.segments = nil
	return first
}

// Remove closes the log and deletes its directory.
func (l *Log) Remove() error {
	l.Close()
	return os.RemoveAll(l.dir)
}
