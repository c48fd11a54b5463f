package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

func (s *Server) handleOffsetCommit(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	groupDenied := !s.allowedGroup(r, kmsg.ACLOperationRead, req.Group)
	// Partitions of unknown topics fail alone; the rest are committed.
	var offsets []fsm.OffsetCommit
	type slot struct{ t, p int }
	var slots []slot
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		info, known := s.backend.Topic(t.Topic)
		topicDenied := !groupDenied && !s.allowedTopic(r, kmsg.ACLOperationRead, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if groupDenied {
				rp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			} else if topicDenied {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if !known || p.Partition < 0 || p.Partition >= info.Partitions {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				oc := fsm.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
				if req.Version >= 6 {
					oc.LeaderEpoch = p.LeaderEpoch
				}
				if p.Metadata != nil {
					oc.Metadata = *p.Metadata
				}
				offsets = append(offsets, oc)
				slots = append(slots, slot{ti, len(rt.Partitions)})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	generation, member := req.Generation, req.MemberID
	if req.Version == 0 {
		generation, member = -1, ""
	}
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	return later(func() kmsg.Response {
		if len(offsets) == 0 {
			return resp
		}
		codes, code := s.groups.CommitOffsets(ctx, req.Group, member, instance, generation, offsets)
		if code == kerr.GroupIDNotFound.Code && req.Version < 9 {
			code = kerr.IllegalGeneration.Code // as Kafka before v9
		}
		for i, sl := range slots {
			p := &resp.Topics[sl.t].Partitions[sl.p]
			switch {
			case code != 0:
				p.ErrorCode = code
			case i < len(codes):
				p.ErrorCode = codes[i]
			}
		}
		return resp
	})
}
