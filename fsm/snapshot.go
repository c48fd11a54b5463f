package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/kgate/kgate/fsm/partlog"
)

// A snapshot is: magic, applied index, the metadata (everything but record
// bytes), then for each partition in metadata order its batches. The same
// metadata, with a CRC, is the local checkpoint that Open starts from.
var snapshotMagic = []byte("KGATESN1")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeMetaLocked writes the state except record bytes. Callers hold the
// FSM goroutine (Apply is not running) so producer tables are stable.
func (f *FSM) encodeMeta(e *enc) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e.str(f.clusterID)
	e.i64(f.nextProducerID)
	names := make([]string, 0, len(f.topics))
	for n := range f.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	e.uvar(uint64(len(names)))
	for _, n := range names {
		t := f.topics[n]
		e.str(t.Name)
		e.b = append(e.b, t.ID[:]...)
		cfg := make([]Config, 0, len(t.Configs))
		for k, v := range t.Configs {
			cfg = append(cfg, Config{k, v})
		}
		encodeConfigs(e, cfg)
		e.uvar(uint64(len(t.Partitions)))
		for _, p := range t.Partitions {
			start, next := p.Log.Bounds()
			e.i64(start)
			e.i64(next)
			p.encodeProducers(e)
		}
	}
	f.encodeGroupsLocked(e)
	// Last and only once raised, so that a snapshot of a cluster still at
	// the baseline level is what earlier releases write and read; each
	// later section only from the level that introduced it.
	if l := f.FeatureLevel(); l > LevelBaseline {
		e.i16(int16(l))
		if l >= LevelClientQuotas {
			f.encodeQuotasLocked(e)
		}
		if l >= LevelScram {
			f.encodeScramLocked(e)
		}
		if l >= LevelGuardedRemoval {
			f.encodeJoinStampsLocked(e)
		}
		if l >= LevelAcls {
			f.encodeACLsLocked(e)
		}
		if l >= LevelTransactions {
			f.encodeTxnsLocked(e)
		}
		if l >= LevelTxnMarkers {
			f.encodeCoordEpochsLocked(e)
		}
		if l >= LevelExternalTxns {
			f.encodeExtTxnsLocked(e)
		}
	}
}

func (p *Partition) encodeProducers(e *enc) {
	ids := make([]int64, 0, len(p.producers))
	for id := range p.producers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	e.uvar(uint64(len(ids)))
	for _, id := range ids {
		ps := p.producers[id]
		e.i64(id)
		e.i16(ps.epoch)
		e.i64(ps.lastTs)
		e.uvar(uint64(len(ps.recent)))
		for _, r := range ps.recent {
			e.i32(r.firstSeq)
			e.i32(r.lastSeq)
			e.i64(r.firstOffset)
			e.i32(r.lastOffsetDelta)
		}
	}
}

// metaPartition is a decoded partition entry.
type metaPartition struct {
	start, next int64
	producers   map[int64]*producerState
}

type metaTopic struct {
	name    string
	id      [16]byte
	configs []Config
	parts   []metaPartition
}

type meta struct {
	clusterID      string
	nextProducerID int64
	topics         []metaTopic
	groups         map[string]*Group
	level          Level
	quotas         map[string]*clientQuota
	scram          map[string]map[ScramMechanism]ScramCredential
	acls           map[ACL]struct{}
	txns           *txnMeta
	ext            map[TopicPartition]*extPartition
}

