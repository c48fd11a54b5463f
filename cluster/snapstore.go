package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/cluster/raftlog"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/fsm/partlog"
)

// A snapshot this node takes of its own state is kept by reference: its
// state.bin in hashicorp/raft's file store holds the metadata and, for each
// partition, the byte ranges of segment files that make up the partition's
// part of the stream, and the segment files themselves are hard links in
// the snapshot's directory (NAME/segments/). Persisting it writes only the
// metadata, where a full snapshot would copy every retained record again.
// Retention, topic deletion and restores unlink partition files, and a
// link keeps the bytes; segment files are only appended to past synced
// data, so the ranges stay as recorded. Raft's reaping removes the
// snapshot's directory with its links.
//
// Opened, such a snapshot yields the full stream (refSnapshotStore.Open),
// expanded from the links as it is read, and Size is the expanded size:
// what a follower receives by InstallSnapshot and `kgate snapshot save`
// writes. Snapshots written in full (received from a leader, restored by
// `kgate snapshot restore`, or left by an earlier release) have the FSM's
// own magic and are read as they are.
//
// Reference form (big-endian): "KGATESR1", the expanded size, the index,
// the metadata's length and bytes, the number of partitions, and for each
// partition the number of files and for each file its name (2-byte length
// and bytes, relative to the snapshot's directory), start and end offset.
//
// Partition segments may hold references to batches in Raft entries
// (partlog.Ref; --partition-storage=raft-log): their part of the stream is
// the batches those name, read through the Raft log as the stream is read.
// Such a snapshot is written in form 2: "KGATESR2", the expanded size, the
// pin (the lowest Raft index its references name, 0: none, which the Raft
// log keeps while the snapshot exists), then as form 1 from the index on,
// each file followed by the bytes its records serve and a flag (1: it has
// references).
var (
	refMagic  = []byte("KGATESR1")
	refMagic2 = []byte("KGATESR2")
)

const (
	// linkStagingDir (under the Raft directory) holds the links a snapshot
	// takes on the FSM goroutine until Persist moves them into the
	// snapshot's directory.
	linkStagingDir = "snapshot-links"
	segmentsDir    = "segments"
)

// refSnapshotStore is hashicorp/raft's file store, with snapshots kept by
// reference expanded on Open.
type refSnapshotStore struct {
	*raft.FileSnapshotStore
	raftDir string
	copying atomic.Bool // the last snapshot could not link and copied the data
	// res reads the batches that references in linked segments name.
	res partlog.Resolver
	// held: the pins of snapshots taken and not yet released, by a
	// sequence number (see hold).
	heldMu sync.Mutex
	held   map[uint64]uint64
	seq    uint64
}

// hold keeps the Raft entries from pin on while a snapshot taken is being
// written (and until Raft releases it); release lets them go.
func (s *refSnapshotStore) hold(pin uint64) (release func()) {
	if pin == 0 {
		return func() {}
	}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if s.held == nil {
		s.held = map[uint64]uint64{}
	}
	s.seq++
	id := s.seq
	s.held[id] = pin
	return func() {
		s.heldMu.Lock()
		delete(s.held, id)
		s.heldMu.Unlock()
	}
}

// pin is the lowest Raft index that a snapshot on disk or being written
// refers to (0: none).
func (s *refSnapshotStore) pin() (uint64, error) {
	var pin uint64
	lower := func(p uint64) {
		if p != 0 && (pin == 0 || p < pin) {
			pin = p
		}
	}
	s.heldMu.Lock()
	for _, p := range s.held {
		lower(p)
	}
	s.heldMu.Unlock()
	list, err := s.FileSnapshotStore.List()
	if err != nil {
		return 0, err
	}
	for _, m := range list {
		_, p, err := s.readHeader(m.ID)
		if err != nil {
			return 0, err
		}
		lower(p)
	}
	return pin, nil
}

