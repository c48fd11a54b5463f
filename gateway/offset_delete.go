package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/coordinator"
	"github.com/kgate/kgate/fsm"
)

func (s *Server) handleOffsetDelete(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	var parts []fsm.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	if len(parts) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	if !s.allowedGroup(r, kmsg.ACLOperationDelete, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp)
	}
	// Partitions of topics the client may not read are not deleted.
	var allowed []fsm.TopicPartition
	denied := map[string]bool{}
	for _, p := range parts {
		d, seen := denied[p.Topic]
		if !seen {
			d = !s.allowedTopic(r, kmsg.ACLOperationRead, p.Topic)
			denied[p.Topic] = d
		}
		if !d {
			allowed = append(allowed, p)
		}
	}
	return later(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		codes, code := s.groups.DeleteOffsets(ctx, req.Group, allowed, coordinator.SubscribedTopics)
		resp.ErrorCode = code
		if code != 0 {
			return resp
		}
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				if denied[t.Topic] {
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				} else {
					rp.ErrorCode = codes[i]
					i++
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
