package raftlog

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// What Raft does on a follower that installs a snapshot while its log runs
// past it: one DeleteRange of the whole log. The entries after the
// snapshot stay, and the snapshot's last entry answers for the entry
// before them, across a restart too; a conflicting suffix is then cut and
// replaced as usual.
func TestInstallKeepsTheEntriesPastTheSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	mustStore(t, s, batch(1, 30, 2))
	mustStore(t, s, batch(31, 20, 3)) // the tail the new leader never had

	s.NoteSnapshot(40, 4) // the leader's snapshot: its entry 40 is of term 4
	mustDelete(t, s, 1, 50)
	check := func(s *Store) {
		t.Helper()
		expectBase(t, s, 41, 50, term(3))
		var l raft.Log
		if err := s.GetLog(40, &l); err != nil || l.Index != 40 || l.Term != 4 {
			t.Fatalf("entry 40: %+v, %v; want the snapshot's last entry, term 4", l, err)
		}
		if err := s.GetLog(39, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("entry 39: %v, want ErrLogNotFound", err)
		}
	}
	check(s)
	s.Close()
	s = open(t, dir, 1<<20)
	check(s)

	// The leader's entry 41 conflicts: Raft cuts from there and appends.
	mustDelete(t, s, 41, 50)
	mustStore(t, s, batch(41, 5, 4))
	expectBase(t, s, 41, 45, term(4))
	var l raft.Log
	if err := s.GetLog(40, &l); err != nil || l.Term != 4 {
		t.Fatalf("entry 40 after the cut: %+v, %v", l, err)
	}
	s.Close()
}

// A snapshot that covers the whole log, or no snapshot noted, leaves a
// DeleteRange of everything what it was: an empty log that may start
// anywhere.
func TestDeleteAllWithoutASnapshotInsideTheLog(t *testing.T) {
	for name, note := range map[string]func(*Store){
		"snapshot past the log": func(s *Store) { s.NoteSnapshot(60, 5) },
		"snapshot at its end":   func(s *Store) { s.NoteSnapshot(20, 2) },
		"no snapshot":           func(*Store) {},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 1<<20)
			mustStore(t, s, batch(1, 20, 2))
			note(s)
			mustDelete(t, s, 1, 20)
			if f, _ := s.FirstIndex(); f != 0 {
				t.Fatalf("first index %d after deleting everything", f)
			}
			if l, _ := s.LastIndex(); l != 0 {
				t.Fatalf("last index %d after deleting everything", l)
			}
			mustStore(t, s, batch(61, 3, 5))
			s.Close()
			s = open(t, dir, 1<<20)
			expect(t, s, 61, 63, term(5))
			s.Close()
		})
	}
}

// expectBase is expect for a log that starts right after a kept snapshot
// (whose last entry answers for first-1).
func expectBase(t *testing.T, s *Store, first, last uint64, terms func(uint64) uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("log holds %d..%d, want %d..%d", f, l, first, last)
	}
	for i := first; i <= last; i++ {
		var e raft.Log
		if err := s.GetLog(i, &e); err != nil || e.Index != i || e.Term != terms(i) {
			t.Fatalf("entry %d: %+v, %v", i, e.Index, err)
		}
	}
}
