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

	s.NoteInstall(40, 4) // the leader's snapshot: its entry 40 is of term 4
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

// The same snapshot installed a second time (the leader sends it again when
// the answer to the first install was lost: a cut, a frozen leader) finds
// the log starting right after it. The entries stay, as after the first
// install: emptying the log there left Raft counting on a tail that was
// gone, refusing every append, as in hashicorp/raft#697.
func TestSnapshotInstalledTwiceKeepsTheEntriesPastIt(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	mustStore(t, s, batch(1, 30, 2))
	mustStore(t, s, batch(31, 20, 3))

	s.NoteInstall(40, 4)
	mustDelete(t, s, 1, 50)
	expectBase(t, s, 41, 50, term(3))

	s.NoteInstall(40, 4) // again
	mustDelete(t, s, 41, 50)
	expectBase(t, s, 41, 50, term(3))
	var l raft.Log
	if err := s.GetLog(40, &l); err != nil || l.Index != 40 || l.Term != 4 {
		t.Fatalf("entry 40: %+v, %v; want the snapshot's last entry, term 4", l, err)
	}
	s.Close()
	s = open(t, dir, 1<<20)
	expectBase(t, s, 41, 50, term(3))
	s.Close()
}

// The same DeleteRange without an install just before it is Raft cutting a
// suffix that conflicts from the log's first entry on (the leader's entry
// 41 is not ours): all of it goes, and the leader's entries follow the base.
func TestConflictFromTheFirstEntryAfterAnInstallDeletesIt(t *testing.T) {
	s := open(t, t.TempDir(), 1<<20)
	mustStore(t, s, batch(1, 30, 2))
	mustStore(t, s, batch(31, 20, 3))
	s.NoteInstall(40, 4)
	mustDelete(t, s, 1, 50)
	expectBase(t, s, 41, 50, term(3))

	mustDelete(t, s, 41, 50) // no install noted since
	if l, _ := s.LastIndex(); l != 0 {
		t.Fatalf("last index %d after the conflicting suffix was cut", l)
	}
	mustStore(t, s, batch(41, 5, 4))
	expectBase(t, s, 41, 45, term(4))
	var l raft.Log
	if err := s.GetLog(40, &l); err != nil || l.Term != 4 {
		t.Fatalf("entry 40: %+v, %v", l, err)
	}
	s.Close()
}

// A compaction of the head by the node's own snapshot may run between an
// install and Raft's clean-up after it: the note survives it. An append
// ends it.
func TestInstallNoteOutlivesACompactionOnly(t *testing.T) {
	s := open(t, t.TempDir(), 1<<20)
	mustStore(t, s, batch(1, 50, 2))
	s.NoteInstall(40, 2)
	mustDelete(t, s, 1, 10) // the node's own snapshot's compaction
	mustDelete(t, s, 11, 50)
	expectBase(t, s, 41, 50, term(2))

	s.NoteInstall(45, 2)
	mustStore(t, s, batch(51, 1, 2))
	mustDelete(t, s, 41, 51) // not the clean-up of that install any more
	if l, _ := s.LastIndex(); l != 0 {
		t.Fatalf("last index %d: the append should have ended the install's note", l)
	}
	s.Close()
}

// A snapshot that ends before the log starts (this node compacted further
// than what the leader sent) leaves the log as it was: emptied, Raft would
// go on counting on its entries.
func TestInstallOfAnOlderSnapshotKeepsTheLog(t *testing.T) {
	s := open(t, t.TempDir(), 1<<20)
	mustStore(t, s, batch(1, 50, 2))
	mustDelete(t, s, 1, 30) // own compaction: the log holds 31..50
	s.NoteInstall(20, 2)
	mustDelete(t, s, 31, 50)
	expect(t, s, 31, 50, term(2))
	s.Close()
}

// A snapshot that covers the whole log, or no snapshot noted, leaves a
// DeleteRange of everything what it was: an empty log that may start
// anywhere.
func TestDeleteAllWithoutASnapshotInsideTheLog(t *testing.T) {
	for name, note := range map[string]func(*Store){
		"snapshot past the log": func(s *Store) { s.NoteInstall(60, 5) },
		"snapshot at its end":   func(s *Store) { s.NoteInstall(20, 2) },
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