// readHeader reads a snapshot's expanded size and pin from its state.bin
// (-1 and 0 for a snapshot written in full).
func (s *refSnapshotStore) readHeader(id string) (size int64, pin uint64, err error) {
	f, err := os.Open(filepath.Join(s.snapshotsDir(), id, "state.bin"))
	if err != nil {
		return -1, 0, err
	}
	defer f.Close()
	var hdr [24]byte
	n, err := io.ReadFull(f, hdr[:])
	switch {
	case n >= 16 && bytes.Equal(hdr[:8], refMagic):
		return int64(binary.BigEndian.Uint64(hdr[8:])), 0, nil
	case err == nil && bytes.Equal(hdr[:8], refMagic2):
		return int64(binary.BigEndian.Uint64(hdr[8:])), binary.BigEndian.Uint64(hdr[16:]), nil
	}
	return -1, 0, nil
}

func (s *refSnapshotStore) snapshotsDir() string { return filepath.Join(s.raftDir, "snapshots") }

// sinkDir is where the file store writes an open sink's files.
func (s *refSnapshotStore) sinkDir(sink raft.SnapshotSink) string {
	return filepath.Join(s.snapshotsDir(), sink.ID()+".tmp")
}

// List reports each snapshot's expanded size. Only the header of a
// reference-form state.bin is read.
func (s *refSnapshotStore) List() ([]*raft.SnapshotMeta, error) {
	list, err := s.FileSnapshotStore.List()
	if err != nil {
		return nil, err
	}
	for _, m := range list {
		// An error is Open's to report, for the one snapshot Raft opens.
		if size, _, err := s.readHeader(m.ID); err == nil && size >= 0 {
			m.Size = size
		}
	}
	return list, nil
}

