package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/authz"
)

func (s *Server) handleDescribeCluster(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID = s.cluster.ClusterID()
	resp.ControllerID = s.controllerID()
	resp.EndpointType = 1 // brokers
	resp.ClusterAuthorizedOperations = authorizedOpsUnset
	if a := s.access(r); a.cluster(kmsg.ACLOperationDescribe) {
		resp.ClusterAuthorizedOperations = a.ops(req.IncludeClusterAuthorizedOperations, kmsg.ACLResourceTypeCluster, authz.ClusterName)
	}
	for _, n := range s.cluster.Brokers() {
		host, port := brokerAddr(n)
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = n.ID, host, port
		resp.Brokers = append(resp.Brokers, b)
	}
	return now(resp)
}
