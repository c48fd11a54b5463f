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
	// A topic named (or identified) twice gets one INVALID_REQUEST and is
	// not deleted, as Kafka answers.
	var repeated []deleteKey
	targets, repeated = splitRepeated(targets, deleteTarget.key)
	var denied []kmsg.DeleteTopicsResponseTopic
	for _, k := range repeated {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.TopicID, rt.ErrorCode, rt.ErrorMessage = k.id, kerr.InvalidRequest.Code, kmsg.StringPtr("Duplicate topic id.")
		if k.named {
			rt.Topic, rt.ErrorMessage = kmsg.StringPtr(k.name), kmsg.StringPtr("Duplicate topic name.")
		}
		denied = append(denied, rt)
	}
	// DELETE on each topic (named by id: DESCRIBE too, or its name is not
	// given away).
	if s.checks(r) {
		allowed := func(t deleteTarget) bool {
			if t.name != nil {
				return s.allowedTopic(r, kmsg.ACLOperationDelete, *t.name)
			}
			name, ok := s.backend.TopicName(t.id)
			return !ok || s.allowedTopic(r, kmsg.ACLOperationDescribe, name) && s.allowedTopic(r, kmsg.ACLOperationDelete, name)
		}
		var refused []deleteTarget
		targets, refused = partitionAllowed(targets, allowed)
		for _, t := range refused {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.name, t.id, kerr.TopicAuthorizationFailed.Code
			denied = append(denied, rt)
		}
	}
	if len(denied) > 0 {
		// A follower forwards the request: only the targets left.
		req.Topics, req.TopicNames = nil, nil
		for _, t := range targets {
			if req.Version >= 6 {
				req.Topics = append(req.Topics, kmsg.DeleteTopicsRequestTopic{Topic: t.name, TopicID: t.id})
			} else {
				req.TopicNames = append(req.TopicNames, *t.name)
			}
		}
	}
	answerDenied := func(resp kmsg.Response) kmsg.Response {
		if dr, ok := resp.(*kmsg.DeleteTopicsResponse); ok {
			dr.Topics = append(dr.Topics, denied...)
		}
		return resp
	}
	if len(targets) == 0 {
		return now(answerDenied(resp))
	}
	return later(func() kmsg.Response {
		return answerDenied(s.viaLeader(ctx, r, func() kmsg.Response {
			return s.deleteTopics(ctx, resp, targets)
		}))
	})
}

type deleteTarget struct {
	name *string
	id   [16]byte
}

// deleteKey is what makes two targets the same topic in one request: the
// name when one is given, else the id.
type deleteKey struct {
	name  string
	named bool
	id    [16]byte
}

func (t deleteTarget) key() deleteKey {
	if t.name != nil {
		return deleteKey{name: *t.name, named: true}
	}
	return deleteKey{id: t.id}
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
