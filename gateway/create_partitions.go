package gateway

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleCreatePartitions(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	if len(req.Topics) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	var repeated []string
	req.Topics, repeated = splitRepeated(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
	var denied []kmsg.CreatePartitionsRequestTopic
	req.Topics, denied = partitionAllowed(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) bool {
		return s.allowedTopic(r, kmsg.ACLOperationAlter, t.Topic)
	})
	answerDenied := func(resp kmsg.Response) kmsg.Response {
		if cr, ok := resp.(*kmsg.CreatePartitionsResponse); ok {
			for _, name := range repeated {
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic, rt.ErrorCode, rt.ErrorMessage = name, kerr.InvalidRequest.Code, kmsg.StringPtr("Duplicate topic name.")
				cr.Topics = append(cr.Topics, rt)
			}
			for _, t := range denied {
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
				cr.Topics = append(cr.Topics, rt)
			}
		}
		return resp
	}
	if len(req.Topics) == 0 {
		return now(answerDenied(resp))
	}
	return later(func() kmsg.Response {
		return answerDenied(s.viaLeader(ctx, r, func() kmsg.Response {
			return s.createPartitions(ctx, req, resp)
		}))
	})
}

func (s *Server) createPartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest, resp *kmsg.CreatePartitionsResponse) kmsg.Response {
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		fail := func(code *kerr.Error, msg string) {
			rt.ErrorCode = code.Code
			rt.ErrorMessage = &msg
		}
		info, ok := s.backend.Topic(t.Topic)
		switch {
		case !ok:
			fail(kerr.UnknownTopicOrPartition, "unknown topic")
		case len(t.Assignment) > 0:
			fail(kerr.InvalidRequest, "manual replica assignment is not supported")
		case t.Count <= info.Partitions:
			fail(kerr.InvalidPartitions, fmt.Sprintf("topic has %d partitions; the new count must be larger", info.Partitions))
		case t.Count > 100000:
			fail(kerr.InvalidPartitions, "at most 100000 partitions")
		case req.ValidateOnly:
		default:
			if err := s.backend.CreatePartitions(ctx, t.Topic, t.Count); err != nil {
				rt.ErrorCode = ErrorCode(err)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
