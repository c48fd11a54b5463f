package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders: Raft elects kgate's leaders, and the node it elected already
// leads every partition it serves (the Raft leader for the embedded log;
// for Iggy the node Metadata names). A partition with a leader therefore
// answers ELECTION_NOT_NEEDED, which Kafka's tools report as "valid replica
// already elected"; one without (an election in progress) answers
// ELIGIBLE_LEADERS_NOT_AVAILABLE, retriable. As in Kafka, a request for all
// partitions (null topics) lists only the partitions that needed an
// election (each topic is still listed, with no partitions).
func (s *Server) handleElectLeaders(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if !s.allowedCluster(r, kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return now(resp)
	}
	all := req.Topics == nil
	topics := req.Topics
	if all {
		for _, t := range s.allTopics(ctx) {
			et := kmsg.NewElectLeadersRequestTopic()
			et.Topic = t.Name
			for p := int32(0); p < t.Partitions; p++ {
				et.Partitions = append(et.Partitions, p)
			}
			topics = append(topics, et)
		}
	}
	n := 0
	for _, t := range topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	for _, t := range topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			leader, known := s.backend.PartitionLeader(t.Topic, p)
			var msg string
			switch {
			case !known:
				rp.ErrorCode, msg = kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Description
			case leader < 0:
				rp.ErrorCode, msg = kerr.EligibleLeadersNotAvailable.Code, "no leader while kgate's Raft election runs; retry"
			default:
				rp.ErrorCode, msg = kerr.ElectionNotNeeded.Code, "leadership is already where Raft placed it"
			}
			if all && rp.ErrorCode == kerr.ElectionNotNeeded.Code {
				continue
			}
			rp.ErrorMessage = &msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if resp.Topics == nil {
		resp.Topics = []kmsg.ElectLeadersResponseTopic{}
	}
	for i := range resp.Topics {
		if resp.Topics[i].Partitions == nil {
			resp.Topics[i].Partitions = []kmsg.ElectLeadersResponseTopicPartition{}
		}
	}
	return now(resp)
}
