package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteTopics(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	if len(req.Topics)+len(req.TopicNames) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var targets []deleteTarget
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, deleteTarget{t.Topic, t.TopicID})
		}
	} else {
		for i := range req.TopicNames {
			targets = append(targets, deleteTarget{name: &req.TopicNames[i]})
		}
	}
	return later(func() kmsg.Response {
		return s.viaLeader(ctx, r, func() kmsg.Response {
			return s.deleteTopics(ctx, resp, targets)
		})
	})
}

type deleteTarget struct {
	name *string
	id   [16]byte
}

func (s *Server) deleteTopics(ctx context.Context, resp *kmsg.DeleteTopicsResponse, targets []deleteTarget) kmsg.Response {
	for _, t := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.name, t.id
		name := ""
		switch {
		case t.name != nil:
			name = *t.name
		default:
			n, ok := s.backend.TopicName(t.id)
			if !ok {
				rt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			name = n
			rt.Topic = &n
		}
		if info, ok := s.backend.Topic(name); ok {
			rt.TopicID = info.ID
		}
		rt.ErrorCode = ErrorCode(s.backend.DeleteTopic(ctx, name))
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
