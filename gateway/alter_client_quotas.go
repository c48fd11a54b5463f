package gateway

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// QuotaStore keeps the replicated client quotas (the embedded backend's
// FSM, in either backend mode).
type QuotaStore interface {
	ClientQuotas() []fsm.ClientQuota
	// QuotaFor is fsm.FSM.QuotaFor.
	QuotaFor(user, clientID, key string) (value float64, perUser, perClient string, ok bool)
	// AlterClientQuotas applies alterations on the leader: one code each.
	AlterClientQuotas(ctx context.Context, alts []fsm.QuotaAlteration) ([]int16, error)
}

// AlterClientQuotas (kafka-configs --alter --entity-type users|clients) is a
// replicated change: validated here, applied by the Raft leader; a follower
// forwards the request.
func (s *Server) handleAlterClientQuotas(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.AlterClientQuotasRequest)
	if len(req.Entries) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	if !s.allowedCluster(r, kmsg.ACLOperationAlterConfigs) {
		resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		for _, e := range req.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			for _, c := range e.Entity {
				re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: c.Type, Name: c.Name})
			}
			re.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.Entries = append(resp.Entries, re)
		}
		return now(resp)
	}
	return later(func() kmsg.Response {
		return s.viaLeader(ctx, r, func() kmsg.Response { return s.alterClientQuotas(ctx, req) })
	})
}

func (s *Server) alterClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	codes := make([]int16, len(req.Entries))
	msgs := make([]string, len(req.Entries))
	var alts []fsm.QuotaAlteration
	var at []int // request entry of each alteration
	for i, e := range req.Entries {
		alt, msg := quotaAlteration(e)
		if msg != "" {
			codes[i], msgs[i] = kerr.InvalidRequest.Code, msg
			continue
		}
		alts = append(alts, alt)
		at = append(at, i)
	}
	if len(alts) > 0 && !req.ValidateOnly {
		got, err := s.quotas.AlterClientQuotas(ctx, alts)
		for j, i := range at {
			switch {
			case err != nil:
				codes[i], msgs[i] = ErrorCode(err), err.Error()
			case j < len(got) && got[j] != 0:
				codes[i] = got[j]
				msgs[i] = kerr.TypedErrorForCode(got[j]).Description
			}
		}
	}
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode = codes[i]
		if msgs[i] != "" {
			msg := msgs[i]
			re.ErrorMessage = &msg
		}
		for _, c := range e.Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = c.Type, c.Name
			re.Entity = append(re.Entity, ee)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}

// quotaAlteration checks one entry as Kafka does; msg says what is wrong.
func quotaAlteration(e kmsg.AlterClientQuotasRequestEntry) (alt fsm.QuotaAlteration, msg string) {
	ent, msg := quotaEntity(e.Entity)
	if msg != "" {
		return alt, msg
	}
	alt.Entity = ent
	seen := map[string]bool{}
	for _, op := range e.Ops {
		switch {
		case !fsm.QuotaKeys[op.Key]:
			return alt, fmt.Sprintf("unknown quota %q for users and client ids", op.Key)
		case seen[op.Key]:
			return alt, fmt.Sprintf("quota %q altered twice", op.Key)
		case !op.Remove && (op.Value <= 0 || math.IsInf(op.Value, 0) || math.IsNaN(op.Value)):
			return alt, fmt.Sprintf("quota %q must be a positive number, not %v", op.Key, op.Value)
		}
		seen[op.Key] = true
		alt.Ops = append(alt.Ops, fsm.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
	}
	return alt, ""
}

// quotaEntity turns request components into an entity, user part first.
func quotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (fsm.QuotaEntity, string) {
	var user, client *fsm.QuotaEntityPart
	for _, c := range parts {
		p := &fsm.QuotaEntityPart{Type: c.Type, Default: c.Name == nil}
		if c.Name != nil {
			p.Name = *c.Name
		}
		switch {
		case c.Type == fsm.QuotaUser && user == nil:
			user = p
		case c.Type == fsm.QuotaClientID && client == nil:
			client = p
		case c.Type == fsm.QuotaUser || c.Type == fsm.QuotaClientID:
			return nil, fmt.Sprintf("entity type %q given twice", c.Type)
		default:
			return nil, fmt.Sprintf("entity type %q is not supported: kgate keeps quotas for users and client ids", c.Type)
		}
	}
	var ent fsm.QuotaEntity
	if user != nil {
		ent = append(ent, *user)
	}
	if client != nil {
		ent = append(ent, *client)
	}
	if len(ent) == 0 {
		return nil, "empty quota entity"
	}
	return ent, ""
}