// Open opens a snapshot as its full stream.
func (s *refSnapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(rc, 1<<16)
	magic, err := br.Peek(len(refMagic))
	if err != nil || !bytes.Equal(magic, refMagic) && !bytes.Equal(magic, refMagic2) {
		// A full snapshot (or one too short to be either, which the FSM
		// refuses with its own error).
		return meta, readCloser{br, rc}, nil
	}
	raw, err := io.ReadAll(br)
	rc.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	ref, err := decodeRef(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	meta.Size = ref.size
	return meta, &expander{dir: filepath.Join(s.snapshotsDir(), id), items: ref.items(), res: s.res}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// refFile is one linked segment file's part of the stream.
type refFile struct {
	name     string // relative to the snapshot's directory
	pos, end int64
	served   int64 // bytes of the batches its records serve, with refs
	refs     bool  // some records are references (form 2)
}

// size is the bytes of the stream the file's part gives.
func (f refFile) size() int64 {
	if f.refs {
		return f.served
	}
	return f.end - f.pos
}

type snapshotRef struct {
	size  int64  // of the expanded stream
	pin   uint64 // lowest Raft index its references name (form 2; 0: none)
	index uint64
	meta  []byte
	parts [][]refFile
}

// form2 says whether r is written in form 2: some file has references.
func (r *snapshotRef) form2() bool {
	for _, files := range r.parts {
		for _, f := range files {
			if f.refs {
				return true
			}
		}
	}
	return false
}

func (r *snapshotRef) expandedSize() int64 {
	n := int64(len(fsm.SnapshotHeader(0, nil))) + int64(len(r.meta))
	for _, files := range r.parts {
		n += 8
		for _, f := range files {
			n += f.size()
		}
	}
	return n
}

func (r *snapshotRef) encode() []byte {
	v2 := r.form2()
	b := append([]byte(nil), refMagic...)
	if v2 {
		b = append(b[:0], refMagic2...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(r.size))
	if v2 {
		b = binary.BigEndian.AppendUint64(b, r.pin)
	}
	b = binary.BigEndian.AppendUint64(b, r.index)
	b = binary.BigEndian.AppendUint64(b, uint64(len(r.meta)))
	b = append(b, r.meta...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(r.parts)))
	for _, files := range r.parts {
		b = binary.BigEndian.AppendUint64(b, uint64(len(files)))
		for _, f := range files {
			b = binary.BigEndian.AppendUint16(b, uint16(len(f.name)))
			b = append(b, f.name...)
			b = binary.BigEndian.AppendUint64(b, uint64(f.pos))
			b = binary.BigEndian.AppendUint64(b, uint64(f.end))
			if v2 {
				b = binary.BigEndian.AppendUint64(b, uint64(f.size()))
				flags := byte(0)
				if f.refs {
					flags = 1
				}
				b = append(b, flags)
			}
		}
	}
	return b
}

var errBadRef = errors.New("malformed snapshot reference")

func decodeRef(b []byte) (*snapshotRef, error) {
	take := func(n uint64) []byte {
		if n > uint64(len(b)) {
			return nil
		}
		v := b[:n]
		b = b[n:]
		return v
	}
	u64 := func() (uint64, bool) {
		v := take(8)
		if v == nil {
			return 0, false
		}
		return binary.BigEndian.Uint64(v), true
	}
	r := &snapshotRef{}
	var v2 bool
	switch m := take(uint64(len(refMagic))); {
	case bytes.Equal(m, refMagic2):
		v2 = true
	case !bytes.Equal(m, refMagic):
		return nil, errBadRef
	}
	size, ok1 := u64()
	if v2 {
		pin, ok := u64()
		if !ok {
			return nil, errBadRef
		}
		r.pin = pin
	}
	index, ok2 := u64()
	metaLen, ok3 := u64()
	if !ok1 || !ok2 || !ok3 {
		return nil, errBadRef
	}
	r.size, r.index = int64(size), index
	if r.meta = take(metaLen); r.meta == nil && metaLen > 0 {
		return nil, errBadRef
	}
	nparts, ok := u64()
	if !ok || nparts > uint64(len(b))/8 {
		return nil, errBadRef
	}
	r.parts = make([][]refFile, 0, nparts)
	for range nparts {
		nfiles, ok := u64()
		if !ok || nfiles > uint64(len(b))/18 {
			return nil, errBadRef
		}
		files := make([]refFile, 0, nfiles)
		for range nfiles {
			nl := take(2)
			if nl == nil {
				return nil, errBadRef
			}
			name := take(uint64(binary.BigEndian.Uint16(nl)))
			pos, ok1 := u64()
			end, ok2 := u64()
			if name == nil || !ok1 || !ok2 || pos > end || end > 1<<62 || !filepath.IsLocal(string(name)) {
				return nil, errBadRef
			}
			f := refFile{name: string(name), pos: int64(pos), end: int64(end)}
			if v2 {
				served, ok := u64()
				flags := take(1)
				if !ok || flags == nil || flags[0] > 1 || served > 1<<62 || flags[0] == 0 && served != end-pos {
					return nil, errBadRef
				}
				if flags[0] == 1 {
					f.served, f.refs = int64(served), true
				}
			}
			files = append(files, f)
		}
		r.parts = append(r.parts, files)
	}
	if len(b) != 0 || r.size != r.expandedSize() {
		return nil, errBadRef
	}
	return r, nil
}

// item is one piece of an expanded stream: bytes, or a file's part (name
// set).
type item struct {
	b []byte
	refFile
}

func (r *snapshotRef) items() []item {
	out := []item{{b: fsm.SnapshotHeader(r.index, r.meta)}}
	for _, files := range r.parts {
		var n int64
		for _, f := range files {
			n += f.size()
		}
		out = append(out, item{b: binary.BigEndian.AppendUint64(nil, uint64(n))})
		for _, f := range files {
			if f.end > f.pos {
				out = append(out, item{refFile: f})
			}
		}
	}
	return out
}

// expander reads a reference-form snapshot as the full stream, opening one
// linked file at a time as the reader gets to it: a restart whose
// checkpoint covers the snapshot reads the header only.
type expander struct {
	dir   string
	items []item
	res   partlog.Resolver
	f     *os.File  // the open file of items[0], if a file
	r     io.Reader // its batches
	left  int64     // bytes of them still to read
	err   error
}

func (e *expander) Read(p []byte) (int, error) {
	for e.err == nil {
		if len(e.items) == 0 {
			return 0, io.EOF
		}
		it := &e.items[0]
		if it.name == "" {
			if len(it.b) == 0 {
				e.items = e.items[1:]
				continue
			}
			n := copy(p, it.b)
			it.b = it.b[n:]
			return n, nil
		}
		if e.f == nil {
			e.err = e.open(it)
			continue
		}
		if e.left == 0 {
			e.f.Close()
			e.f, e.r = nil, nil
			e.items = e.items[1:]
			continue
		}
		if int64(len(p)) > e.left {
			p = p[:e.left]
		}
		n, err := e.r.Read(p)
		e.left -= int64(n)
		if n > 0 {
			return n, nil
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		e.err = fmt.Errorf("snapshot segment %s: %w", it.name, err)
	}
	return 0, e.err
}

// open opens a linked file, which must hold at least the recorded bytes:
// a snapshot is never read short.
func (e *expander) open(it *item) error {
	f, err := os.Open(filepath.Join(e.dir, it.name))
	if err != nil {
		return fmt.Errorf("snapshot segment: %w", err)
	}
	st, err := f.Stat()
	if err == nil && st.Size() < it.end {
		err = fmt.Errorf("snapshot segment %s holds %d bytes, the snapshot covers %d", it.name, st.Size(), it.end)
	}
	if err != nil {
		f.Close()
		return err
	}
	e.f, e.left = f, it.size()
	if it.refs {
		e.r = partlog.NewRecordReader(f, it.pos, it.end, e.res)
	} else {
		e.r = io.NewSectionReader(f, it.pos, it.end-it.pos)
	}
	return nil
}

func (e *expander) Close() error {
	if e.f != nil {
		e.f.Close()
		e.f, e.r = nil, nil
	}
	e.items = nil
	return nil
}

// snapshotLinks are the hard links a snapshot took of its segment files,
// in a staging directory until Persist moves them into the snapshot.
type snapshotLinks struct {
	dir   string // staging directory
	parts [][]refFile
}

// linkFiles hard-links the segment files a snapshot covers into a new
// staging directory. It runs on the FSM goroutine, right after the FSM took
// the snapshot: no entry is applied meanwhile, so no file is gone yet.
func linkFiles(raftDir string, files [][]partlog.RangeFile) (*snapshotLinks, error) {
	base := filepath.Join(raftDir, linkStagingDir)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "links-")
	if err != nil {
		return nil, err
	}
	l := &snapshotLinks{dir: dir}
	seq := 0
	for _, part := range files {
		var refs []refFile
		for _, rf := range part {
			seq++
			name := fmt.Sprintf("%08d.log", seq)
			if err := os.Link(rf.Path, filepath.Join(dir, name)); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			f := refFile{name: segmentsDir + "/" + name, pos: rf.Pos, end: rf.End}
			if rf.Refs {
				f.served, f.refs = rf.Served, true
			}
			refs = append(refs, f)
		}
		l.parts = append(l.parts, refs)
	}
	return l, nil
}

// persist moves the links into the sink's directory and writes the
// reference form. The caller has synced the linked files' data
// (fsm.Snapshot.SyncData).
func (l *snapshotLinks) persist(sinkDir string, index, pin uint64, meta []byte, w io.Writer) (int64, error) {
	dst := filepath.Join(sinkDir, segmentsDir)
	if err := raftlog.SyncDir(l.dir); err != nil {
		return 0, err
	}
	if err := os.Rename(l.dir, dst); err != nil {
		return 0, err
	}
	l.dir = ""
	// The links must be on disk before the snapshot that names them.
	if err := raftlog.SyncDir(sinkDir); err != nil {
		return 0, err
	}
	ref := &snapshotRef{index: index, pin: pin, meta: meta, parts: l.parts}
	ref.size = ref.expandedSize()
	n, err := w.Write(ref.encode())
	return int64(n), err
}

// release removes the staging directory of links not persisted.
func (l *snapshotLinks) release() {
	if l.dir != "" {
		os.RemoveAll(l.dir)
		l.dir = ""
	}
}

// removeStagedLinks removes links a crash left staged (a snapshot that
// never reached Persist's rename), and makes the staging directory.
func removeStagedLinks(raftDir string, log *slog.Logger) error {
	dir := filepath.Join(raftDir, linkStagingDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		path := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("removing staged snapshot links: %w", err)
		}
		log.Warn("removed snapshot links a crash left staged", "dir", path)
	}
	return nil
}
