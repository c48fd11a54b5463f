package cluster

import "time"

// RaftState is this node's own view of the Raft log, what Kafka's
// DescribeQuorum reports per voter.
type RaftState struct {
	Term        uint64
	LastIndex   uint64 // log end: the last entry this node holds
	CommitIndex uint64 // the commit index this node knows of
	// LastContact is when this node last heard from the leader (a heartbeat
	// or append, Raft's equivalent of a Kafka follower's fetch); zero on
	// the leader and on a node that never heard from one.
	LastContact time.Time
	Leader      bool // Raft considers this node the leader
}

// RaftState reports this node's Raft log position and term.
func (n *Node) RaftState() RaftState {
	st := RaftState{
		Term:        n.raft.CurrentTerm(),
		LastIndex:   n.raft.LastIndex(),
		CommitIndex: n.raft.CommitIndex(),
		Leader:      n.RaftLeader(),
	}
	if !st.Leader {
		st.LastContact = n.raft.LastContact()
	}
	return st
}
