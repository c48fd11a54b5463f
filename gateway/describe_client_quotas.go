package gateway

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// DescribeClientQuotas filters the replicated quotas as Kafka does: each
// component matches one entity type by exact name, the default (match type
// 1) or any specified name (2); strict leaves out entities with other
// types too. The leader answers (followers forward) so that a describe right
// after an alter through any node sees it.
func (s *Server) handleDescribeClientQuotas(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	if !s.allowedCluster(r, kmsg.ACLOperationDescribeConfigs) {
		resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	return later(func() kmsg.Response {
		return s.viaLeader(ctx, r, func() kmsg.Response { return s.describeClientQuotas(req) })
	})
}

func (s *Server) describeClientQuotas(req *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
		return resp
	}
	byType := map[string]kmsg.DescribeClientQuotasRequestComponent{}
	for _, c := range req.Components {
		if c.EntityType == "ip" { // Kafka's connection-rate quotas: kgate keeps none
			resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
			return resp
		}
		if c.EntityType != fsm.QuotaUser && c.EntityType != fsm.QuotaClientID {
			return fail(fmt.Sprintf("entity type %q is not supported: kgate keeps quotas for users and client ids", c.EntityType))
		}
		if _, dup := byType[c.EntityType]; dup {
			return fail(fmt.Sprintf("entity type %q given twice", c.EntityType))
		}
		if c.MatchType == 0 && c.Match == nil || c.MatchType < 0 || c.MatchType > 2 {
			return fail(fmt.Sprintf("invalid match for entity type %q", c.EntityType))
		}
		byType[c.EntityType] = c
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, q := range s.quotas.ClientQuotas() {
		if !quotaMatches(q.Entity, byType, req.Strict) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type = p.Type
			if !p.Default {
				name := p.Name
				ee.Name = &name
			}
			e.Entity = append(e.Entity, ee)
		}
		keys := make([]string, 0, len(q.Values))
		for k := range q.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp
}

func quotaMatches(ent fsm.QuotaEntity, filter map[string]kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	if strict && len(ent) != len(filter) {
		return false
	}
	for typ, c := range filter {
		var part *fsm.QuotaEntityPart
		for i := range ent {
			if ent[i].Type == typ {
				part = &ent[i]
			}
		}
		if part == nil {
			return false
		}
		switch c.MatchType {
		case 0:
			if part.Default || part.Name != *c.Match {
				return false
			}
		case 1:
			if !part.Default {
				return false
			}
		case 2:
			if part.Default {
				return false
			}
		}
	}
	return true
}
