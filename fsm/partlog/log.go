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
	"sync/atomic"
)

// Batch header field positions (Kafka record batch, magic 2).
const (
	offLength         = 8
	offLastDelta      = 23
	offMaxTimestamp   = 35
	offCRC            = 17
	offAttributes     = 21 // the CRC covers the batch from here on
	attrLogAppendTime = 0x08
	minBatchSize      = 61
	indexIntervalSize = 4096
	segmentSuffix     = ".log"

	// A reference (see Ref) is stored as a record shaped like a batch
	// header, so that everything that walks segments by header reads it:
	// base offset, length (its own), last offset delta and max timestamp
	// where a batch has them, magic refMagic, a CRC-32C of bytes 21 on,
	// and the Raft index, position and length of the batch it names.
	offMagic    = 16
	refMagic    = 0xfe // a stored batch is always magic 2
	offRefIndex = 61
	offRefPos   = 69
	offRefLen   = 73
	refSize     = 77
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
	stamp(out, now)
	return out
}

// stamp marks batch, in place, as holding append times, now its timestamp.
func stamp(batch []byte, now int64) {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:])
	binary.BigEndian.PutUint16(batch[offAttributes:], attrs|attrLogAppendTime)
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(now))
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
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
	// resolver reads the batches references name (nil: none can be read).
	resolver Resolver
	// ranges counts the Ranges taken and not yet closed: Rewrite leaves
	// the files alone meanwhile (a snapshot links them by name).
	ranges atomic.Int32
	// rewriting: one Rewrite at a time (each writes its segments' files
	// again under the same names).
	rewriting sync.Mutex
}

type segment struct {
	base       int64
	path       string
	f          *os.File
	size       int64 // bytes in the file: batches and references
	served     int64 // bytes the batches served from it take (a reference counts as its batch)
	refs       int   // references among its records
	firstRef   uint64
	lastRef    uint64
	refBytes   int64 // of the batches its references serve
	maxTs      int64
	index      []indexEntry // sparse: record start positions, every ~4 KiB
	lastIdxPos int64
}

// Ref names a batch kept in the Raft log rather than in the segment: Len
// bytes from position Pos of the data of entry Index. The log serves it as
// that batch with its base offset set, as if it had been appended.
type Ref struct {
	Index uint64
	Pos   uint32
	Len   uint32
}

// Resolver reads the batches that references name.
type Resolver interface {
	// ReadRef fills b (r.Len bytes) with the batch r names.
	ReadRef(r Ref, b []byte) error
}

