package gateway

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleListGroups(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, code := s.groups.ListGroups()
	resp.ErrorCode = code
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	// Without DESCRIBE on the cluster, only the groups the client may
	// describe are listed.
	a := s.access(r)
	all := a.cluster(kmsg.ACLOperationDescribe)
	for _, g := range groups {
		if !match(req.StatesFilter, g.State.String()) || !match(req.TypesFilter, "classic") ||
			!all && !a.allows(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.ID) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.ID, g.ProtocolType, g.State.String(), "classic"
		resp.Groups = append(resp.Groups, rg)
	}
	return now(resp)
}
