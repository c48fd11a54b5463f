package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway/authz"
)

// handleDeleteAcls removes the bindings each filter selects and names
// them. It needs ALTER on the cluster (checked where the client
// connected); followers forward it to the leader, which resolves the
// filters against its state (one change at a time) and proposes the exact
// bindings to remove.
func (s *Server) handleDeleteAcls(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DeleteACLsRequest)
	if len(req.Filters) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	failAll := func(e *kerr.Error, msg string) Reply {
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = e.Code, kmsg.StringPtr(msg)
			resp.Results = append(resp.Results, res)
		}
		return now(resp)
	}
	if e, msg := s.aclChangeRefused(r); e != nil {
		return failAll(e, msg)
	}
	return later(func() kmsg.Response {
		return s.viaLeader(ctx, r, func() kmsg.Response { return s.deleteACLs(ctx, req) })
	})
}

func (s *Server) deleteACLs(ctx context.Context, req *kmsg.DeleteACLsRequest) kmsg.Response {
	// Resolving filters and proposing must not interleave with another
	// deletion, or both could report the same binding as theirs.
	s.aclMu.Lock()
	defer s.aclMu.Unlock()
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	_, acls := s.cfg.ACLs.ACLs()
	var remove []fsm.ACL
	seen := map[fsm.ACL]bool{}
	for i, rf := range req.Filters {
		res := &resp.Results[i]
		*res = kmsg.NewDeleteACLsResponseResult()
		f := authz.Filter{ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType}
		if req.Version == 0 {
			f.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if !f.Valid() {
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("The filter has an unknown field value")
			continue
		}
		for _, a := range acls {
			if !f.Matches(a) {
				continue
			}
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
			if !seen[a] {
				seen[a] = true
				remove = append(remove, a)
			}
		}
	}
	if len(remove) == 0 {
		return resp
	}
	if err := s.cfg.ACLs.DeleteACLs(ctx, remove); err != nil {
		code := aclProposalCode(err)
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == 0 {
				resp.Results[i].ErrorCode, resp.Results[i].MatchingACLs = code, nil
			}
		}
	}
	return resp
}
