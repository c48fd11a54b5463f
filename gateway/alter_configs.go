package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleAlterConfigs answers the legacy AlterConfigs: each TOPIC resource's
// dynamic configs are replaced by exactly the given set, as Kafka does (a
// config left out returns to its default). Broker configs are static.
func (s *Server) handleAlterConfigs(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	n := len(req.Resources)
	for _, res := range req.Resources {
		n += len(res.Configs)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	var denied []kmsg.AlterConfigsResponseResource
	req.Resources, _ = partitionAllowed(req.Resources, func(res kmsg.AlterConfigsRequestResource) bool {
		ok, code := s.configResourceAllowed(r, kmsg.ACLOperationAlterConfigs, res.ResourceType, res.ResourceName)
		if !ok {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			denied = append(denied, rr)
		}
		return ok
	})
	answerDenied := func(resp kmsg.Response) kmsg.Response {
		if ar, ok := resp.(*kmsg.AlterConfigsResponse); ok {
			ar.Resources = append(ar.Resources, denied...)
		}
		return resp
	}
	if len(req.Resources) == 0 {
		return now(answerDenied(resp))
	}
	return later(func() kmsg.Response {
		return answerDenied(s.viaLeader(ctx, r, func() kmsg.Response {
			keys := make([]resourceKey, len(req.Resources))
			for i, res := range req.Resources {
				keys[i] = resourceKey{int8(res.ResourceType), res.ResourceName}
			}
			repeated := repeatedResources(keys)
			for i, res := range req.Resources {
				rr := kmsg.NewAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
				s.alterConfigsResource(ctx, res, repeated[keys[i]], req.ValidateOnly).fill(&rr.ErrorCode, &rr.ErrorMessage)
				resp.Resources = append(resp.Resources, rr)
			}
			return resp
		}))
	})
}

func (s *Server) alterConfigsResource(ctx context.Context, res kmsg.AlterConfigsRequestResource, repeated, validateOnly bool) *alterAnswer {
	names := make([]string, len(res.Configs))
	for i, c := range res.Configs {
		names[i] = c.Name
	}
	if _, ans := s.checkAlterResource(int8(res.ResourceType), res.ResourceName, repeated, names); ans != nil {
		return ans
	}
	configs := make(map[string]string, len(res.Configs))
	for _, c := range res.Configs {
		if c.Value == nil {
			return failAlter(kerr.InvalidConfig, "null value for topic config %q", c.Name)
		}
		configs[c.Name] = *c.Value
	}
	s.alterMu.Lock()
	defer s.alterMu.Unlock()
	return s.alterTopicConfigs(ctx, res.ResourceName, configs, validateOnly)
}
