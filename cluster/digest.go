package cluster

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
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
//
// A second checksum covers what the state machine answered to each
// command (outcome): the offsets and codes of appends, the codes of other
// commands. Replicas that applied the same commands and answered them
// differently have state machines that parted without their logs parting
// (an apply that depends on more than the replicated state); the first
// window where the outcomes differ says where. It is left out of a window
// in which the state machine skipped an entry it already held (a replay
// after a restart from its own checkpoint).
type applyDigest struct {
	every  uint64
	log    *slog.Logger
	window uint64 // window of the last command; 0: none yet
	whole  bool   // the window was applied from its first index
	sum    uint32
	// outcomes sums the answers; outcomesKnown is false once an entry of
	// the window was skipped.
	outcomes      uint32
	outcomesKnown bool
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
		d.outcomes, d.outcomesKnown = 0, true
	}
	var hdr [16]byte
	binary.BigEndian.PutUint64(hdr[:8], l.Index)
	binary.BigEndian.PutUint64(hdr[8:], l.Term)
	d.sum = crc32.Update(d.sum, castagnoli, hdr[:])
	d.sum = crc32.Update(d.sum, castagnoli, l.Data)
}

// outcome counts what the state machine answered to the command last
// added; skipped is true when it had applied that entry before. A window
// with a skipped entry or a halt logs no outcomes.
func (d *applyDigest) outcome(res any, skipped bool) {
	if d == nil || d.every == 0 {
		return
	}
	if _, halted := res.(*fsm.HaltError); skipped || halted {
		// A halted replica answers every entry so until it stops: its
		// own disk, not the replicated state.
		d.outcomesKnown = false
		return
	}
	d.outcomes = crc32.Update(d.outcomes, castagnoli, outcomeBytes(res))
}

// outcomeBytes is what a replica must answer alike to a command: the
// offsets an append gave its batches and their codes, another command's
// code, the kind of anything else. (An append's log start offset is left
// out: a loss or a duplicate shows in the offsets.)
func outcomeBytes(res any) []byte {
	switch r := res.(type) {
	case nil:
		return []byte("nil")
	case *fsm.AppendResults:
		b := make([]byte, 0, 1+10*len(r.Results))
		b = append(b, 'A')
		for _, x := range r.Results {
			b = binary.BigEndian.AppendUint16(b, uint16(x.Code))
			b = binary.BigEndian.AppendUint64(b, uint64(x.BaseOffset))
		}
		return b
	case *fsm.CodeResult:
		return binary.BigEndian.AppendUint16([]byte{'C'}, uint16(r.Code))
	default:
		return []byte(fmt.Sprintf("%T", res))
	}
}

func (d *applyDigest) flush() {
	if d.window == 0 || !d.whole {
		return
	}
	attrs := []any{"first_index", (d.window-1)*d.every + 1, "last_index", d.window * d.every, "crc32c", d.sum}
	if d.outcomesKnown {
		attrs = append(attrs, "outcomes_crc32c", d.outcomes)
	}
	d.log.Info("applied log digest", attrs...)
}

// restart forgets the window in progress: the state now comes from a
// snapshot.
func (d *applyDigest) restart() {
	if d != nil {
		d.window, d.whole, d.sum = 0, false, 0
		d.outcomes, d.outcomesKnown = 0, false
	}
}
