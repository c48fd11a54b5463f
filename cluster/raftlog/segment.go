package raftlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A segment file holds the entries from its base index on, in order, each
// StoreLogs batch whole (a batch never spans two files). Its name is its
// base index, zero-padded so that names sort as indexes do.
type segment struct {
	base uint64
	f    *os.File
	offs []int64 // offs[i]: where entry base+i starts
	size int64   // end of the last complete batch; the file is never longer once open
	// cutEnd: the segment ends inside a batch, at the log's cut point
	// (a tail truncation), so the next batch must be appended to it.
	cutEnd bool
	// retained: compacted and moved aside for references (retained.go).
	retained bool
}

const segSuffix = ".seg"

func segName(base uint64) string { return fmt.Sprintf("%020d%s", base, segSuffix) }

func parseSegName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	base, err := strconv.ParseUint(s, 10, 64)
	return base, err == nil && base > 0
}

// end is the index of the segment's last entry (base-1 when it is empty).
func (s *segment) end() uint64 { return s.base + uint64(len(s.offs)) - 1 }

// span returns where entry index starts and how long it is.
func (s *segment) span(index uint64) (int64, int64) {
	k := index - s.base
	off := s.offs[k]
	next := s.size
	if k+1 < uint64(len(s.offs)) {
		next = s.offs[k+1]
	}
	return off, next - off
}

// scanResult is what scan found in a segment file.
type scanResult struct {
	offs      []int64 // entries of complete batches
	committed int64   // end of the last complete batch
	fileSize  int64
	// failAt and failWhy: the first entry that is damaged, torn or out of
	// place (failAt < 0: none; the file may still end in an unfinished batch).
	failAt  int64
	failWhy string
}

// scan walks the entries of a segment file from its start. With verify it
// reads every body and checks its checksum; without, only headers are read
// (a sealed segment: bodies are verified when read).
//
// A batch that ends before its batchLast was cut by a tail truncation: it is
// complete if a new batch follows it, or if the log's recorded cut point
// (cut) is its last entry.
func scan(f *os.File, base uint64, verify bool, cut uint64) (scanResult, error) {
	fi, err := f.Stat()
	if err != nil {
		return scanResult{}, err
	}
	r := scanResult{fileSize: fi.Size(), failAt: -1}
	var (
		off       int64
		expect    = base
		inBatch   bool
		bFirst    uint64
		bLast     uint64
		pending   []int64 // entries of the batch being read
		lastSize  int64   // of the entry read last
		hdr       = make([]byte, headerSize)
		entry     []byte
		fail      = func(why string) { r.failAt, r.failWhy = off, why }
		remaining = func() int64 { return r.fileSize - off }
	)
	for off < r.fileSize {
		if remaining() < headerSize {
			fail("a partial entry header")
			break
		}
		if _, err := f.ReadAt(hdr, off); err != nil {
			return r, err
		}
		h, err := decodeHeader(hdr)
		if err != nil {
			fail("no entry header")
			break
		}
		if h.size() > remaining() {
			fail(fmt.Sprintf("an entry of %d bytes with %d left in the file", h.size(), remaining()))
			break
		}
		if verify {
			if int64(cap(entry)) < h.size() {
				entry = make([]byte, h.size())
			}
			entry = entry[:h.size()]
			if _, err := f.ReadAt(entry, off); err != nil {
				return r, err
			}
			if !checkEntry(&h, entry) {
				fail(fmt.Sprintf("a checksum mismatch (entry %d?)", h.index))
				break
			}
		}
		if h.index != expect {
			fail(fmt.Sprintf("entry %d where %d belongs", h.index, expect))
			break
		}
		if inBatch && h.batchFirst == h.index && h.batchFirst != bFirst {
			// A new batch after a truncated one.
			r.offs = append(r.offs, pending...)
			pending = pending[:0]
			r.committed = off
			inBatch = false
		}
		if !inBatch {
			if h.batchFirst != h.index || h.batchLast < h.index {
				fail(fmt.Sprintf("entry %d opens a batch %d..%d", h.index, h.batchFirst, h.batchLast))
				break
			}
			inBatch, bFirst, bLast = true, h.batchFirst, h.batchLast
		} else if h.batchFirst != bFirst || h.batchLast != bLast {
			fail(fmt.Sprintf("entry %d of batch %d..%d inside batch %d..%d", h.index, h.batchFirst, h.batchLast, bFirst, bLast))
			break
		}
		pending = append(pending, off)
		lastSize = h.size()
		off += h.size()
		expect++
		if h.index == bLast {
			r.offs = append(r.offs, pending...)
			pending = pending[:0]
			r.committed = off
			inBatch = false
		}
	}
	if len(pending) > 0 && expect-1 == cut {
		r.offs = append(r.offs, pending...)
		r.committed = pending[len(pending)-1] + lastSize
	}
	return r, nil
}

// laterBatchAfter looks through the bytes of f from off to its end for an
// intact entry of a batch other than the one starting at torn (the batch
// that was being written when the process stopped), and reports the offset
// of the first one found. Its entries may be intact or not in any order,
// since the disk writes a file's pages in any order until fsync; an intact
// entry of another batch means that batch was written after, so the damaged
// bytes had been acknowledged.
func laterBatchAfter(f *os.File, off, size int64, torn uint64) (int64, bool, error) {
	if off >= size {
		return 0, false, nil
	}
	b := make([]byte, size-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return 0, false, err
	}
	var m [4]byte
	binary.LittleEndian.PutUint32(m[:], magic)
	for i := 0; ; i++ {
		j := bytes.Index(b[i:], m[:])
		if j < 0 {
			return 0, false, nil
		}
		i += j
		h, err := decodeHeader(b[i:])
		if err != nil || h.size() > int64(len(b)-i) || !checkEntry(&h, b[i:int64(i)+h.size()]) {
			continue
		}
		if h.batchFirst != torn {
			return off + int64(i), true, nil
		}
	}
}

// SyncDir makes entries created, renamed or removed in dir durable.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFileAtomic replaces dir/name with data: a crash leaves either the old
// file or the new one, never a mix. With sync the new one is on disk when
// it returns.
func WriteFileAtomic(dir, name string, data []byte, sync bool) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil && sync {
		err = SyncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
