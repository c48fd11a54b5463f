package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleInitProducerID(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if s.txns == nil {
			// No transactions with this backend: a fatal, non-retriable
			// answer the producer reports at once.
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return now(resp)
		}
		// To the transaction coordinator, the Raft leader, which the
		// client found with FindCoordinator; elsewhere NOT_COORDINATOR.
		return later(func() kmsg.Response {
			id, epoch, code := s.txns.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch)
			resp.ErrorCode = fencedAs(code, req.Version, 4)
			if code == 0 {
				resp.ProducerID, resp.ProducerEpoch = id, epoch
			}
			return resp
		})
	}
	// An idempotent producer needs IDEMPOTENT_WRITE on the cluster or
	// WRITE on some topic (KIP-679).
	if s.checks(r) && !s.allowedCluster(r, kmsg.ACLOperationIdempotentWrite) &&
		!s.cfg.Authorizer.AuthorizeAny(r.principal(), r.host(), kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	// Only the Raft leader hands ids out; clients ask any broker.
	return later(func() kmsg.Response {
		return s.viaLeader(ctx, r, func() kmsg.Response {
			id, epoch, err := s.backend.InitProducerID(ctx)
			if err != nil {
				resp.ErrorCode = ErrorCode(err)
				return resp
			}
			resp.ProducerID, resp.ProducerEpoch = id, epoch
			return resp
		})
	})
}
