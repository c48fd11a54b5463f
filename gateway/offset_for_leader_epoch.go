package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetForLeaderEpoch(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	self := s.cluster.Self().ID
	// The leader epoch is the Raft term (Cluster.LeaderEpoch). The log is
	// the same on every voter and never truncated, so every epoch up to
	// the current one ends at the log end.
	leaderEpoch := s.cluster.LeaderEpoch()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		permitted := s.allowedTopic(r, kmsg.ACLOperationDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			leader, ok := s.backend.PartitionLeader(rt.Topic, rp.Partition)
			switch {
			case !permitted:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !ok:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case leader != self:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case rp.CurrentLeaderEpoch > leaderEpoch:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.LeaderEpoch > leaderEpoch || rp.LeaderEpoch == -1:
				// An epoch we never had, or none: undefined, as Kafka
				// answers.
			default:
				_, end, err := s.backend.Offsets(ctx, rt.Topic, rp.Partition)
				sp.ErrorCode = ErrorCode(err)
				sp.LeaderEpoch, sp.EndOffset = leaderEpoch, end
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}
