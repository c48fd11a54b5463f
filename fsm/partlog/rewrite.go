package partlog

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// rewriteSuffix names a segment file being written again (Rewrite); Open
// removes one a crash left.
const rewriteSuffix = segmentSuffix + ".rewrite"

// ReferencedBelow is the bytes of the batches that references naming Raft
// entries below index serve: what Rewrite(index) would copy.
func (l *Log) ReferencedBelow(index uint64) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		if s.refs == 0 || s.firstRef >= index {
			continue
		}
		n += s.refBytesBelow(index)
	}
	return n
}

// refBytesBelow estimates from the segment's counts, without reading it:
// all its referenced bytes when its last reference is below index, else a
// share by index.
func (s *segment) refBytesBelow(index uint64) int64 {
	if s.lastRef < index || s.lastRef == s.firstRef {
		return s.refBytes
	}
	return s.refBytes * int64(index-s.firstRef) / int64(s.lastRef-s.firstRef+1)
}

// Rewrite copies into the log's own files the batches that references
// naming Raft entries below index serve, so that those entries need not
// be kept (the pin can pass them). Each segment holding such references is
// written again beside itself, with those batches in their place and every
// other record as it was, synced, and renamed over the old file; readers
// see the same batches before and after. It returns the bytes written.
//
// It runs beside appends and reads (not on the FSM goroutine): the copy is
// made from a descriptor of its own, and the file is swapped under the
// log's lock after the records appended meanwhile are copied too. A
// segment that a trim removed meanwhile is left; one is left too while a
// Range is open (a snapshot links its files by name) and tried again by
// the next call.
func (l *Log) Rewrite(ctx context.Context, index uint64) (written int64, err error) {
	l.rewriting.Lock()
	defer l.rewriting.Unlock()
	l.mu.RLock()
	var todo []*segment
	for _, s := range l.segments {
		if s.refs > 0 && s.firstRef < index {
			todo = append(todo, s)
		}
	}
	l.mu.RUnlock()
	for _, s := range todo {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		n, err := l.rewriteSegment(ctx, s, index)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

func (l *Log) rewriteSegment(ctx context.Context, s *segment, index uint64) (int64, error) {
	l.mu.RLock()
	ok := l.holds(s) && l.ranges.Load() == 0
	size, res := s.size, l.resolver
	var src *os.File
	var err error
	if ok {
		src, err = os.Open(s.path)
	}
	l.mu.RUnlock()
	if !ok {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer src.Close()

	tmpPath := s.path[:len(s.path)-len(segmentSuffix)] + rewriteSuffix
	tmp, err := os.OpenFile(tmpPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	swapped := false
	defer func() {
		if !swapped {
			tmp.Close()
			os.Remove(tmpPath)
		}
	}()
	ns := &segment{base: s.base, path: s.path, f: tmp, maxTs: -1, lastIdxPos: -indexIntervalSize}
	w := &rewriter{ns: ns, out: bufio.NewWriterSize(tmp, 1<<20), res: res, below: index}
	if err := w.copy(ctx, src, 0, size); err != nil {
		return 0, err
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.holds(s) || l.ranges.Load() != 0 {
		return 0, nil
	}
	// Records the FSM appended while the copy was made (the active
	// segment): few, copied under the lock so that none is missed.
	if err := w.copy(ctx, s.f, size, s.size); err != nil {
		return 0, err
	}
	if err := w.out.Flush(); err != nil {
		return 0, err
	}
	if err := tmp.Sync(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmpPath, s.path); err != nil {
		return 0, err
	}
	// The new file must be the one a restart finds before the pin can
	// pass the entries the old one named.
	swapped = true
	err = SyncDir(l.dir)
	for i := range l.segments {
		if l.segments[i] == s {
			l.segments[i] = ns
		}
	}
	s.f.Close()
	return ns.size, err
}

// holds says whether s is still one of the log's segments.
func (l *Log) holds(s *segment) bool {
	for _, t := range l.segments {
		if t == s {
			return true
		}
	}
	return false
}

// rewriter writes a segment's records again into ns, the batches that
// references below `below` name in their place.
type rewriter struct {
	ns    *segment
	out   *bufio.Writer
	res   Resolver
	below uint64
	buf   []byte
}

// copy writes the records of f in [pos, end) to the new segment.
func (w *rewriter) copy(ctx context.Context, f *os.File, pos, end int64) error {
	in := bufio.NewReaderSize(io.NewSectionReader(f, pos, end-pos), 1<<20)
	for n := 0; pos < end; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		h, err := in.Peek(int(min(refSize, end-pos)))
		if err != nil {
			return err
		}
		r, ok := parseRecord(h)
		if !ok || pos+r.size > end {
			return fmt.Errorf("partlog: %s: no record at byte %d", f.Name(), pos)
		}
		at, size := w.ns.size, r.size
		if r.isRef && r.ref.Index < w.below {
			if int64(cap(w.buf)) < r.served {
				w.buf = make([]byte, r.served)
			}
			b := w.buf[:r.served]
			if err := resolve(w.res, r, b); err != nil {
				return err
			}
			if _, err := in.Discard(int(r.size)); err != nil {
				return err
			}
			if _, err := w.out.Write(b); err != nil {
				return err
			}
			r.isRef, r.stamped, r.size, r.ref = false, false, r.served, Ref{}
		} else if _, err := io.CopyN(w.out, in, r.size); err != nil {
			return err
		}
		w.ns.note(r, at)
		w.ns.size += r.size
		pos += size
	}
	return nil
}

// removeRewrites removes segment files a crash left half rewritten: the
// segment they were for is still whole under its own name.
func removeRewrites(dir string, entries []os.DirEntry) error {
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), rewriteSuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// SyncDir makes files created, renamed or removed in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
