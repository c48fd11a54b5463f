package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinator key types.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

// handleFindCoordinator names the Raft leader, the only group and
// transaction coordinator,
// with the same node id and address Metadata reports for it.
func (s *Server) handleFindCoordinator(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	if len(req.CoordinatorKeys) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	// An election running (or the leader suspected dead, or catching up):
	// answer with its winner rather than COORDINATOR_NOT_AVAILABLE, which
	// franz-go's coordinator lookup does not retry when its previous try
	// hit the dead node, and which ends a group session once retries
	// outlast it. A follower names the leader only on word from it newer
	// than the request, the leader itself only once a majority confirmed
	// it still leads.
	a := s.access(r)
	leads := s.servesAsLeader()
	return later(func() kmsg.Response {
		if leads && s.confirmedLeader(ctx) {
			return s.findCoordinator(req, a)
		}
		s.awaitFreshLeader(ctx)
		if _, ok := s.cluster.ServingLeader(); !ok && s.cutOff(r) {
			return cutOffAnswer{}
		}
		return s.findCoordinator(req, a)
	})
}

func (s *Server) findCoordinator(req *kmsg.FindCoordinatorRequest, a access) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) (int32, string, int32, *kerr.Error, string) {
		switch {
		case req.CoordinatorType == coordinatorGroup && !a.allows(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, key):
			return -1, "", -1, kerr.GroupAuthorizationFailed, ""
		case req.CoordinatorType == coordinatorTransaction && !a.allows(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key):
			return -1, "", -1, kerr.TransactionalIDAuthorizationFailed, ""
		case req.CoordinatorType == coordinatorTransaction && s.txns == nil:
			return -1, "", -1, kerr.UnsupportedVersion, "transactions need the embedded backend"
		case req.CoordinatorType == coordinatorTransaction && key == "":
			return -1, "", -1, kerr.InvalidRequest, "empty transactional id"
		case req.CoordinatorType != coordinatorGroup && req.CoordinatorType != coordinatorTransaction:
			return -1, "", -1, kerr.InvalidRequest, "unknown coordinator type"
		}
		// The Raft leader coordinates every group and every transaction.
		n, ok := s.cluster.ServingLeader()
		if !ok {
			return -1, "", -1, kerr.CoordinatorNotAvailable, "no Raft leader in contact"
		}
		host, port := brokerAddr(n)
		return n.ID, host, port, nil, ""
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			var e *kerr.Error
			var msg string
			c.NodeID, c.Host, c.Port, e, msg = find(key)
			if e != nil {
				c.ErrorCode = e.Code
				c.ErrorMessage = &msg
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	}
	var e *kerr.Error
	var msg string
	resp.NodeID, resp.Host, resp.Port, e, msg = find(req.CoordinatorKey)
	if e != nil {
		resp.ErrorCode = e.Code
		resp.ErrorMessage = &msg
	}
	return resp
}
