package gateway_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNotLeaderNamesTheLeader: a follower answers Produce v10+ and Fetch
// v16+ for a partition it does not lead with NOT_LEADER_OR_FOLLOWER naming
// the leader, its epoch and its endpoint (KIP-951); older versions carry
// no hint. Metadata gives the same epoch.
func TestNotLeaderNamesTheLeader(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "hint", 1, nil)

	srv := serveGateway(t, followerBackend{leader.backend}, followerOf(t, leader))
	host, portStr, _ := net.SplitHostPort(leader.addr)
	port, _ := strconv.Atoi(portStr)
	epoch := followerCluster{}.LeaderEpoch()
	c := dialRaw(t, srv.Addr().String())

	for _, v := range []int16{9, 10, 12} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = v, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "hint"
		rt.Partitions = append(rt.Partitions, kmsg.NewProduceRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("produce v%d to a follower: code %d", v, p.ErrorCode)
		}
		wantID, wantEpoch, wantBrokers := int32(-1), int32(-1), 0
		if v >= 10 {
			wantID, wantEpoch, wantBrokers = 1, epoch, 1
		}
		if p.CurrentLeader.LeaderID != wantID || p.CurrentLeader.LeaderEpoch != wantEpoch || len(resp.Brokers) != wantBrokers {
			t.Fatalf("produce v%d: current leader %+v, endpoints %+v; want leader %d epoch %d, %d endpoints",
				v, p.CurrentLeader, resp.Brokers, wantID, wantEpoch, wantBrokers)
		}
		if wantBrokers > 0 && (resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != host || resp.Brokers[0].Port != int32(port)) {
			t.Fatalf("produce v%d: endpoint %+v, want node 1 at %s", v, resp.Brokers[0], leader.addr)
		}
	}

	info, _ := leader.backend.Topic("hint")
	for _, v := range []int16{15, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes = v, 0, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "hint", info.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("fetch v%d from a follower: code %d", v, p.ErrorCode)
		}
		wantID, wantEpoch, wantBrokers := int32(-1), int32(-1), 0
		if v >= 16 {
			wantID, wantEpoch, wantBrokers = 1, epoch, 1
		}
		if p.CurrentLeader.LeaderID != wantID || p.CurrentLeader.LeaderEpoch != wantEpoch || len(resp.Brokers) != wantBrokers {
			t.Fatalf("fetch v%d: current leader %+v, endpoints %+v; want leader %d epoch %d, %d endpoints",
				v, p.CurrentLeader, resp.Brokers, wantID, wantEpoch, wantBrokers)
		}
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("hint")
	md.Topics = append(md.Topics, mt)
	mresp := c.do(md).(*kmsg.MetadataResponse)
	if got := mresp.Topics[0].Partitions[0]; got.Leader != 1 || got.LeaderEpoch != epoch {
		t.Fatalf("metadata: leader %d epoch %d, want 1 and %d", got.Leader, got.LeaderEpoch, epoch)
	}
}