func decodeMeta(d *dec) *meta {
	m := &meta{clusterID: d.str(), nextProducerID: d.i64()}
	nt := d.count(20)
	for i := 0; i < nt && d.err == nil; i++ {
		t := metaTopic{name: d.str()}
		copy(t.id[:], d.take(16))
		t.configs = decodeConfigs(d)
		np := d.count(17)
		for j := 0; j < np && d.err == nil; j++ {
			mp := metaPartition{start: d.i64(), next: d.i64(), producers: map[int64]*producerState{}}
			nprod := d.count(19)
			for k := 0; k < nprod && d.err == nil; k++ {
				id := d.i64()
				ps := &producerState{epoch: d.i16(), lastTs: d.i64()}
				nr := d.count(20)
				for r := 0; r < nr && d.err == nil; r++ {
					ps.recent = append(ps.recent, batchRecord{firstSeq: d.i32(), lastSeq: d.i32(), firstOffset: d.i64(), lastOffsetDelta: d.i32()})
				}
				mp.producers[id] = ps
			}
			t.parts = append(t.parts, mp)
		}
		m.topics = append(m.topics, t)
	}
	m.groups = decodeGroups(d)
	if d.err == nil && len(d.b) > 0 {
		m.level = Level(d.i16())
		if m.level >= LevelClientQuotas {
			m.quotas = decodeQuotas(d)
		}
		if m.level >= LevelScram {
			m.scram = decodeScram(d)
		}
		if m.level >= LevelGuardedRemoval {
			decodeJoinStamps(d, m.groups)
		}
		if m.level >= LevelAcls {
			m.acls = decodeACLSet(d)
		}
		if m.level >= LevelTransactions {
			m.txns = decodeTxns(d)
		}
		if m.level >= LevelTxnMarkers {
			decodeCoordEpochs(d, m.topics)
		}
		if m.level >= LevelExternalTxns {
			m.ext = decodeExtTxns(d)
		}
	}
	return m
}

// Snapshot is a point-in-time copy taken on the FSM goroutine and written
// out later, while Apply goes on.
type Snapshot struct {
	Index  uint64
	meta   []byte
	ranges []*partlog.Range
	logs   []*partlog.Log
	// generation is the FSM's at the snapshot: Persist writes no
	// checkpoint once a Restore has replaced the state (writeCheckpoint).
	generation uint64
}

// Snapshot captures the state as of the last applied entry. It must be
// called where Apply is not running concurrently (Raft's FSM goroutine).
func (f *FSM) Snapshot() (*Snapshot, error) {
	if h := f.Halted(); h != nil {
		// Raft would compact the log past the entry we could not apply.
		return nil, h
	}
	f.ckptMu.Lock()
	s := &Snapshot{Index: f.applied.Load(), generation: f.generation}
	f.ckptMu.Unlock()
	e := &enc{}
	f.encodeMeta(e)
	s.meta = e.b
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, t := range f.sortedTopicsLocked() {
		for _, p := range t.Partitions {
			r, err := p.Log.Range()
			if err != nil {
				s.Release()
				return nil, err
			}
			s.ranges = append(s.ranges, r)
			s.logs = append(s.logs, p.Log)
		}
	}
	return s, nil
}

