package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/coordinator"
)

func (s *Server) handleLeaveGroup(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.LeaveGroupRequest)
	if len(req.Members) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	if !s.allowedGroup(r, kmsg.ACLOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp)
	}
	var members []coordinator.LeaveMember
	if req.Version < 3 {
		members = []coordinator.LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			lm := coordinator.LeaveMember{MemberID: m.MemberID}
			if m.InstanceID != nil {
				lm.InstanceID = *m.InstanceID
			}
			members = append(members, lm)
		}
	}
	return later(func() kmsg.Response {
		codes, code := s.groups.Leave(ctx, req.Group, members)
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		if req.Version < 3 {
			if code == 0 && len(codes) == 1 {
				resp.ErrorCode = codes[0]
			}
			return resp
		}
		if code != 0 {
			return resp
		}
		for i, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
			if i < len(codes) {
				rm.ErrorCode = codes[i]
			}
			resp.Members = append(resp.Members, rm)
		}
		return resp
	})
}
