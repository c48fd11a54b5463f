package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeGroups(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	if len(req.Groups) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		if !s.allowedGroup(r, kmsg.ACLOperationDescribe, id) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.AuthorizedOperations = s.access(r).ops(req.IncludeAuthorizedOperations, kmsg.ACLResourceTypeGroup, id)
		g, code := s.groups.DescribeGroup(id)
		rg.ErrorCode = code
		switch {
		case code != 0:
		case g == nil:
			rg.State = "Dead" // Kafka's answer for a group it does not know
		default:
			rg.State = g.State.String()
			rg.ProtocolType, rg.Protocol = g.ProtocolType, g.Protocol
			for _, m := range g.Members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.ClientID, rm.ClientHost = m.ID, m.ClientID, m.ClientHost
				if m.InstanceID != "" {
					id := m.InstanceID
					rm.InstanceID = &id
				}
				rm.ProtocolMetadata = []byte{}
				for _, p := range m.Protocols {
					if p.Name == g.Protocol {
						rm.ProtocolMetadata = p.Metadata
					}
				}
				rm.MemberAssignment = m.Assignment
				if rm.MemberAssignment == nil {
					rm.MemberAssignment = []byte{}
				}
				rg.Members = append(rg.Members, rm)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return now(resp)
}