func (f *FSM) sortedTopicsLocked() []*Topic {
	ts := make([]*Topic, 0, len(f.topics))
	for _, t := range f.topics {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts
}

// Persist writes the local checkpoint (after syncing the logs it covers) and
// then the snapshot stream to w.
func (s *Snapshot) Persist(f *FSM, w io.Writer) error {
	if err := s.Checkpoint(f); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := s.Encode(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// Checkpoint syncs the partition logs the snapshot covers and writes the
// local checkpoint: what Persist does before the stream. A snapshot kept as
// references to the segment files (cluster's snapshot store) does only
// this, and the stream is expanded from the files when it is read.
func (s *Snapshot) Checkpoint(f *FSM) error {
	for _, l := range s.logs {
		if err := l.Sync(); err != nil {
			return err
		}
	}
	return f.writeCheckpoint(s.generation, s.Index, s.meta)
}

// SyncData flushes the partition data the snapshot covers to stable
// storage, including segment files deleted since it was taken (which the
// checkpoint's sync of the logs no longer reaches): a snapshot that refers
// to the files rather than copying them relies on it.
func (s *Snapshot) SyncData() error {
	for _, r := range s.ranges {
		if err := r.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// Meta is the snapshot's metadata section, as the stream carries it.
func (s *Snapshot) Meta() []byte { return s.meta }

// FirstRef is the lowest Raft index a reference in the snapshot's
// partitions names (0: none): the Raft log must keep the entries from there
// on while the snapshot may be read.
func (s *Snapshot) FirstRef() uint64 {
	var first uint64
	for _, r := range s.ranges {
		if f := r.FirstRef(); f != 0 && (first == 0 || f < first) {
			first = f
		}
	}
	return first
}

// Files lists, for each partition in stream order, the segment files and
// byte ranges that make up its part of the stream. Valid until the FSM
// applies the next entry (which may delete files): callers on the FSM
// goroutine link them right away.
func (s *Snapshot) Files() [][]partlog.RangeFile {
	out := make([][]partlog.RangeFile, len(s.ranges))
	for i, r := range s.ranges {
		out[i] = r.Files()
	}
	return out
}

// SnapshotHeader is the start of a snapshot stream: magic, index and the
// metadata. Each partition's part follows as an 8-byte big-endian length
// and that many bytes of batches.
func SnapshotHeader(index uint64, meta []byte) []byte {
	b := make([]byte, 0, len(snapshotMagic)+16+len(meta))
	b = append(b, snapshotMagic...)
	b = binary.BigEndian.AppendUint64(b, index)
	b = binary.BigEndian.AppendUint64(b, uint64(len(meta)))
	return append(b, meta...)
}

// Release frees the files the snapshot holds open.
func (s *Snapshot) Release() {
	for _, r := range s.ranges {
		r.Close()
	}
	s.ranges = nil
}

// Encode writes the snapshot stream.
func (s *Snapshot) Encode(w io.Writer) error {
	var hdr [8]byte
	put := func(v uint64) error {
		binary.BigEndian.PutUint64(hdr[:], v)
		_, err := w.Write(hdr[:])
		return err
	}
	if _, err := w.Write(SnapshotHeader(s.Index, s.meta)); err != nil {
		return err
	}
	for _, r := range s.ranges {
		if err := put(uint64(r.Len())); err != nil {
			return err
		}
		if _, err := r.WriteTo(w); err != nil {
			return err
		}
	}
	return nil
}

// ErrSnapshotSuperseded is Persist's error for a snapshot of a state that
// a Restore has replaced since it was taken: it is not written, so that
// Raft neither records it nor compacts up to it (Raft would otherwise
// take the older index for its last snapshot, and the leader would send
// this node the newer one again).
var ErrSnapshotSuperseded = errors.New("fsm: snapshot superseded by a restored snapshot")

// writeCheckpoint writes the checkpoint of the state at index, as of the
// given generation: after a Restore (a newer generation) it writes nothing,
// since the state it describes is gone, and says so.
func (f *FSM) writeCheckpoint(generation, index uint64, meta []byte) error {
	f.ckptMu.Lock()
	defer f.ckptMu.Unlock()
	if generation != f.generation {
		return fmt.Errorf("%w (index %d)", ErrSnapshotSuperseded, index)
	}
	e := &enc{}
	e.b = append(e.b, snapshotMagic...)
	e.u64(index)
	e.bytes(meta)
	e.b = binary.BigEndian.AppendUint32(e.b, crc32.Checksum(e.b, castagnoli))
	tmp := f.checkpointPath() + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = fh.Write(e.b)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, f.checkpointPath())
	}
	if err != nil {
		// A full disk: the old checkpoint stands; the partial new one
		// would only hold space the disk lacks.
		os.Remove(tmp)
		return err
	}
	return partlog.SyncDir(filepath.Dir(f.checkpointPath()))
}

// loadCheckpoint restores the checkpointed state, or leaves the FSM empty
// when there is none. Partition directories the checkpoint does not name
// are stale and removed.
func (f *FSM) loadCheckpoint() error {
	raw, err := os.ReadFile(f.checkpointPath())
	if errors.Is(err, os.ErrNotExist) {
		return f.installMeta(0, &meta{nextProducerID: 1}, nil)
	}
	if err != nil {
		return err
	}
	if len(raw) < len(snapshotMagic)+12 || !bytes.Equal(raw[:len(snapshotMagic)], snapshotMagic) {
		return fmt.Errorf("fsm: checkpoint %s is not a kgate checkpoint", f.checkpointPath())
	}
	body, sum := raw[:len(raw)-4], binary.BigEndian.Uint32(raw[len(raw)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return fmt.Errorf("fsm: checkpoint %s fails its checksum", f.checkpointPath())
	}
	d := &dec{b: body[len(snapshotMagic):]}
	index := d.u64()
	m := decodeMeta(&dec{b: d.bytes()})
	if d.err != nil {
		return fmt.Errorf("fsm: checkpoint: %w", d.err)
	}
	if m.level > LatestLevel {
		return fmt.Errorf("fsm: %s was written at cluster feature level %d; this binary supports up to %d (a downgrade is not possible once the level was raised)",
			f.checkpointPath(), m.level, LatestLevel)
	}
	return f.installMeta(index, m, nil)
}

// installMeta replaces the state with m. With data == nil the partition
// logs are opened from disk and cut to the recorded offsets; otherwise they
// are emptied and refilled from data (a snapshot stream).
func (f *FSM) installMeta(index uint64, m *meta, data io.Reader) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			p.Log.Close()
		}
	}
	f.clusterID, f.nextProducerID, f.topics, f.groups = m.clusterID, m.nextProducerID, map[string]*Topic{}, m.groups
	f.level.Store(uint32(m.level))
	f.quotas = m.quotas
	if f.quotas == nil {
		f.quotas = map[string]*clientQuota{}
	}
	if f.groups == nil {
		f.groups = map[string]*Group{}
	}
	f.scram = m.scram
	if f.scram == nil {
		f.scram = map[string]map[ScramMechanism]ScramCredential{}
	}
	f.acls = m.acls
	if f.acls == nil {
		f.acls = map[ACL]struct{}{}
	}
	f.aclVersion.Add(1)
	f.txns, f.txnByPID = map[string]*txn{}, map[int64]string{}
	if m.txns != nil {
		f.txns = m.txns.txns
	}
	for id, t := range f.txns {
		f.txnByPID[t.producerID] = id
	}
	f.ext = m.ext
	if f.ext == nil {
		f.ext = map[TopicPartition]*extPartition{}
	}
	keep := map[string]bool{}
	for _, mt := range m.topics {
		t := &Topic{Name: mt.name, ID: mt.id, Configs: map[string]string{}}
		for _, kv := range mt.configs {
			t.Configs[kv.Key] = kv.Value
		}
		for i, mp := range mt.parts {
			dir := partitionDir(f.topicsDir(), t.ID, int32(i))
			keep[dir] = true
			start, next := mp.start, mp.next
			if data != nil {
				if err := os.RemoveAll(dir); err != nil {
					return err
				}
				start, next = mp.start, mp.start
			}
			l, err := partlog.Open(dir, start, next, f.segmentBytes(t.Configs))
			if err != nil {
				return err
			}
			l.SetResolver(f.res)
			if data != nil {
				if err := refill(l, data, mp.next); err != nil {
					return fmt.Errorf("fsm: restore %s/%d: %w", t.Name, i, err)
				}
				// The first batch may start before the log start offset.
				if err := l.TrimTo(mp.start); err != nil {
					return err
				}
			}
			p := &Partition{Index: int32(i), Log: l, dir: dir, producers: mp.producers, partTxns: newPartTxns()}
			if m.txns != nil {
				if pt := m.txns.parts[TopicPartition{t.Name, int32(i)}]; pt != nil {
					p.partTxns = *pt
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		f.topics[t.Name] = t
	}
	entries, err := os.ReadDir(f.topicsDir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		dir := f.topicsDir() + "/" + e.Name()
		if !keep[dir] {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	f.applied.Store(index)
	return nil
}

// refill appends one partition's batches from a snapshot stream. The batches
// carry their offsets; the first may start after the recorded log start
// when a trim raced the snapshot, which replay then repeats harmlessly.
func refill(l *partlog.Log, r io.Reader, next int64) error {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	remaining := int64(binary.BigEndian.Uint64(n[:]))
	first := true
	for remaining > 0 {
		var hdr [61]byte
		if remaining < int64(len(hdr)) {
			return errShort
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		size := int64(binary.BigEndian.Uint32(hdr[8:12])) + 12
		if size < int64(len(hdr)) || size > remaining {
			return errShort
		}
		batch := make([]byte, size)
		copy(batch, hdr[:])
		if _, err := io.ReadFull(r, batch[len(hdr):]); err != nil {
			return err
		}
		remaining -= size
		base := int64(binary.BigEndian.Uint64(hdr[0:8]))
		if first {
			if err := l.Reset(base); err != nil {
				return err
			}
			first = false
		}
		lastDelta := int32(binary.BigEndian.Uint32(hdr[23:27]))
		maxTs := int64(binary.BigEndian.Uint64(hdr[35:43]))
		if _, err := l.Append(batch, lastDelta, maxTs); err != nil {
			return err
		}
	}
	if l.Next() != next {
		// Empty partitions (or fully trimmed ones) carry no batch: position them.
		if first {
			return l.Reset(next)
		}
		return fmt.Errorf("snapshot data ends at %d, metadata says %d", l.Next(), next)
	}
	return nil
}

// Restore replaces the state with a snapshot stream. When the local state
// already covers the snapshot (a restart: the checkpoint is at least as new
// and belongs to the same cluster), the local files are kept and the stream
// is not read further.
func (f *FSM) Restore(r io.Reader) error {
	if h := f.Halted(); h != nil {
		return h
	}
	br := bufio.NewReaderSize(r, 1<<20)
	var hdr [24]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	if !bytes.Equal(hdr[:8], snapshotMagic) {
		return fmt.Errorf("fsm: restore: not a kgate snapshot")
	}
	index := binary.BigEndian.Uint64(hdr[8:16])
	metaLen := binary.BigEndian.Uint64(hdr[16:24])
	if metaLen > 1<<30 {
		return fmt.Errorf("fsm: restore: metadata of %d bytes", metaLen)
	}
	raw := make([]byte, metaLen)
	if _, err := io.ReadFull(br, raw); err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	d := &dec{b: raw}
	m := decodeMeta(d)
	if d.err != nil {
		return fmt.Errorf("fsm: restore: %w", d.err)
	}
	if m.level > LatestLevel {
		return fmt.Errorf("fsm: restore: snapshot at cluster feature level %d; this binary supports up to %d", m.level, LatestLevel)
	}
	if f.Applied() >= index && f.ClusterID() == m.clusterID {
		f.log.Info("local state covers snapshot; keeping it", "snapshot_index", index, "applied", f.Applied())
		return nil
	}
	// From here the local state is replaced piece by piece. Should that
	// stop halfway (a full disk, a crash), the old checkpoint would name
	// partition data that is gone: it goes first, so that a restart
	// starts empty and Raft restores its snapshot again. A failure halts
	// the FSM: nothing may be applied over half a state.
	generation, err := f.dropCheckpoint()
	if err != nil {
		return err
	}
	err = f.installMeta(index, m, br)
	if err == nil {
		err = f.syncLogs()
	}
	if err == nil {
		err = f.writeCheckpoint(generation, index, raw)
	}
	if err != nil {
		return f.halt(index, "restore snapshot", fmt.Errorf("fsm: restore: %w", err))
	}
	f.log.Info("state replaced by a snapshot", "snapshot_index", index)
	return nil
}

// dropCheckpoint removes the checkpoint before a Restore replaces the state
// and starts a new generation, so that no snapshot of the old state writes
// its checkpoint from then on. It returns the new generation.
func (f *FSM) dropCheckpoint() (uint64, error) {
	f.ckptMu.Lock()
	defer f.ckptMu.Unlock()
	f.generation++
	if err := os.Remove(f.checkpointPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return f.generation, err
	}
	return f.generation, partlog.SyncDir(filepath.Dir(f.checkpointPath()))
}

func (f *FSM) syncLogs() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			if err := p.Log.Sync(); err != nil {
				return err
			}
		}
	}
	return nil
}
