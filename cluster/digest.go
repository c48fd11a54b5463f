package cluster

import (
	"encoding/binary"
	"hash/crc32"
	"log/slog"

	"github.com/hashicorp/raft"
)

// applyDigest logs, for each window of `every` Raft indexes, a checksum of
// the commands this node applied in it (index, term and bytes). Replicas
// that applied the same log print the same line for every window; the
// first window where two nodes differ bounds where their state machines
// parted, which nothing else in the logs shows (a replica that applied
// other entries answers as if all were well). A diagnostic for fault
// campaigns (--raft-digest-every); off when every is 0.
//
// Only a window this node applied from its start is logged: after a
// restart or an installed snapshot, the window it resumed in is partial.
type applyDigest struct {
	every  uint64
	log    *slog.Logger
	window uint64 // window of the last command; 0: none yet
	whole  bool   // the window was applied from its first index
	sum    uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// add counts one applied command.
func (d *applyDigest) add(l *raft.Log) {
	if d == nil || d.every == 0 {
		return
	}
	w := (l.Index-1)/d.every + 1
	if w != d.window {
		d.flush()
		// Whole if this node applied the previous window up to its end
		// (a command may be missing from the last indexes: no-ops and
		// configuration entries never reach the FSM).
		d.whole = d.window != 0 && w == d.window+1
		d.window, d.sum = w, 0
	}
	var hdr [16]byte
	binary.BigEndian.PutUint64(hdr[:8], l.Index)
	binary.BigEndian.PutUint64(hdr[8:], l.Term)
	d.sum = crc32.Update(d.sum, castagnoli, hdr[:])
	d.sum = crc32.Update(d.sum, castagnoli, l.Data)
}

func (d *applyDigest) flush() {
	if d.window != 0 && d.whole {
		d.log.Info("applied log digest", "first_index", (d.window-1)*d.every+1, "last_index", d.window*d.every,
			"crc32c", d.sum)
	}
}

// restart forgets the window in progress: the state now comes from a
// snapshot.
func (d *applyDigest) restart() {
	if d != nil {
		d.window, d.whole, d.sum = 0, false, 0
	}
}
