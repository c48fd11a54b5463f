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

// cutOffCluster is a node that has known no leader for an hour: cut off
// from a majority that has one it cannot name.
type cutOffCluster struct{ followerCluster }

func (cutOffCluster) LeaderID() (int32, bool) { return 0, false }
func (cutOffCluster) AwaitLeader(ctx context.Context) (int32, bool) {
	<-ctx.Done()
	return 0, false
}
func (cutOffCluster) ServingLeader() (cluster.NodeInfo, bool) { return cluster.NodeInfo{}, false }
func (cutOffCluster) AwaitServingLeader(ctx context.Context) (cluster.NodeInfo, bool) {
	<-ctx.Done()
	return cluster.NodeInfo{}, false
}
func (c cutOffCluster) AwaitFreshLeader(ctx context.Context) (cluster.NodeInfo, bool) {
	return c.AwaitServingLeader(ctx)
}
func (cutOffCluster) LeaderlessFor() time.Duration { return time.Hour }

// TestCutOffNodeAnswersAtOnce: a node leaderless for longer than
// LeaderWait no longer parks requests waiting for an election: Metadata
// and Produce get their retriable errors at once, so the
// client asks another node. (make chaos found a deposed leader, cut off
// from the others, holding its producers for the whole partition, each
// request parked for LeaderWait in turn.)
func TestCutOffNodeAnswersAtOnce(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "cut", 1, nil)
	fc := cutOffCluster{followerCluster{leader: leader.node.Self(), peers: listenLoopback(t)}}
	// A LeaderWait far beyond ioTimeout: a parked request fails the test.
	srv := gateway.New(gateway.Config{Addr: freeLoopbackAddr(t), LeaderWait: time.Hour, Logger: slog.New(slog.DiscardHandler)},
		followerBackend{noLeaderBackend{leader.backend}}, fc)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() {
		stop()
		<-done
	}()
	c := dialRaw(t, srv.Addr().String())

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mt := kmsg.NewMetadataRequestTopic()
	name := "cut"
	mt.Topic = &name
	md.Topics = append(md.Topics, mt)
	mresp := c.do(md).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != 1 ||
		mresp.Topics[0].Partitions[0].ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("metadata from a cut-off node: %+v, want partition 0 LEADER_NOT_AVAILABLE", mresp.Topics)
	}

	pr := kmsg.NewPtrProduceRequest()
	pr.Version = 7
	pr.Acks = -1
	pr.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "cut"
	pp := kmsg.NewProduceRequestTopicPartition()
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	presp := c.do(pr).(*kmsg.ProduceResponse)
	if len(presp.Topics) != 1 || len(presp.Topics[0].Partitions) != 1 ||
		presp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a cut-off node: %+v, want NOT_LEADER_OR_FOLLOWER", presp.Topics)
	}
}

// noLeaderBackend reports every partition without a leader, as a node
// that knows of no Raft leader does.
type noLeaderBackend struct{ gateway.Backend }

func (noLeaderBackend) PartitionLeader(string, int32) (int32, bool) { return -1, true }
