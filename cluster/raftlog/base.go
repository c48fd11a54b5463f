package raftlog

import "github.com/hashicorp/raft"

// After a follower installs a snapshot, hashicorp/raft empties a log that
// says it has no gaps (IsMonotonic) with one DeleteRange of all of it, but
// keeps its own record of the last entry. When the log ran past the
// snapshot (a deposed leader's uncommitted tail), Raft went on believing in
// entries that were gone: it answered the new leader's appends as if it
// had them, never matched, and the node never caught up; in elections it
// claimed a log it no longer held (hashicorp/raft#697).
//
// So the Store takes that one DeleteRange as Raft's paper has it: entries
// up to the snapshot go, the ones after it stay (they are exactly what Raft
// still counts on), and the snapshot's last entry is remembered as the base
// of the log, its index and term, so that the next append from the leader,
// whose previous entry is the snapshot's last, finds it. Entries after the
// snapshot that conflict with the leader's are then cut by Raft as any
// conflicting suffix is. The base is never sent as an entry: a leader
// sends entries only after one it holds, and the base is the first it
// holds.

// base is the index and term of the last entry of a snapshot that the log
// starts right after; index 0: none.
type base struct{ index, term uint64 }

const baseFile = "base"

// NoteInstall tells the Store that a snapshot up to index (of term), sent
// by the leader, is on disk and about to be restored: the DeleteRange of
// the whole log that Raft makes next is its clean-up after the install.
// Call it once the snapshot is complete, for installs only. The note lasts
// until the next append or deletion other than a compaction of the head
// (which the node's own snapshots run beside an install): a DeleteRange of
// the whole log without it is Raft cutting a suffix that conflicts from
// the first entry on, which, when the log starts right after an installed
// snapshot, looks the same as the clean-up and must delete it all.
func (s *Store) NoteInstall(index, term uint64) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.install = base{index, term}
}

// keepPastSnapshot handles the DeleteRange of the whole log that follows
// the install of snap (see NoteInstall). When the snapshot ends inside the
// log or right before it (the same snapshot installed again: its first
// install left the log starting right after it), the entries up to the
// snapshot go and the snapshot is recorded as the log's base. It reports
// false when the snapshot covers the whole log (a plain delete).
func (s *Store) keepPastSnapshot(snap base) (bool, error) {
	if snap.index >= s.last {
		return false, nil
	}
	if snap.index+1 < s.first {
		// A gap between the snapshot and the log: this node had
		// compacted past what the leader sent. Emptying the log would
		// leave Raft counting on entries it no longer has (and naming
		// them in elections); kept, its appends fail on the gap until a
		// later snapshot reaches the log, as they would anyway.
		s.log.Warn("raft log: an installed snapshot ends before the log starts; keeping the log", "snapshot_index", snap.index,
			"first", s.first, "last", s.last)
		return true, nil
	}
	if err := s.writeBase(snap); err != nil {
		return true, err
	}
	if snap.index >= s.first {
		if err := s.deleteHead(snap.index); err != nil {
			return true, err
		}
	}
	s.log.Info("raft log: kept the entries after an installed snapshot", "snapshot_index", snap.index,
		"first", s.first, "last", s.last)
	return true, nil
}

// baseEntry fills l with the base when index is it and the log starts
// right after it.
func (s *Store) baseEntry(index uint64, l *raft.Log) bool {
	if s.base.index == 0 || index != s.base.index || s.last == 0 || s.first != index+1 {
		return false
	}
	*l = raft.Log{Index: s.base.index, Term: s.base.term, Type: raft.LogNoop}
	return true
}

// The base file: index and term (see writePair).
func (s *Store) writeBase(b base) error {
	if err := writePair(s.dir, baseFile, b.index, b.term, s.opts.Fsync); err != nil {
		return err
	}
	s.base = b
	return nil
}

func readBase(path string) (base, error) {
	index, term, err := readPair(path)
	return base{index: index, term: term}, err
}
