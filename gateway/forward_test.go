package gateway_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/gateway"
)

// followerCluster is a follower's view: node 2, led by node 1 at leaderAddr.
type followerCluster struct{ leaderAddr string }

func (f followerCluster) Self() cluster.NodeInfo {
	return cluster.NodeInfo{ID: 2, KafkaAddr: "127.0.0.1:1"}
}
func (f followerCluster) Brokers() []cluster.NodeInfo {
	return []cluster.NodeInfo{{ID: 1, KafkaAddr: f.leaderAddr}, f.Self()}
}
func (f followerCluster) LeaderID() (int32, bool)                   { return 1, true }
func (f followerCluster) AwaitLeader(context.Context) (int32, bool) { return 1, true }
func (f followerCluster) ServingLeader() (cluster.NodeInfo, bool) {
	return cluster.NodeInfo{ID: 1, KafkaAddr: f.leaderAddr}, true
}
func (f followerCluster) AwaitServingLeader(context.Context) (cluster.NodeInfo, bool) {
	return f.ServingLeader()
}
func (f followerCluster) LeaderEpoch() int32                 { return 1 }
func (f followerCluster) CaughtUp() bool                     { return true }
func (f followerCluster) AwaitCaughtUp(context.Context) bool { return true }
func (f followerCluster) ClusterID() string                  { return "test" }
func (f followerCluster) Replicas() (replicas, isr []int32)  { return []int32{1, 2}, []int32{1, 2} }

// followerBackend is a follower's backend: it cannot apply leader-only
// changes.
type followerBackend struct{ gateway.Backend }

func (followerBackend) InitProducerID(context.Context) (int64, int16, error) {
	return -1, -1, kerr.CoordinatorLoadInProgress
}
func (followerBackend) AlterTopicConfigs(context.Context, string, map[string]string) error {
	return kerr.NotController
}

// TestFollowerForwardsLeaderOnlyRequests: InitProducerId and topic config
// changes sent to a follower are answered by the leader, at the client's
// version; a request already forwarded is not forwarded again.
func TestFollowerForwardsLeaderOnlyRequests(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "fwd", 1, nil)

	log := slog.New(slog.DiscardHandler)
	addr := freeLoopbackAddr(t)
	srv := gateway.New(gateway.Config{Addr: addr, Logger: log}, followerBackend{leader.backend}, followerCluster{leaderAddr: leader.addr})
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(ioTimeout):
			t.Error("Serve did not return")
		}
	})

	c := dialRaw(t, srv.Addr().String())
	for _, v := range []int16{0, 2, 4} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = v
		req.TransactionTimeoutMillis = 60000
		resp := c.do(req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 || resp.ProducerID < 0 {
			t.Fatalf("v%d through the follower: code %d, producer id %d", v, resp.ErrorCode, resp.ProducerID)
		}
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "fwd"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("123456")
	res.Configs = append(res.Configs, cfg)
	alter.Resources = append(alter.Resources, res)
	aresp := c.do(alter).(*kmsg.IncrementalAlterConfigsResponse)
	if len(aresp.Resources) != 1 || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter through the follower: %+v", aresp.Resources)
	}
	if info, _ := leader.backend.Topic("fwd"); info.Configs["retention.ms"] != "123456" {
		t.Fatalf("the leader did not apply it: %v", info.Configs)
	}

	// A request that was already forwarded is answered locally.
	fc := dialRaw(t, srv.Addr().String())
	fc.clientID = "kgate-forward"
	resp := fc.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("a forwarded request was forwarded again: code %d", resp.ErrorCode)
	}
}
