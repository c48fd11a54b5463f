package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RecordDeleter is a Backend that can move a partition's log start offset
// forward (Kafka's DeleteRecords).
type RecordDeleter interface {
	// DeleteRecords makes offset (-1: the high watermark) the partition's
	// log start and returns the resulting start. An offset below the
	// current start changes nothing; one past the high watermark is
	// OFFSET_OUT_OF_RANGE.
	DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (lowWatermark int64, err error)
}

// deleteRecordsUnsupported is the answer of a backend that cannot delete a
// prefix of a partition (Iggy): POLICY_VIOLATION, "records cannot be
// deleted due to broker configuration".
var deleteRecordsUnsupported = kerr.PolicyViolation

// DeleteRecords is a replicated change on the partition's leader (the Raft
// leader for the embedded log); a follower forwards the request.
func (s *Server) handleDeleteRecords(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	var denied []kmsg.DeleteRecordsRequestTopic
	req.Topics, denied = partitionAllowed(req.Topics, func(t kmsg.DeleteRecordsRequestTopic) bool {
		return s.allowedTopic(r, kmsg.ACLOperationDelete, t.Topic)
	})
	answerDenied := func(resp kmsg.Response) kmsg.Response {
		if dr, ok := resp.(*kmsg.DeleteRecordsResponse); ok {
			for _, t := range denied {
				rt := kmsg.NewDeleteRecordsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range uniquePartitions(t.Partitions) {
					rp := kmsg.NewDeleteRecordsResponseTopicPartition()
					rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, kerr.TopicAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				dr.Topics = append(dr.Topics, rt)
			}
		}
		return resp
	}
	del, ok := s.backend.(RecordDeleter)
	if !ok || len(req.Topics) == 0 {
		return now(answerDenied(s.deleteRecords(ctx, req, del)))
	}
	return later(func() kmsg.Response {
		return answerDenied(s.viaLeader(ctx, r, func() kmsg.Response { return s.deleteRecords(ctx, req, del) }))
	})
}

func (s *Server) deleteRecords(ctx context.Context, req *kmsg.DeleteRecordsRequest, del RecordDeleter) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	self := s.cluster.Self().ID
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range uniquePartitions(t.Partitions) {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			leader, known := s.backend.PartitionLeader(t.Topic, p.Partition)
			switch {
			case !known:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case del == nil:
				rp.ErrorCode = deleteRecordsUnsupported.Code
			case leader != self:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				low, err := del.DeleteRecords(ctx, t.Topic, p.Partition, p.Offset)
				rp.LowWatermark, rp.ErrorCode = low, ErrorCode(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// uniquePartitions keeps each partition once, at its first place, with the
// last offset asked for it (Kafka reads the request into a map).
func uniquePartitions(ps []kmsg.DeleteRecordsRequestTopicPartition) []kmsg.DeleteRecordsRequestTopicPartition {
	at := map[int32]int{}
	var out []kmsg.DeleteRecordsRequestTopicPartition
	for _, p := range ps {
		if i, seen := at[p.Partition]; seen {
			out[i].Offset = p.Offset
			continue
		}
		at[p.Partition] = len(out)
		out = append(out, p)
	}
	return out
}
