package gateway

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/coordinator"
	"github.com/kgate/kgate/fsm"
)

func (s *Server) handleJoinGroup(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.JoinGroupRequest)
	if len(req.Protocols) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	if !s.allowedGroup(r, kmsg.ACLOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = kerr.GroupAuthorizationFailed.Code, -1
		return now(resp)
	}
	jr := coordinator.JoinRequest{
		Group: req.Group, MemberID: req.MemberID, ProtocolType: req.ProtocolType,
		ClientID: clientID(r), ClientHost: clientHost(r.Remote),
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		RequireKnownMemberID: req.Version >= 4,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	if req.InstanceID != nil {
		jr.InstanceID = *req.InstanceID
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, fsm.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	return later(func() kmsg.Response {
		res := s.groups.Join(ctx, jr)
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = res.Code
		resp.MemberID = res.MemberID
		resp.Generation = -1
		if res.Code != 0 {
			return resp
		}
		resp.Generation = res.Generation
		resp.LeaderID = res.Leader
		resp.SkipAssignment = res.SkipAssignment
		if res.SkipAssignment && req.Version < 9 {
			// As Kafka: without SkipAssignment the returning static leader
			// is told the old leader id and no members, so it syncs as a
			// follower and keeps the assignment in force.
			resp.LeaderID, resp.SkipAssignment, res.Members = res.PreviousLeader, false, nil
		}
		proto, ptype := res.Protocol, res.ProtocolType
		resp.Protocol = &proto
		if req.Version >= 7 {
			resp.ProtocolType = &ptype
		}
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = m.MemberID
			if m.InstanceID != "" {
				id := m.InstanceID
				rm.InstanceID = &id
			}
			rm.ProtocolMetadata = m.Metadata
			resp.Members = append(resp.Members, rm)
		}
		return resp
	})
}

func clientID(r *Request) string {
	if r.ClientID == nil {
		return ""
	}
	return *r.ClientID
}

// clientHost formats the peer as Kafka does: "/<ip>".
func clientHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "/" + host
}
