package cluster

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// A leader that steps down because a majority stopped answering it (Raft's
// leader lease: a partition or a black hole around it, or a pause it woke
// from) knows it is cut off: no election it can hear of will end while the
// cut lasts. CutOff says so at once, and the gateway resets such a node's
// clients, which then ask another node (gateway/cutoff.go). Otherwise a
// node counts as cut off only after knowing no leader for CutOffAfter
// (2 s), a wait meant for followers whose leader died, which hear of the
// winner within an election. The deposed leader held its clients that long
// for nothing: in the fault campaign, leader partitions and black holes,
// clients back 3.0 s after the cut, 2 s of it this wait.

// CutOff reports whether this node stopped leading because a majority of
// the voters had not answered it for the leader lease, and has known no
// leader since.
func (n *Node) CutOff() bool {
	if !n.cutOff.Load() {
		return false
	}
	if _, ok := n.leaderID(); ok {
		n.cutOff.Store(false)
		return false
	}
	return true
}

// noteSteppedDown runs when this node stops leading without a successor
// known: it records whether a majority of the voters, itself included, had
// not answered its appends for the leader lease.
func (n *Node) noteSteppedDown() {
	voters := n.Voters()
	answered := 0
	for _, v := range voters {
		if v.ID == n.cfg.NodeID || time.Since(n.trans.answeredAt(raft.ServerID(strconv.Itoa(int(v.ID))))) <= n.leaseTimeout {
			answered++
		}
	}
	if len(voters) == 0 || answered >= majority(len(voters)) {
		return
	}
	n.cutOff.Store(true)
	n.log.Info("stopped leading: a majority had stopped answering; clients are sent to other nodes", "answered", answered, "voters", len(voters))
}
