package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// With Options.References, entries are read from outside Raft: a partition
// serves batches straight from the entries that carried them (partlog.Ref),
// so an entry must stay readable after Raft compacts past it, for as long
// as a reference names it. Compaction then moves the segment files it
// would remove into the retained directory (cut after the last compacted
// entry where a file also held later ones), and they are removed once no
// reference needs them: SetPin says which. Until the first SetPin after
// opening, every file is kept, so that a state loaded from an older
// checkpoint finds every entry its references name.
//
// Raft never sees retained entries (GetLog, FirstIndex); ReadData reads
// them.

const retainedDir = "retained"

// SetPin says that references name no entry below first (0: none at all):
// retained files holding only entries below it are removed, and later
// compactions keep only files with entries from it on. Without
// References nothing is kept, and SetPin does nothing.
func (s *Store) SetPin(first uint64) error {
	if !s.opts.References {
		return nil
	}
	gone, err := s.release(first)
	if err != nil || len(gone) == 0 {
		return err
	}
	// Unlinked outside the locks (a large file can take milliseconds):
	// nothing reads them any more, and a file a crash leaves here is
	// kept at the next open only until the pin is set again.
	for _, seg := range gone {
		seg.f.Close()
		if err := os.Remove(s.segPath(seg)); err != nil {
			s.mu.Lock()
			s.failed = err
			s.mu.Unlock()
			return err
		}
	}
	if s.opts.Fsync {
		return SyncDir(filepath.Join(s.dir, retainedDir))
	}
	return nil
}

// release sets the pin and takes the retained files it no longer covers
// out of the store, returning them.
func (s *Store) release(first uint64) (gone []*segment, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pin, s.pinKnown = first, true
	var kept []*segment
	for _, seg := range s.retained {
		if s.pinned(seg.end()) {
			kept = append(kept, seg)
		} else {
			gone = append(gone, seg)
		}
	}
	s.retained = kept
	return gone, nil
}

// RetainedBytes is the size of the files kept past compaction for
// references.
func (s *Store) RetainedBytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for _, seg := range s.retained {
		n += seg.size
	}
	return n
}

// pinned says whether a reference may name an entry at or below last
// (of a file whose entries end there).
func (s *Store) pinned(last uint64) bool {
	return !s.pinKnown || s.pin != 0 && last >= s.pin
}

// retire takes seg out of the log after its entries up to upTo were
// compacted: into the retained directory, cut after upTo, when references
// may still name them; removed otherwise.
func (s *Store) retire(seg *segment, upTo uint64) error {
	if upTo < seg.base || !s.pinned(upTo) {
		return s.removeSeg(seg)
	}
	if upTo < seg.end() {
		off, _ := seg.span(upTo + 1)
		if err := seg.f.Truncate(off); err != nil {
			return err
		}
		if s.opts.Fsync {
			if err := seg.f.Sync(); err != nil {
				return err
			}
		}
		seg.offs = slices.Clip(seg.offs[:upTo+1-seg.base])
		seg.size = off
	}
	dir := filepath.Join(s.dir, retainedDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	from := s.segPath(seg)
	seg.retained = true
	if err := os.Rename(from, s.segPath(seg)); err != nil {
		seg.retained = false
		return err
	}
	if s.opts.Fsync {
		if err := SyncDir(dir); err != nil {
			return err
		}
		if err := SyncDir(s.dir); err != nil {
			return err
		}
	}
	s.retained = append(s.retained, seg)
	return nil
}

// retainedFor returns the retained segment holding index, or nil.
func (s *Store) retainedFor(index uint64) *segment {
	i := sort.Search(len(s.retained), func(i int) bool { return s.retained[i].base > index }) - 1
	if i < 0 || index > s.retained[i].end() {
		return nil
	}
	return s.retained[i]
}

// openRetained opens the retained files. Their entries were in the log
// (compacted, so applied) and are read in part, by references; a file is
// taken up to its first entry that cannot be read, and its entries are
// found by their headers.
func (s *Store) openRetained() error {
	dir := filepath.Join(s.dir, retainedDir)
	names, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range names {
		base, ok := parseSegName(e.Name())
		if !ok {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		seg := &segment{base: base, f: f, retained: true}
		if err := scanHeaders(seg); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", filepath.Join(retainedDir, e.Name()), err)
		}
		s.retained = append(s.retained, seg)
	}
	sort.Slice(s.retained, func(i, j int) bool { return s.retained[i].base < s.retained[j].base })
	if len(s.retained) > 0 {
		s.pinKnown = false // kept until the FSM says which it needs
	}
	return nil
}

// scanHeaders finds the entries of a retained file from their headers.
func scanHeaders(seg *segment) error {
	fi, err := seg.f.Stat()
	if err != nil {
		return err
	}
	var hdr [headerSize]byte
	var off int64
	for expect := seg.base; off+headerSize <= fi.Size(); expect++ {
		if _, err := seg.f.ReadAt(hdr[:], off); err != nil {
			return err
		}
		h, err := decodeHeader(hdr[:])
		if err != nil || h.index != expect || off+h.size() > fi.Size() {
			break
		}
		seg.offs = append(seg.offs, off)
		off += h.size()
	}
	seg.size = off
	return nil
}

// Sync flushes every entry written to stable storage. With Fsync each write
// already is; without it, a reference to an entry must not be recorded as
// durable (a checkpoint) before the entry is.
func (s *Store) Sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	for _, seg := range slices.Concat(s.segs, s.retained) {
		if err := seg.f.Sync(); err != nil {
			return err
		}
	}
	return nil
}
