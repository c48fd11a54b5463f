package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kgate places every partition on the Raft voters and never moves replicas
// one partition at a time, so no reassignment is ever in progress.
func (s *Server) handleListPartitionReassignments(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	if !s.allowedCluster(r, kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	return now(resp)
}
