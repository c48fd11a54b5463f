package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleEndTxn commits or aborts a transaction: one Raft entry writes the
// markers into every partition of it and commits its offsets.
func (s *Server) handleEndTxn(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !s.access(r).allows(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return now(resp)
	}
	return later(func() kmsg.Response {
		code := s.txns.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
		resp.ErrorCode = fencedAs(code, req.Version, 2)
		return resp
	})
}
