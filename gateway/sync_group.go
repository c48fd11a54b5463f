package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/coordinator"
	"github.com/kgate/kgate/fsm"
)

func (s *Server) handleSyncGroup(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.SyncGroupRequest)
	if len(req.GroupAssignment) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	fail := func(e *kerr.Error) Reply {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode, resp.MemberAssignment = e.Code, []byte{}
		return now(resp)
	}
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		// Mandatory from v5; Kafka checks this before anything else.
		return fail(kerr.InconsistentGroupProtocol)
	}
	if !s.allowedGroup(r, kmsg.ACLOperationRead, req.Group) {
		return fail(kerr.GroupAuthorizationFailed)
	}
	sr := coordinator.SyncRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation,
		ProtocolType: req.ProtocolType, Protocol: req.Protocol}
	if req.InstanceID != nil {
		sr.InstanceID = *req.InstanceID
	}
	for _, a := range req.GroupAssignment {
		sr.Assignments = append(sr.Assignments, fsm.Assignment{MemberID: a.MemberID, Assignment: a.MemberAssignment})
	}
	return later(func() kmsg.Response {
		res := s.groups.Sync(ctx, sr)
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = res.Code
		resp.MemberAssignment = []byte{}
		if res.Code == 0 {
			resp.MemberAssignment = res.Assignment
			if req.Version >= 5 {
				pt, p := res.ProtocolType, res.Protocol
				resp.ProtocolType, resp.Protocol = &pt, &p
			}
		}
		return resp
	})
}
