package gateway

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleIncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT to
// TOPIC resources' dynamic configs. The leader resolves the operations
// against the topic's current configs and stores the resulting full set.
func (s *Server) handleIncrementalAlterConfigs(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	n := len(req.Resources)
	for _, res := range req.Resources {
		n += len(res.Configs)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	var denied []kmsg.IncrementalAlterConfigsResponseResource
	req.Resources, _ = partitionAllowed(req.Resources, func(res kmsg.IncrementalAlterConfigsRequestResource) bool {
		ok, code := s.configResourceAllowed(r, kmsg.ACLOperationAlterConfigs, res.ResourceType, res.ResourceName)
		if !ok {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			denied = append(denied, rr)
		}
		return ok
	})
	answerDenied := func(resp kmsg.Response) kmsg.Response {
		if ar, ok := resp.(*kmsg.IncrementalAlterConfigsResponse); ok {
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
				rr := kmsg.NewIncrementalAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
				s.incrementalAlterResource(ctx, res, repeated[keys[i]], req.ValidateOnly).fill(&rr.ErrorCode, &rr.ErrorMessage)
				resp.Resources = append(resp.Resources, rr)
			}
			return resp
		}))
	})
}

func (s *Server) incrementalAlterResource(ctx context.Context, res kmsg.IncrementalAlterConfigsRequestResource, repeated, validateOnly bool) *alterAnswer {
	names := make([]string, len(res.Configs))
	for i, c := range res.Configs {
		names[i] = c.Name
	}
	if _, ans := s.checkAlterResource(int8(res.ResourceType), res.ResourceName, repeated, names); ans != nil {
		return ans
	}
	// Read, change and write back under one lock, so concurrent changes to
	// the same topic do not lose each other's keys.
	s.alterMu.Lock()
	defer s.alterMu.Unlock()
	info, ok := s.backend.Topic(res.ResourceName)
	if !ok {
		return failAlter(kerr.UnknownTopicOrPartition, "unknown topic %q", res.ResourceName)
	}
	configs := make(map[string]string, len(info.Configs)+len(res.Configs))
	for k, v := range info.Configs {
		configs[k] = v
	}
	for _, c := range res.Configs {
		if ans := applyConfigOp(configs, c); ans != nil {
			return ans
		}
	}
	// Only what the request changed is checked, so the message names its key.
	changed := make(map[string]string, len(res.Configs))
	for _, c := range res.Configs {
		if v, set := configs[c.Name]; set {
			changed[c.Name] = v
		}
	}
	if err := s.checkTopicConfigs(changed); err != nil {
		return failAlter(kerr.InvalidConfig, "%v", err)
	}
	return s.alterTopicConfigs(ctx, res.ResourceName, configs, validateOnly)
}

// applyConfigOp applies one operation to configs, as Kafka does: APPEND and
// SUBTRACT work on LIST configs only, starting from the default when the
// topic does not set the config, and take a comma-separated list of items.
func applyConfigOp(configs map[string]string, c kmsg.IncrementalAlterConfigsRequestResourceConfig) *alterAnswer {
	tc, known := topicConfigs[c.Name]
	switch {
	case !known && c.Op == kmsg.IncrementalAlterConfigOpDelete:
		return nil // nothing to delete, as Kafka answers
	case !known:
		return failAlter(kerr.InvalidConfig, "unknown topic config %q", c.Name)
	}
	op := c.Op
	switch op {
	case kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		if c.Value == nil {
			return failAlter(kerr.InvalidConfig, "null value for %s of topic config %q", op, c.Name)
		}
	case kmsg.IncrementalAlterConfigOpDelete:
	default:
		return failAlter(kerr.InvalidRequest, "unknown operation %d for topic config %q", int8(op), c.Name)
	}
	switch op {
	case kmsg.IncrementalAlterConfigOpSet:
		configs[c.Name] = *c.Value
	case kmsg.IncrementalAlterConfigOpDelete:
		delete(configs, c.Name)
	default:
		if !tc.isList() {
			return failAlter(kerr.InvalidConfig, "cannot %s topic config %q: its type is not LIST", op, c.Name)
		}
		cur, set := configs[c.Name]
		if !set {
			cur = tc.def
		}
		items := splitList(cur)
		for _, it := range splitList(*c.Value) {
			if op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(items, it) {
				items = append(items, it)
			}
			if op == kmsg.IncrementalAlterConfigOpSubtract {
				items = slices.DeleteFunc(items, func(x string) bool { return x == it })
			}
		}
		configs[c.Name] = strings.Join(items, ",")
	}
	return nil
}
