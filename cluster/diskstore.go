package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/raft"
)

// StorageError is a write to this node's Raft log or stable store that
// failed (a full disk, an I/O error): the node halts, as a Kafka broker
// does when its last log directory fails.
type StorageError struct {
	Op  string // "store logs", "delete logs", "set CurrentTerm", …
	Err error
}

func (e *StorageError) Error() string { return fmt.Sprintf("raft store: %s: %v", e.Op, e.Err) }
func (e *StorageError) Unwrap() error { return e.Err }

// DiskFull reports whether err (a halt's cause) is a full disk.
func DiskFull(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// logStable is what the Raft store (raft-boltdb) is to Raft: the log and
// the stable store in one.
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
// from the last checkpoint (bbolt rolls a failed transaction back, so the
// store is as it was before the write).
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
var keyCurrentTerm = []byte("CurrentTerm")

func (s *failStopStore) SetUint64(key []byte, val uint64) error {
	err := s.fail("set "+string(key), s.logStable.SetUint64(key, val))
	if err != nil && s.armed.Load() && bytes.Equal(key, keyCurrentTerm) {
		// Raft panics on this error. The node is halting: hold Raft's
		// goroutine here until Raft has shut down, so it acts on the
		// unsaved term no more, then let it return into the shutdown.
		s.untilShutdown()
		return nil
	}
	return err
}
