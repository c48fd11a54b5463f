package gateway_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
)

// votersDownCluster is a leader of three voters that is in contact with
// none of the other two (gossip sees only itself).
type votersDownCluster struct{ *cluster.Node }

func (votersDownCluster) Replicas() (replicas, isr []int32) { return []int32{1, 2, 3}, []int32{1} }

// TestCreateTopicsReplicationFactorIsTheVoters: the replication factor
// CreateTopics accepts and answers is the number of Raft voters (every
// partition's replicas, as Metadata reports them), not the number of nodes
// alive at the moment: Kafka Streams creating its internal topics with
// replication.factor=3 while one of three nodes is down must not die of
// INVALID_REPLICATION_FACTOR.
func TestCreateTopicsReplicationFactorIsTheVoters(t *testing.T) {
	n := startNode(t, nil)
	srv := serveGateway(t, n.backend, votersDownCluster{n.node})
	c := dialRaw(t, srv.Addr().String())

	rf3 := newTopic("rf-voters", 1)
	rf3.ReplicationFactor = 3
	rf4 := newTopic("rf-too-many", 1)
	rf4.ReplicationFactor = 4
	rfDefault := newTopic("rf-default", 1)
	resp := c.do(createTopicsReq(false, rf3, rf4, rfDefault)).(*kmsg.CreateTopicsResponse)
	for _, rt := range resp.Topics {
		switch rt.Topic {
		case "rf-voters", "rf-default":
			if rt.ErrorCode != 0 || rt.ReplicationFactor != 3 {
				t.Errorf("%s: error %d, replication factor %d; want created with 3 (the voters)", rt.Topic, rt.ErrorCode, rt.ReplicationFactor)
			}
		case "rf-too-many":
			if rt.ErrorCode != kerr.InvalidReplicationFactor.Code {
				t.Errorf("replication factor 4 with 3 voters: error %d, want INVALID_REPLICATION_FACTOR (38)", rt.ErrorCode)
			}
		}
	}
	if mt := topicMeta(t, c, "rf-voters"); mt.ErrorCode != 0 || len(mt.Partitions) != 1 || len(mt.Partitions[0].Replicas) != 3 || len(mt.Partitions[0].OfflineReplicas) != 2 {
		t.Errorf("metadata of rf-voters: %+v; want 3 replicas, 2 offline", mt)
	}
	// The broker's default replication factor says the same.
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ConfigNames = kmsg.ConfigResourceTypeBroker, []string{"default.replication.factor", "offsets.topic.replication.factor"}
	dc.Resources = append(dc.Resources, dr)
	for _, cfg := range c.do(dc).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		if v := cfg.Value; v == nil || *v != "3" {
			t.Errorf("broker config %s = %q, want 3 (the voters)", cfg.Name, derefOr(v, "null"))
		}
	}
}

// TestLogAppendTimeNeedsEveryNode: until the cluster's feature level has
// every node stamp append times, a topic cannot be given LogAppendTime:
// replicas would write its batches differently.
func TestLogAppendTimeNeedsEveryNode(t *testing.T) {
	older := fsm.LevelLogAppendTime - 1
	n := startNodeAt(t, nil, false, &older)
	c := dialRaw(t, n.addr)
	resp := c.do(createTopicsReq(false, newTopic("lat", 1, "message.timestamp.type", "LogAppendTime"))).(*kmsg.CreateTopicsResponse)
	if code := resp.Topics[0].ErrorCode; code != kerr.InvalidConfig.Code {
		t.Fatalf("LogAppendTime below its feature level: code %d, want INVALID_CONFIG (40)", code)
	}
	createTopic(t, n.addr, "lat", 1, nil)
	if code := c.do(incAlterReq(false, "lat", "message.timestamp.type", "LogAppendTime")).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != kerr.InvalidConfig.Code {
		t.Fatalf("altering to LogAppendTime below its feature level: code %d, want INVALID_CONFIG (40)", code)
	}
}

func derefOr(p *string, or string) string {
	if p == nil {
		return or
	}
	return *p
}