// SetResolver says where the batches of the log's references are read
// from; it must be set before a log holding references is read.
func (l *Log) SetResolver(r Resolver) {
	l.mu.Lock()
	l.resolver = r
	l.mu.Unlock()
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
	if err := removeRewrites(dir, entries); err != nil {
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
	// Records are read up to the file's end; what follows the last whole
	// one below next is not counted (size ends there).
	s := &segment{base: base, path: path, f: f, size: st.Size(), maxTs: -1, lastIdxPos: -indexIntervalSize}
	var hdr [refSize]byte
	var pos int64
	end := base
	for pos < s.size {
		r, err := s.record(pos, &hdr)
		if err != nil || r.base >= next {
			break
		}
		s.note(r, pos)
		end = r.last + 1
		pos += r.size
	}
	s.size = pos
	return segmentScan{s: s, end: end, fileSize: st.Size()}, nil
}

// record is a segment record as its header gives it: a batch, or a
// reference to one.
type record struct {
	base, last int64
	size       int64 // in the file
	served     int64 // the batch's, as served
	maxTs      int64
	isRef      bool
	ref        Ref
	stamped    bool // a reference whose batch is served with its append time, maxTs
}

// parseRecord reads the header of a record from h, which holds its first
// bytes (all of a reference's). ok is false for a header that cannot be a
// record's, or a reference cut short or damaged.
func parseRecord(h []byte) (r record, ok bool) {
	if len(h) < minBatchSize {
		return r, false
	}
	r = record{
		base:  int64(binary.BigEndian.Uint64(h[0:])),
		size:  int64(binary.BigEndian.Uint32(h[offLength:])) + 12,
		maxTs: int64(binary.BigEndian.Uint64(h[offMaxTimestamp:])),
	}
	r.last = r.base + int64(int32(binary.BigEndian.Uint32(h[offLastDelta:])))
	r.served = r.size
	if h[offMagic] != refMagic {
		return r, r.size >= minBatchSize
	}
	if r.size != refSize || len(h) < refSize ||
		binary.BigEndian.Uint32(h[offCRC:]) != crc32.Checksum(h[offAttributes:refSize], castagnoli) {
		return r, false
	}
	r.isRef = true
	r.ref = Ref{
		Index: binary.BigEndian.Uint64(h[offRefIndex:]),
		Pos:   binary.BigEndian.Uint32(h[offRefPos:]),
		Len:   binary.BigEndian.Uint32(h[offRefLen:]),
	}
	r.stamped = binary.BigEndian.Uint16(h[offAttributes:])&attrLogAppendTime != 0
	r.served = int64(r.ref.Len)
	return r, r.ref.Len >= minBatchSize
}

// record reads the header of the record at pos, which starts one.
func (s *segment) record(pos int64, h *[refSize]byte) (record, error) {
	n := min(refSize, s.size-pos)
	if _, err := s.f.ReadAt(h[:n], pos); err != nil {
		return record{}, err
	}
	r, ok := parseRecord(h[:n])
	if !ok || pos+r.size > s.size {
		return record{}, fmt.Errorf("partlog: %s: no record at byte %d", s.path, pos)
	}
	return r, nil
}

// note counts the record r written (or found) at pos.
func (s *segment) note(r record, pos int64) {
	if pos-s.lastIdxPos >= indexIntervalSize || len(s.index) == 0 {
		s.index = append(s.index, indexEntry{offset: r.base, pos: pos})
		s.lastIdxPos = pos
	}
	if r.maxTs > s.maxTs {
		s.maxTs = r.maxTs
	}
	s.served += r.served
	if r.isRef {
		if s.refs == 0 {
			s.firstRef = r.ref.Index
		}
		s.lastRef = r.ref.Index
		s.refs++
		s.refBytes += r.served
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

// Size is the bytes of the batches the log holds, as they are served (a
// reference counts as the batch it names): the same on every replica.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.served
	}
	return n
}

// FirstRef is the lowest Raft index that a reference in the log's files
// names (0: none). The entries from there on must stay readable.
func (l *Log) FirstRef() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segments {
		if s.refs > 0 {
			return s.firstRef
		}
	}
	return 0
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
	s, err := l.activeLocked(int64(len(batch)))
	if err != nil {
		return 0, err
	}
	var prefix [8]byte
	binary.BigEndian.PutUint64(prefix[:], uint64(base))
	r := record{base: base, last: base + int64(lastOffsetDelta), size: int64(len(batch)), served: int64(len(batch)), maxTs: maxTs}
	if err := l.writeLocked(s, r, prefix[:], batch[8:]); err != nil {
		return 0, err
	}
	return base, nil
}

// AppendRef writes at Next() a reference to a batch kept in the Raft log
// (r), which the log then serves as if the batch had been appended: with
// its base offset set and, when appendTime is not -1, stamped with that
// append time as StampAppendTime stamps it. lastOffsetDelta and maxTs come
// from the batch's header.
func (l *Log) AppendRef(r Ref, lastOffsetDelta int32, maxTs, appendTime int64) (base int64, err error) {
	if r.Len < minBatchSize {
		return 0, fmt.Errorf("partlog: a reference to a batch of %d bytes", r.Len)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	base = l.next
	s, err := l.activeLocked(int64(r.Len))
	if err != nil {
		return 0, err
	}
	var attrs uint16
	if appendTime != -1 {
		attrs, maxTs = attrLogAppendTime, appendTime
	}
	var b [refSize]byte
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[offLength:], refSize-12)
	b[offMagic] = refMagic
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint32(b[offLastDelta:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offRefIndex:], r.Index)
	binary.BigEndian.PutUint32(b[offRefPos:], r.Pos)
	binary.BigEndian.PutUint32(b[offRefLen:], r.Len)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	rec := record{base: base, last: base + int64(lastOffsetDelta), size: refSize, served: int64(r.Len), maxTs: maxTs,
		isRef: true, ref: r, stamped: attrs != 0}
	if err := l.writeLocked(s, rec, b[:]); err != nil {
		return 0, err
	}
	return base, nil
}

