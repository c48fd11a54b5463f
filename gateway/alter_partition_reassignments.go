package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reassignRefused explains why AlterPartitionReassignments cannot apply.
const reassignRefused = "kgate places every partition's replicas on the Raft voters; " +
	"they move only when the cluster's membership changes, not per partition"

// Replica placement follows Raft membership, so a requested reassignment
// gets INVALID_REPLICA_ASSIGNMENT with the reason (unless it asks for the
// replicas the partition already has: done, as Kafka answers), and a
// cancellation NO_REASSIGNMENT_IN_PROGRESS (there never is one).
func (s *Server) handleAlterPartitionReassignments(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	if !s.allowedCluster(r, kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	replicas, _ := s.cluster.Replicas()
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		info, known := s.backend.Topic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			var msg string
			switch {
			case !known || p.Partition < 0 || p.Partition >= info.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg = kerr.UnknownTopicOrPartition.Description
			case p.Replicas == nil:
				rp.ErrorCode = kerr.NoReassignmentInProgress.Code
				msg = "no reassignment is in progress: " + reassignRefused
			case sameIDs(p.Replicas, replicas):
			default:
				rp.ErrorCode = kerr.InvalidReplicaAssignment.Code
				msg = reassignRefused
			}
			if msg != "" {
				rp.ErrorMessage = &msg
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp)
}

// sameIDs reports whether a and b hold the same node ids in any order.
func sameIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[int32]int{}
	for _, id := range a {
		in[id]++
	}
	for _, id := range b {
		if in[id] == 0 {
			return false
		}
		in[id]--
	}
	return true
}
