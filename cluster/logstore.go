package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"
)

// LogStore is the node's Raft log and stable store (current term and vote).
type LogStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// The Raft log's files under <data-dir>/raft. New data directories get a
// write-ahead log of append-only segment files (hashicorp/raft-wal); data
// directories of releases before it hold a bbolt file, which is migrated
// into one on start (see migrateBoltLog).
const (
	walDir        = "wal"
	walDirPartial = "wal.migrating" // a migration that has not finished
	boltFile      = "raft.db"
)

// OpenLogStore opens the Raft log of the data directory dataDir, creating it
// if there is none and migrating a bbolt log of an earlier release first.
// Without fsync the log is not synced to disk (--fsync=false).
func OpenLogStore(dataDir string, fsync bool, log *slog.Logger) (LogStore, error) {
	dir := filepath.Join(dataDir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := migrateBoltLog(dir, log); err != nil {
		return nil, fmt.Errorf("migrate the Raft log from %s: %w", boltFile, err)
	}
	return openWAL(filepath.Join(dir, walDir), fsync)
}

// openWAL opens (or creates) a segment-file log in dir. raft-wal writes each
// StoreLogs call — a batch of Raft entries — with one write and one fsync,
// and cuts a torn tail by the batch's checksum when it opens the file.
func openWAL(dir string, fsync bool) (*walStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	var vfs types.VFS = walfs.New()
	if !fsync {
		vfs = noSyncFS{vfs}
	}
	// raft-wal's Close leaves its metadata file open (and locked): we own
	// it so that Close releases it, as a node restarted in the same
	// process needs.
	meta := &metadb.BoltMetaDB{}
	// Segments of 64 MiB (raft-wal's default) hold tens of record batches
	// of megabytes each, so rotations stay rare.
	w, err := wal.Open(dir, wal.WithSegmentFiler(segment.NewFiler(dir, vfs)), wal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		lock.Close()
		return nil, err
	}
	return &walStore{WAL: w, meta: meta, lock: lock}, nil
}

type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
	lock *os.File
}

// GetLog reports an entry below FirstIndex as not found, as the LogStore
// contract says: raft-wal still returns one its head truncation left in
// the current segment, and Raft would then replay the log to a follower
// far behind instead of sending it the snapshot.
func (s *walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := s.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return s.WAL.GetLog(index, l)
}

func (s *walStore) Close() error {
	err := s.WAL.Close()
	if merr := s.meta.Close(); err == nil {
		err = merr
	}
	s.lock.Close()
	return err
}

// lockDir takes the lock file of a log directory, so that a second process
// on the same data directory fails to start instead of corrupting the log
// (or waiting forever for raft-wal's metadata file).
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
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

// noSyncFS leaves syncing to the kernel: the files of --fsync=false.
type noSyncFS struct{ types.VFS }

func (f noSyncFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	w, err := f.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return noSyncFile{w}, nil
}

func (f noSyncFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	w, err := f.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{w}, nil
}

type noSyncFile struct{ types.WritableFile }

func (noSyncFile) Sync() error { return nil }

// The keys hashicorp/raft keeps in its StableStore: the two terms are
// uint64s, which raft-boltdb encodes big-endian and raft-wal little-endian,
// so they are copied as numbers.
var (
	stableUint64Keys = []string{"CurrentTerm", "LastVoteTerm"}
	stableBytesKeys  = []string{"LastVoteCand"}
)

// migrateBoltLog moves a bbolt Raft log (raft.db) into a segment-file log.
// It is safe to crash at any point: the copy is built in walDirPartial,
// synced, and renamed to walDir in one step; until that rename raft.db is
// the log (an unfinished copy is discarded and made again), after it the
// segment files are, and raft.db is deleted.
func migrateBoltLog(dir string, log *slog.Logger) error {
	bolt := filepath.Join(dir, boltFile)
	if _, err := os.Stat(bolt); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, walDir)); err == nil {
		// A migration renamed its copy into place and stopped before
		// removing raft.db.
		return removeSynced(bolt)
	}
	partial := filepath.Join(dir, walDirPartial)
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	src, err := raftboltdb.New(raftboltdb.Options{Path: bolt, BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, ReadOnly: true}})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openWAL(partial, true)
	if err != nil {
		return err
	}
	copied, err := copyLog(src, dst)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(partial, filepath.Join(dir, walDir)); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	log.Info("migrated the Raft log from raft-boltdb to segment files", "entries", copied)
	src.Close()
	return removeSynced(bolt)
}

// copyLog copies the stable keys and every log entry of src into dst.
func copyLog(src *raftboltdb.BoltStore, dst LogStore) (int, error) {
	for _, k := range stableUint64Keys {
		v, err := src.GetUint64([]byte(k))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return 0, err
		}
		if err := dst.SetUint64([]byte(k), v); err != nil {
			return 0, err
		}
	}
	for _, k := range stableBytesKeys {
		v, err := src.Get([]byte(k))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return 0, err
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return 0, err
		}
	}
	first, err := src.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := src.LastIndex()
	if err != nil {
		return 0, err
	}
	if first == 0 {
		return 0, nil
	}
	const batchBytes = 64 << 20
	var batch []*raft.Log
	size := 0
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := src.GetLog(i, l); err != nil {
			return 0, fmt.Errorf("entry %d: %w", i, err)
		}
		batch = append(batch, l)
		size += len(l.Data)
		if size >= batchBytes || i == last {
			if err := dst.StoreLogs(batch); err != nil {
				return 0, err
			}
			batch, size = batch[:0], 0
		}
	}
	return int(last - first + 1), nil
}

// isNotFound: raft-boltdb's error for a key it does not have (which
// hashicorp/raft recognises by its text too).
func isNotFound(err error) bool {
	return errors.Is(err, raftboltdb.ErrKeyNotFound) || err.Error() == "not found"
}

func removeSynced(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
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
