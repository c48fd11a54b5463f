package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteGroups(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	if len(req.Groups) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	return later(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		codes := s.groups.DeleteGroups(ctx, req.Groups)
		for i, id := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = id, codes[i]
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	})
}
