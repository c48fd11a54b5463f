package gateway_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
)

func describeQuorumReq(topic string) *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(2)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = topic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	return req
}

func TestDescribeQuorumSingleNode(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "q", 1, nil)
	c := dialRaw(t, n.addr)
	before := time.Now().UnixMilli()
	resp := c.do(describeQuorumReq("__cluster_metadata")).(*kmsg.DescribeQuorumResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("error %d topics %+v", resp.ErrorCode, resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	st := n.node.RaftState()
	if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch != int32(st.Term) || p.HighWatermark <= 0 || p.HighWatermark > int64(st.CommitIndex) {
		t.Fatalf("partition %+v, raft %+v", p, st)
	}
	if len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 || p.CurrentVoters[0].LogEndOffset < p.HighWatermark ||
		p.CurrentVoters[0].LastCaughtUpTimestamp < before || len(p.Observers) != 0 {
		t.Fatalf("voters %+v observers %+v", p.CurrentVoters, p.Observers)
	}
	if len(resp.Nodes) != 1 || resp.Nodes[0].NodeID != 1 || len(resp.Nodes[0].Listeners) != 1 || resp.Nodes[0].Listeners[0].Name != "RAFT" {
		t.Fatalf("nodes %+v", resp.Nodes)
	}
	if got := c.do(describeQuorumReq("other")).(*kmsg.DescribeQuorumResponse); got.Topics[0].Topic != "other" || got.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("another topic: %+v", got.Topics)
	}
}

// catchingUpCluster is a single node whose Raft configuration also holds a
// non-voter (a node that joined and is catching up) that gossip does not
// know yet.
type catchingUpCluster struct{ *cluster.Node }

func (catchingUpCluster) NonVoters() []cluster.Voter {
	return []cluster.Voter{{ID: 9, Address: "127.0.0.1:1"}}
}

// TestDescribeQuorumListsNonVotersAsObservers: a node the leader added as a
// non-voter is one of Kafka's observers (kafka-metadata-quorum prints it as
// such), not a voter, and, as in Kafka, Nodes names only the voters.
func TestDescribeQuorumListsNonVotersAsObservers(t *testing.T) {
	n := startNode(t, nil)
	srv := serveGateway(t, n.backend, catchingUpCluster{n.node})
	c := dialRaw(t, srv.Addr().String())
	resp := c.do(describeQuorumReq("__cluster_metadata")).(*kmsg.DescribeQuorumResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("error %d topics %+v", resp.ErrorCode, resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 {
		t.Fatalf("voters %+v, want node 1 alone", p.CurrentVoters)
	}
	if len(p.Observers) != 1 || p.Observers[0].ReplicaID != 9 || p.Observers[0].LogEndOffset != -1 {
		t.Fatalf("observers %+v, want node 9 with an unknown log end", p.Observers)
	}
	if len(resp.Nodes) != 1 || resp.Nodes[0].NodeID != 1 {
		t.Fatalf("nodes %+v, want the voter alone", resp.Nodes)
	}
}
