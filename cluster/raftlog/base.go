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

// NoteSnapshot tells the Store that a snapshot up to index (of term) is on
// disk, for the DeleteRange that follows its install. Call it once the
// snapshot is complete. The last one noted counts, not the highest: Raft
// installs what the leader sends, which may be older than a snapshot this
// node took.
func (s *Store) NoteSnapshot(index, term uint64) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.snap = base{index, term}
}

// keepPastSnapshot handles a DeleteRange of the whole log when the last
// noted snapshot ends inside it or just before it: it drops the entries
// up to the snapshot and records the snapshot as the log's base. It reports
// false when the snapshot does not reach into the log (a plain delete).
func (s *Store) keepPastSnapshot(min uint64) (bool, error) {
	snap := s.snap
	if snap.index == 0 || min > snap.index || snap.index >= s.last || snap.index+1 < s.first {
		return false, nil
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
