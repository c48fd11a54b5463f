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

// handleFindCoordinator names the Raft leader, the only group coordinator,
// with the same node id and address Metadata reports for it.
func (s *Server) handleFindCoordinator(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if len(req.CoordinatorKeys) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	find := func(key string) (int32, string, int32, *kerr.Error, string) {
		if req.CoordinatorType == coordinatorTransaction {
			return -1, "", -1, kerr.UnsupportedVersion, "kgate does not support transactions"
		}
		if req.CoordinatorType != coordinatorGroup {
			return -1, "", -1, kerr.InvalidRequest, "unknown coordinator type"
		}
		if key == "" {
			return -1, "", -1, kerr.InvalidGroupID, "empty group id"
		}
		id, ok := s.cluster.LeaderID()
		if !ok {
			return -1, "", -1, kerr.CoordinatorNotAvailable, "no Raft leader"
		}
		for _, n := range s.cluster.Brokers() {
			if n.ID == id {
				host, port := brokerAddr(n)
				return id, host, port, nil, ""
			}
		}
		return -1, "", -1, kerr.CoordinatorNotAvailable, "leader address not known yet"
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
		return now(resp)
	}
	var e *kerr.Error
	var msg string
	resp.NodeID, resp.Host, resp.Port, e, msg = find(req.CoordinatorKey)
	if e != nil {
		resp.ErrorCode = e.Code
		resp.ErrorMessage = &msg
	}
	return now(resp)
}
