package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/kgate/kgate/cluster/raftlog"
	"github.com/kgate/kgate/fsm/partlog"
)

// LogStore is the node's Raft log and stable store (current term and vote).
type LogStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
	// NoteInstall is told of each snapshot from the leader once written
	// whole, so that the DeleteRange after installing it keeps the entries
	// past it (see raftlog.Store.NoteInstall).
	NoteInstall(index, term uint64)
	// ReadData and SetPin serve partitions' references to entries
	// (partlog.Ref; raftlog.Store with References).
	ReadData(index uint64, pos int64, b []byte) error
	SetPin(first uint64) error
	// RetainedBytes is what is kept past compaction for references.
	RetainedBytes() int64
	Sync() error
}

// logRefs reads the batches that partitions' references name from the
// Raft log.
type logRefs struct{ log LogStore }

func (r logRefs) ReadRef(ref partlog.Ref, b []byte) error {
	return r.log.ReadData(ref.Index, int64(ref.Pos), b)
}

// The Raft log's files under <data-dir>/raft. New data directories get
// append-only segment files (cluster/raftlog) in logDir; data directories
// of releases before it hold a bbolt file, which is migrated into one on
// start (see migrateBoltLog).
const (
	logDir        = "log"
	logDirPartial = "log.migrating" // a migration that has not finished
	boltFile      = "raft.db"
	// walDir is where builds between a2e5ebb and 5e84385 (hashicorp/raft-wal,
	// reverted) kept the log, in a format this release does not read.
	walDir = "wal"
)

// OpenLogStore opens the Raft log of the data directory dataDir, creating it
// if there is none and migrating a bbolt log of an earlier release first.
// Without fsync the log is not synced to disk (--fsync=false).
func OpenLogStore(dataDir string, fsync bool, log *slog.Logger) (LogStore, error) {
	return openLogStore(dataDir, raftlog.Options{Fsync: fsync, Logger: log})
}

func openLogStore(dataDir string, opts raftlog.Options) (LogStore, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	dir := filepath.Join(dataDir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, walDir)); err == nil {
		// Starting on an empty log next to the snapshots would lose
		// every entry after the last snapshot.
		return nil, fmt.Errorf("%s holds a raft-wal log of an unreleased build (reverted), which this release cannot read: start this node on an empty data directory and let it catch up from the others", filepath.Join(dir, walDir))
	}
	if err := migrateBoltLog(dir, log); err != nil {
		return nil, fmt.Errorf("migrate the Raft log from %s: %w", boltFile, err)
	}
	return raftlog.Open(filepath.Join(dir, logDir), opts)
}

// The keys hashicorp/raft keeps in its StableStore: the two terms are
// uint64s, copied as numbers (raft-boltdb encodes them big-endian, as the
// new store happens to), the candidate as bytes.
var (
	stableUint64Keys = []string{"CurrentTerm", "LastVoteTerm"}
	stableBytesKeys  = []string{"LastVoteCand"}
)

// migrateBoltLog moves a bbolt Raft log (raft.db) into a segment-file log.
// It is safe to crash at any point: the copy is built in logDirPartial,
// synced, and renamed to logDir in one step; until that rename raft.db is
// the log (an unfinished copy is discarded and made again), after it the
// segment files are, and raft.db is deleted.
func migrateBoltLog(dir string, log *slog.Logger) error {
	bolt := filepath.Join(dir, boltFile)
	if _, err := os.Stat(bolt); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, logDir)); err == nil {
		// A migration renamed its copy into place and stopped before
		// removing raft.db.
		return removeSynced(bolt)
	}
	partial := filepath.Join(dir, logDirPartial)
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	src, err := raftboltdb.New(raftboltdb.Options{Path: bolt, BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, ReadOnly: true}})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := raftlog.Open(partial, raftlog.Options{Fsync: true, Logger: log})
	if err != nil {
		return err
	}
	copied, skipped, err := copyLog(src, dst)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := raftlog.SyncDir(partial); err != nil {
		return err
	}
	if err := os.Rename(partial, filepath.Join(dir, logDir)); err != nil {
		return err
	}
	if err := raftlog.SyncDir(dir); err != nil {
		return err
	}
	log.Info("migrated the Raft log from raft-boltdb to segment files", "entries", copied, "indexes_left_below_a_gap", skipped)
	src.Close()
	return removeSynced(bolt)
}

// copyLog copies the stable keys and the log entries of src into dst.
// raft-boltdb allows gaps — after installing a snapshot Raft kept older
// entries below one — and the new log does not: only the entries after the
// last gap are copied (those below it are older than a snapshot, and Raft
// never read them). It returns how many entries it copied, and how many
// indexes below the gap it left (not all of them entries).
func copyLog(src *raftboltdb.BoltStore, dst LogStore) (int, uint64, error) {
	for _, k := range stableUint64Keys {
		v, err := src.GetUint64([]byte(k))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return 0, 0, err
		}
		if err := dst.SetUint64([]byte(k), v); err != nil {
			return 0, 0, err
		}
	}
	for _, k := range stableBytesKeys {
		v, err := src.Get([]byte(k))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return 0, 0, err
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return 0, 0, err
		}
	}
	first, err := src.FirstIndex()
	if err != nil {
		return 0, 0, err
	}
	last, err := src.LastIndex()
	if err != nil {
		return 0, 0, err
	}
	if first == 0 {
		return 0, 0, nil
	}
	// The start of the last contiguous run of entries.
	from := last
	for from > first {
		var l raft.Log
		err := src.GetLog(from-1, &l)
		if errors.Is(err, raft.ErrLogNotFound) {
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("entry %d: %w", from-1, err)
		}
		from--
	}
	const batchBytes = 64 << 20
	var batch []*raft.Log
	size := 0
	for i := from; i <= last; i++ {
		l := new(raft.Log)
		if err := src.GetLog(i, l); err != nil {
			return 0, 0, fmt.Errorf("entry %d: %w", i, err)
		}
		batch = append(batch, l)
		size += len(l.Data)
		if size >= batchBytes || i == last {
			if err := dst.StoreLogs(batch); err != nil {
				return 0, 0, err
			}
			batch, size = batch[:0], 0
		}
	}
	return int(last - from + 1), from - first, nil
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
	return raftlog.SyncDir(filepath.Dir(path))
}
