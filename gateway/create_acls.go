package gateway

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway/authz"
)

// handleCreateAcls adds bindings through Raft. It needs ALTER on the
// cluster (checked where the client connected); followers forward it to
// the leader.
func (s *Server) handleCreateAcls(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.CreateACLsRequest)
	if len(req.Creations) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	failAll := func(e *kerr.Error, msg string) Reply {
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = e.Code, kmsg.StringPtr(msg)
			resp.Results = append(resp.Results, res)
		}
		return now(resp)
	}
	if e, msg := s.aclChangeRefused(r); e != nil {
		return failAll(e, msg)
	}
	return later(func() kmsg.Response {
		return s.viaLeader(ctx, r, func() kmsg.Response { return s.createACLs(ctx, req) })
	})
}

func (s *Server) createACLs(ctx context.Context, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var valid []fsm.ACL
	var slots []int
	for i, c := range req.Creations {
		res := &resp.Results[i]
		*res = kmsg.NewCreateACLsResponseResult()
		a := fsm.ACL{ResourceType: int8(c.ResourceType), ResourceName: c.ResourceName, PatternType: int8(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: int8(c.Operation), Permission: int8(c.PermissionType)}
		if req.Version == 0 {
			a.PatternType = int8(kmsg.ACLResourcePatternTypeLiteral)
		}
		switch {
		case a.ResourceType == int8(kmsg.ACLResourceTypeCluster) && a.ResourceName != authz.ClusterName:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("The only valid name for the CLUSTER resource is "+authz.ClusterName)
		case a.ResourceName == "":
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Invalid empty resource name")
		case !fsm.ValidACL(a):
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Invalid ACL binding: resource type, pattern type, operation, permission type, principal (Type:name) or host")
		default:
			valid = append(valid, a)
			slots = append(slots, i)
		}
	}
	if len(valid) == 0 {
		return resp
	}
	codes, err := s.cfg.ACLs.CreateACLs(ctx, valid)
	for j, i := range slots {
		res := &resp.Results[i]
		switch {
		case err != nil:
			res.ErrorCode = aclProposalCode(err)
		case j < len(codes):
			res.ErrorCode = codes[j]
		}
	}
	return resp
}

// aclProposalCode is the code of an ACL change that was not applied.
func aclProposalCode(err error) int16 {
	switch {
	case errors.Is(err, cluster.ErrNotLeader):
		return kerr.NotController.Code
	case errors.Is(err, fsm.ErrFeatureDisabled):
		return kerr.UnsupportedVersion.Code // a voter still runs a kgate without ACLs
	}
	return kerr.RequestTimedOut.Code
}

// aclChangeRefused is why a CreateAcls or DeleteAcls is refused as a
// whole, if it is: no authorizer (as a Kafka broker without one), or no
// ALTER on the cluster.
func (s *Server) aclChangeRefused(r *Request) (*kerr.Error, string) {
	if s.cfg.Authorizer == nil {
		return kerr.SecurityDisabled, "No Authorizer is configured."
	}
	if !s.allowedCluster(r, kmsg.ACLOperationAlter) {
		return kerr.ClusterAuthorizationFailed, ""
	}
	return nil, ""
}
