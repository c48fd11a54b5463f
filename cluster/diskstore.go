package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/raft"
)

// StorageError is a write to this node's Raft log, stable store or
// snapshots that failed (a full disk, an I/O error): the node halts, as a
// Kafka broker does when its last log directory fails.
type StorageError struct {
	Op  string // "store logs", "delete logs", "set CurrentTerm", "write snapshot", …
	Err error
}

func (e *StorageError) Error() string { return fmt.Sprintf("raft storage: %s: %v", e.Op, e.Err) }
func (e *StorageError) Unwrap() error { return e.Err }

// DiskFull reports whether err (a halt's cause) is a full disk.
func DiskFull(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// logStable is what the Raft store (cluster/raftlog) is to Raft: the log
// and the stable store in one.
type logStable interface {
	raft.LogStore
	raft.StableStore
}

// failStopStore passes every call to the Raft store and halts the node on
// the first write that fails. Raft alone would go on: a follower that
// cannot store entries rejects them forever while it still counts as a
// ready voter, a leader steps down and may be elected again, and a failed
// write of the current term panics inside Raft. Halting makes the failure
// visible and clean instead: the node stops serving, kgate serve exits
// non-zero naming the disk, and a restart once the disk has room replays
// from the last checkpoint (cluster/raftlog cuts a batch whose write did
// not finish when it opens, and replaces its term and vote file
// atomically, so the store is as it was before the write).
type failStopStore struct {
	logStable
	// armed: failures halt the node. Until Start has bootstrapped, they are
	// only returned (Start fails with them).
	armed  atomic.Bool
	failed func(*StorageError)
	// untilShutdown blocks until Raft has shut down (see SetUint64).
	untilShutdown func()
}

func (s *failStopStore) fail(op string, err error) error {
	if err != nil && s.armed.Load() {
		s.failed(&StorageError{Op: op, Err: err})
	}
	return err
}

// IsMonotonic passes on the store's: a log that refuses gaps must be told
// apart by Raft, which then clears it whole when it installs a snapshot
// instead of compacting it up to the snapshot (raft.MonotonicLogStore).
func (s *failStopStore) IsMonotonic() bool {
	m, ok := s.logStable.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (s *failStopStore) StoreLog(l *raft.Log) error {
	return s.fail("store logs", s.logStable.StoreLog(l))
}

func (s *failStopStore) StoreLogs(logs []*raft.Log) error {
	return s.fail("store logs", s.logStable.StoreLogs(logs))
}

func (s *failStopStore) DeleteRange(min, max uint64) error {
	return s.fail("delete logs", s.logStable.DeleteRange(min, max))
}

func (s *failStopStore) Set(key, val []byte) error {
	return s.fail("set "+string(key), s.logStable.Set(key, val))
}

// keyCurrentTerm is the stable store key Raft panics on when its write
// fails (hashicorp/raft's setCurrentTerm).
const keyCurrentTerm = "CurrentTerm"

func (s *failStopStore) SetUint64(key []byte, val uint64) error {
	err := s.fail("set "+string(key), s.logStable.SetUint64(key, val))
	if err != nil && s.armed.Load() && string(key) == keyCurrentTerm {
		// Raft panics on this error. The node is halting: hold Raft's
		// goroutine here until Raft has shut down, so it acts on the
		// unsaved term no more, then let it return into the shutdown.
		s.untilShutdown()
		return nil
	}
	return err
}

// failStopSnapshots halts the node when a snapshot cannot be written, for
// the same reasons as failStopStore: a follower whose disk cannot take the
// leader's snapshot would otherwise refuse it forever as a ready voter.
type failStopSnapshots struct {
	raft.SnapshotStore
	failed func(*StorageError)
	// installed is told of every snapshot from the leader written whole
	// (the log store's NoteInstall); not of the node's own (ownSnapshot).
	installed func(index, term uint64)
}

func (s *failStopSnapshots) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration,
	confIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, conf, confIndex, trans)
	if err != nil {
		s.failed(&StorageError{Op: "create snapshot", Err: err})
		return nil, err
	}
	return &failStopSink{SnapshotSink: sink, failed: s.failed, installed: s.installed, index: index, term: term}, nil
}

type failStopSink struct {
	raft.SnapshotSink
	failed      func(*StorageError)
	installed   func(index, term uint64) // may be nil
	own         bool                     // written by this node's FSM (ownSnapshot), not received
	index, term uint64
}

// ownSnapshot marks sink as one the node's own FSM writes: Raft creates
// the sinks of its snapshots and of the leader's alike.
func ownSnapshot(sink raft.SnapshotSink) {
	if s, ok := sink.(*failStopSink); ok {
		s.own = true
	}
}

// Write fails only on the file's own errors: a snapshot streamed from the
// leader that breaks off fails in the reader, not here.
func (s *failStopSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	if err != nil {
		s.failed(&StorageError{Op: "write snapshot", Err: err})
	}
	return n, err
}

func (s *failStopSink) Close() error {
	err := s.SnapshotSink.Close()
	if err != nil {
		s.failed(&StorageError{Op: "write snapshot", Err: err})
	} else if s.installed != nil && !s.own {
		s.installed(s.index, s.term)
	}
	return err
}
