package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleHeartbeat(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !s.allowedGroup(r, kmsg.ACLOperationRead, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp)
	}
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	resp.ErrorCode = s.groups.Heartbeat(req.Group, req.MemberID, instance, req.Generation)
	return now(resp)
}
