package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleAddOffsetsToTxn(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	return later(func() kmsg.Response {
		code := s.txns.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
		resp.ErrorCode = fencedAs(code, req.Version, 2)
		return resp
	})
}
