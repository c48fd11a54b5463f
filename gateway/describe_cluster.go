package gateway

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/gateway/authz"
)

func (s *Server) handleDescribeCluster(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID = s.cluster.ClusterID()
	resp.ControllerID = s.controllerID()
	resp.EndpointType = 1 // brokers
	switch req.EndpointType {
	case 1:
	case 2:
		// A tool given --bootstrap-controller: kgate's nodes are brokers
		// to it, as a Kafka broker answers.
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		return now(resp)
	default:
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return now(resp)
	}
	resp.ClusterAuthorizedOperations = authorizedOpsUnset
	if a := s.access(r); a.cluster(kmsg.ACLOperationDescribe) {
		resp.ClusterAuthorizedOperations = a.ops(req.IncludeClusterAuthorizedOperations, kmsg.ACLResourceTypeCluster, authz.ClusterName)
	}
	for _, n := range s.describedBrokers() {
		host, port := brokerAddr(n)
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = n.ID, host, port
		resp.Brokers = append(resp.Brokers, b)
	}
	return now(resp)
}

// describedBrokers is every node DescribeCluster lists: the brokers, and any
// other node gossip sees alive. Brokers leaves out a leader this follower
// lost contact with a moment ago, so that clients go elsewhere; tools that
// join DescribeTopicPartitions with DescribeCluster (kafka-topics
// --describe) would then show a partition the Iggy backend has that node
// lead as led by no one. Clients find their brokers through Metadata, not
// here.
func (s *Server) describedBrokers() []cluster.NodeInfo {
	out := s.cluster.Brokers()
	listed := map[int32]bool{}
	for _, n := range out {
		listed[n.ID] = true
	}
	live, _ := s.cluster.LiveNodes()
	for _, n := range live {
		if !listed[n.ID] {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b cluster.NodeInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
