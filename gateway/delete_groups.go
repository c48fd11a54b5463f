package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteGroups(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	if len(req.Groups) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	var allowed, denied []string
	named := make(map[string]bool, len(req.Groups))
	for _, id := range req.Groups {
		if named[id] {
			continue // answered once, as Kafka answers a group named twice
		}
		named[id] = true
		if s.allowedGroup(r, kmsg.ACLOperationDelete, id) {
			allowed = append(allowed, id)
		} else {
			denied = append(denied, id)
		}
	}
	return later(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		if len(allowed) > 0 {
			codes := s.groups.DeleteGroups(ctx, allowed)
			for i, id := range allowed {
				rg := kmsg.NewDeleteGroupsResponseGroup()
				rg.Group, rg.ErrorCode = id, codes[i]
				resp.Groups = append(resp.Groups, rg)
			}
		}
		for _, id := range denied {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	})
}