// writeLocked writes the record r, given in parts, at the end of s and
// counts it.
func (l *Log) writeLocked(s *segment, r record, parts ...[]byte) error {
	pos := s.size
	for _, b := range parts {
		if _, err := l.writeAt(s.f, b, pos); err != nil {
			// A full disk can take part of the record. Nothing counts it
			// (size, index and next stay), and the file is cut back so
			// that it holds only whole records; were the cut to fail too,
			// Open cuts a partial record off at the next start.
			if terr := s.f.Truncate(s.size); terr != nil {
				err = fmt.Errorf("%w (and cutting the partial batch off: %v)", err, terr)
			}
			return err
		}
		pos += int64(len(b))
	}
	s.note(r, s.size)
	s.size = pos
	l.next = r.last + 1
	close(l.wake)
	l.wake = make(chan struct{})
	return nil
}

// activeLocked returns the segment the next record goes to, n bytes as
// served: segments roll by the bytes they serve, so that one holding
// references covers as many offsets as one holding the batches.
func (l *Log) activeLocked(n int64) (*segment, error) {
	base := l.next
	if k := len(l.segments); k > 0 {
		s := l.segments[k-1]
		if s.size == 0 || s.served+n <= l.segmentBytes {
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
		end, served, refs, err := s.extent(pos, maxBytes)
		if err != nil {
			return nil, err
		}
		var buf []byte
		if alloc != nil {
			buf = alloc(int(served))
		} else {
			buf = make([]byte, served)
		}
		if refs {
			if err := s.expand(l.resolver, pos, end, buf); err != nil {
				return nil, err
			}
			return buf, nil
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

// expand fills buf with the batches the records in [pos, end) serve: the
// batches as they are in the file, and those the references name read
// through res. The records are read whole first (a reference is small;
// a batch among them is copied once more in memory).
func (s *segment) expand(res Resolver, pos, end int64, buf []byte) error {
	raw := make([]byte, end-pos)
	if _, err := s.f.ReadAt(raw, pos); err != nil {
		return err
	}
	out := int64(0)
	for p := int64(0); p < int64(len(raw)); {
		r, ok := parseRecord(raw[p:min(p+refSize, int64(len(raw)))])
		if !ok || p+r.size > int64(len(raw)) || out+r.served > int64(len(buf)) {
			return fmt.Errorf("partlog: %s: no record at byte %d", s.path, pos+p)
		}
		if r.isRef {
			if err := resolve(res, r, buf[out:out+r.served]); err != nil {
				return err
			}
		} else {
			copy(buf[out:], raw[p:p+r.size])
		}
		out += r.served
		p += r.size
	}
	if out != int64(len(buf)) {
		return fmt.Errorf("partlog: %s: the records at bytes %d to %d serve %d bytes, not %d", s.path, pos, end, out, len(buf))
	}
	return nil
}

// resolve reads the batch the reference r names into b, as the log serves
// it: its base offset set and, when r says so, stamped.
func resolve(res Resolver, r record, b []byte) error {
	if res == nil {
		return fmt.Errorf("partlog: a batch in Raft entry %d, and nowhere to read it from", r.ref.Index)
	}
	if err := res.ReadRef(r.ref, b); err != nil {
		return fmt.Errorf("partlog: the batch at offset %d in Raft entry %d: %w", r.base, r.ref.Index, err)
	}
	// The bytes must be the batch the reference was written for.
	if int64(binary.BigEndian.Uint32(b[offLength:]))+12 != r.served || b[offMagic] != 2 ||
		int64(int32(binary.BigEndian.Uint32(b[offLastDelta:]))) != r.last-r.base {
		return fmt.Errorf("partlog: Raft entry %d does not hold the batch at offset %d at byte %d", r.ref.Index, r.base, r.ref.Pos)
	}
	binary.BigEndian.PutUint64(b[0:], uint64(r.base))
	if r.stamped {
		stamp(b, r.maxTs)
	}
	return nil
}

// find returns the position of the first batch whose last offset is >= offset.
func (s *segment) find(offset int64) (int64, error) {
	j := sort.Search(len(s.index), func(j int) bool { return s.index[j].offset > offset }) - 1
	var pos int64
	if j >= 0 {
		pos = s.index[j].pos
	}
	var hdr [refSize]byte
	for pos < s.size {
		r, err := s.record(pos, &hdr)
		if err != nil {
			return 0, err
		}
		if r.last >= offset {
			return pos, nil
		}
		pos += r.size
	}
	return pos, nil
}

// extent returns the end of the run of whole records from pos whose
// batches fit in maxBytes, with at least one; the bytes those batches take;
// and whether any of the records is a reference.
func (s *segment) extent(pos int64, maxBytes int) (end, served int64, refs bool, err error) {
	var hdr [refSize]byte
	end = pos
	for end < s.size {
		r, err := s.record(end, &hdr)
		if err != nil {
			return 0, 0, false, err
		}
		if end > pos && served+r.served > int64(maxBytes) {
			break
		}
		end += r.size
		served += r.served
		refs = refs || r.isRef
	}
	return end, served, refs, nil
}

// FindTimestamp returns the first batch whose max timestamp is >= ts, or nil
// when there is none. The caller looks inside it for the exact record.
func (l *Log) FindTimestamp(ts int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var hdr [refSize]byte
	for _, s := range l.segments {
		if s.maxTs < ts {
			continue
		}
		for pos := int64(0); pos < s.size; {
			r, err := s.record(pos, &hdr)
			if err != nil {
				return nil, err
			}
			if r.last >= l.start && r.maxTs >= ts {
				buf := make([]byte, r.served)
				if r.isRef {
					err = resolve(l.resolver, r, buf)
				} else {
					_, err = s.f.ReadAt(buf, pos)
				}
				if err != nil {
					return nil, err
				}
				return buf, nil
			}
			pos += r.size
		}
	}
	return nil, nil
}

// SegmentInfo describes one segment for retention decisions.
type SegmentInfo struct {
	Base  int64 // first offset
	End   int64 // offset after its last record
	Bytes int64 // of the batches it serves
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
		out[i] = SegmentInfo{Base: s.base, End: end, Bytes: s.served, MaxTs: s.maxTs}
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
	res   Resolver
	log   *Log // until closed
}

type rangePart struct {
	f        *os.File
	path     string
	pos, end int64
	served   int64  // bytes of the batches its records serve
	firstRef uint64 // the Raft index its first reference names (0: it has none)
}

// RangeFile is one segment file's part of a Range: bytes [Pos, End) of the
// file at Path. Segment files are only appended to past synced data, so
// those bytes stay as they are for as long as the file (or a hard link to
// it) exists.
type RangeFile struct {
	Path     string
	Pos, End int64
	// Served is the bytes of the batches the records in [Pos, End) serve;
	// with Refs some of them are references, and NewRecordReader gives
	// the batches (otherwise they are the file's bytes).
	Served int64
	Refs   bool
}

// FirstRef is the lowest Raft index a reference in the range names (0:
// none): the entries from there on must stay readable while the range may
// be read.
func (r *Range) FirstRef() uint64 {
	for _, p := range r.parts {
		if p.firstRef != 0 {
			return p.firstRef
		}
	}
	return 0
}

// Files lists the segment files the range reads, in order.
func (r *Range) Files() []RangeFile {
	out := make([]RangeFile, len(r.parts))
	for i, p := range r.parts {
		out[i] = RangeFile{Path: p.path, Pos: p.pos, End: p.end, Served: p.served, Refs: p.firstRef != 0}
	}
	return out
}

// Len is the number of bytes of the range's batches.
func (r *Range) Len() int64 { return r.n }

// WriteTo copies the range's batches to w, those that references name
// read from where they are kept.
func (r *Range) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, p := range r.parts {
		m, err := io.Copy(w, NewRecordReader(p.f, p.pos, p.end, r.res))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// RecordReader reads the batches that the records of a segment file in
// [pos, end) serve: a batch as it is in the file, a reference as the batch
// it names, read through the Resolver.
type RecordReader struct {
	f        *os.File
	pos, end int64
	res      Resolver
	raw      int64  // bytes of a batch in the file still to read, from pos
	pending  []byte // a resolved batch not yet read
	buf      []byte
}

// NewRecordReader reads the batches of f's records in [pos, end), which
// must start and end at records.
func NewRecordReader(f *os.File, pos, end int64, res Resolver) *RecordReader {
	return &RecordReader{f: f, pos: pos, end: end, res: res}
}

func (rr *RecordReader) Read(p []byte) (int, error) {
	for {
		if len(rr.pending) > 0 {
			n := copy(p, rr.pending)
			rr.pending = rr.pending[n:]
			return n, nil
		}
		if rr.raw > 0 {
			n, err := rr.f.ReadAt(p[:min(int64(len(p)), rr.raw)], rr.pos)
			rr.pos += int64(n)
			rr.raw -= int64(n)
			if n > 0 {
				return n, nil
			}
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if rr.pos >= rr.end {
			return 0, io.EOF
		}
		seg := segment{path: rr.f.Name(), f: rr.f, size: rr.end}
		var hdr [refSize]byte
		r, err := seg.record(rr.pos, &hdr)
		if err != nil {
			return 0, err
		}
		if !r.isRef {
			rr.raw = r.size
			continue
		}
		if int64(cap(rr.buf)) < r.served {
			rr.buf = make([]byte, r.served)
		}
		if err := resolve(rr.res, r, rr.buf[:r.served]); err != nil {
			return 0, err
		}
		rr.pending = rr.buf[:r.served]
		rr.pos += r.size
	}
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
	if r.log != nil {
		r.log.ranges.Add(-1)
		r.log = nil
	}
	return nil
}

// Range returns the batches holding offsets in [start, next) as they are now.
// Each segment is opened again so that a later trim, which deletes files,
// cannot pull the bytes away.
func (l *Log) Range() (*Range, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	l.ranges.Add(1)
	r := &Range{res: l.resolver, log: l}
	for _, s := range l.segments {
		pos, err := s.find(l.start)
		if err == nil && pos < s.size {
			part := rangePart{path: s.path, pos: pos, end: s.size, served: s.size - pos}
			if s.refs > 0 {
				part.served, part.firstRef, err = s.servedFrom(pos)
			}
			if err == nil {
				if part.f, err = os.Open(s.path); err == nil {
					r.parts = append(r.parts, part)
					r.n += part.served
				}
			}
		}
		if err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// servedFrom is the bytes the batches of the records from pos on serve,
// and the Raft index the first reference among them names (0: none).
func (s *segment) servedFrom(pos int64) (n int64, firstRef uint64, err error) {
	var hdr [refSize]byte
	for pos < s.size {
		r, err := s.record(pos, &hdr)
		if err != nil {
			return 0, 0, err
		}
		if r.isRef && firstRef == 0 {
			firstRef = r.ref.Index
		}
		n += r.served
		pos += r.size
	}
	return n, firstRef, nil
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
