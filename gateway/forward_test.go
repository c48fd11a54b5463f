package gateway_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
)

// followerCluster is a follower's view: node 2, led by node 1 (leader). Its
// peer link is a plain listener the test can dial as another node would.
type followerCluster struct {
	leader cluster.NodeInfo
	dial   func(ctx context.Context, to cluster.NodeInfo) (net.Conn, error)
	peers  net.Listener
	// applied is the follower's applied log index; nil: 0.
	applied func() uint64
}

func (f followerCluster) Self() cluster.NodeInfo {
	return cluster.NodeInfo{ID: 2, KafkaAddr: "127.0.0.1:1"}
}
func (f followerCluster) LiveNodes() ([]cluster.NodeInfo, uint64) { return f.Brokers(), 0 }
func (f followerCluster) Brokers() []cluster.NodeInfo {
	return []cluster.NodeInfo{f.leader, f.Self()}
}
func (f followerCluster) LeaderID() (int32, bool)                   { return 1, true }
func (f followerCluster) AwaitLeader(context.Context) (int32, bool) { return 1, true }
func (f followerCluster) ServingLeader() (cluster.NodeInfo, bool)   { return f.leader, true }
func (f followerCluster) AwaitServingLeader(context.Context) (cluster.NodeInfo, bool) {
	return f.ServingLeader()
}
func (f followerCluster) AwaitFreshLeader(context.Context) (cluster.NodeInfo, bool) {
	return f.ServingLeader()
}
func (f followerCluster) LeaderlessFor() time.Duration       { return 0 }
func (f followerCluster) CutOff() bool                       { return false }
func (f followerCluster) ConfirmLeader(context.Context) bool { return false }
func (f followerCluster) LeaderEpoch() int32                 { return 1 }
func (f followerCluster) CaughtUp() bool                     { return true }
func (f followerCluster) AwaitCaughtUp(context.Context) bool { return true }
func (f followerCluster) ClusterID() string                  { return "test" }
func (f followerCluster) Replicas() (replicas, isr []int32)  { return []int32{1, 2}, []int32{1, 2} }
func (f followerCluster) PeerListener() net.Listener         { return f.peers }
func (f followerCluster) AppliedIndex() uint64 {
	if f.applied == nil {
		return 0
	}
	return f.applied()
}
func (f followerCluster) FeatureLevel() fsm.Level { return fsm.LatestLevel }
func (f followerCluster) DialPeer(ctx context.Context, to cluster.NodeInfo) (net.Conn, error) {
	return f.dial(ctx, to)
}

// followerOf is node 2's view of a cluster led by leader (node 1), its peer
// link dialling the leader's Raft port.
func followerOf(t *testing.T, leader *testNode) followerCluster {
	info := leader.node.Self()
	info.KafkaAddr = leader.addr
	return followerCluster{leader: info, dial: leader.node.DialPeer, peers: listenLoopback(t), applied: leader.node.AppliedIndex}
}

// followerBackend is a follower's backend: it reads the leader's state (as
// a follower applies the leader's log) but cannot apply a change itself.
type followerBackend struct{ gateway.Backend }

func (followerBackend) InitProducerID(context.Context) (int64, int16, error) {
	return -1, -1, kerr.CoordinatorLoadInProgress
}
func (followerBackend) AlterTopicConfigs(context.Context, string, map[string]string) error {
	return kerr.NotController
}
func (followerBackend) CreateTopic(context.Context, gateway.TopicSpec) error {
	return kerr.NotController
}
func (followerBackend) DeleteTopic(context.Context, string) error { return kerr.NotController }
func (followerBackend) CreatePartitions(context.Context, string, int32) error {
	return kerr.NotController
}

// serveGateway serves a gateway over backend and cl until the test ends.
func serveGateway(t *testing.T, backend gateway.Backend, cl gateway.Cluster) *gateway.Server {
	t.Helper()
	return serveWith(t, gateway.Config{AutoCreateTopics: true}, backend, cl)
}

// serveWith serves a gateway with cfg (on a free loopback address, logging
// nowhere, unless cfg says otherwise) over backend and cl until the test
// ends.
func serveWith(t *testing.T, cfg gateway.Config, backend gateway.Backend, cl gateway.Cluster) *gateway.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = freeLoopbackAddr(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv := gateway.New(cfg, backend, cl)
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
	return srv
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestFollowerForwardsLeaderOnlyRequests: every leader-only request sent to
// a follower is answered by the leader, at the client's version, over the
// leader's Raft port; the client id cannot mark a request as forwarded, and
// a request that arrives over the cluster's link is answered where it lands.
func TestFollowerForwardsLeaderOnlyRequests(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "fwd", 1, nil)
	leaderInfo := leader.node.Self()
	leaderInfo.KafkaAddr = leader.addr
	fc := followerCluster{leader: leaderInfo, dial: leader.node.DialPeer, peers: listenLoopback(t), applied: leader.node.AppliedIndex}
	srv := serveGateway(t, followerBackend{leader.backend}, fc)

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

	// Topic administration and Metadata's auto-creation.
	ct := c.do(createTopicsReq(false, newTopic("fwd-new", 2))).(*kmsg.CreateTopicsResponse)
	if len(ct.Topics) != 1 || ct.Topics[0].ErrorCode != 0 || ct.Topics[0].NumPartitions != 2 {
		t.Fatalf("CreateTopics through the follower: %+v", ct.Topics)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "fwd-new", 3
	cp.Topics = append(cp.Topics, cpt)
	if resp := c.do(cp).(*kmsg.CreatePartitionsResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions through the follower: %+v", resp.Topics)
	}
	if info, _ := leader.backend.Topic("fwd-new"); info.Partitions != 3 {
		t.Fatalf("the leader has %d partitions of fwd-new, want 3", info.Partitions)
	}
	md := c.do(metadataReq(12, true, "fwd-auto")).(*kmsg.MetadataResponse)
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 || len(md.Topics[0].Partitions) != 1 {
		t.Fatalf("auto-creation through the follower: %+v", md.Topics)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 5
	del.TopicNames = []string{"fwd-new", "fwd-auto"}
	if resp := c.do(del).(*kmsg.DeleteTopicsResponse); len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != 0 {
		t.Fatalf("DeleteTopics through the follower: %+v", resp.Topics)
	}
	if _, ok := leader.backend.Topic("fwd-auto"); ok {
		t.Fatal("the leader still has fwd-auto")
	}

	// A client naming itself as kgate's forwarder is forwarded all the same.
	forger := dialRaw(t, srv.Addr().String())
	forger.clientID = "kgate-forward"
	if resp := forger.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse); resp.ErrorCode != 0 {
		t.Fatalf("a client id marked the request as forwarded: code %d", resp.ErrorCode)
	}

	// A request on the cluster's own link is answered locally.
	nc, err := net.DialTimeout("tcp", fc.peers.Addr().String(), ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	peer := &rawConn{t: t, nc: nc, corr: 1}
	if resp := peer.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("a forwarded request was forwarded again: code %d", resp.ErrorCode)
	}
}

// TestForwardingSlowLeaderHoldsUpNoOther: a forwarded request whose answer
// is slow does not delay the next one: each has a connection of its own.
// The stub leader holds the first answer until the second was given, so
// forwarding over one connection at a time fails the first by its timeout.
func TestForwardingSlowLeaderHoldsUpNoOther(t *testing.T) {
	stub := listenLoopback(t)
	// The stub leader answers InitProducerId with producer id 7; on its
	// first connection, only once release is closed.
	accepted := make(chan struct{}, 16)
	release := make(chan struct{})
	go func() {
		first := true
		for {
			nc, err := stub.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			hold := release
			if !first {
				hold = nil
			}
			go serveStubLeader(nc, hold)
			first = false
		}
	}()
	dial := func(ctx context.Context, to cluster.NodeInfo) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", to.RaftAddr)
	}
	fc := followerCluster{leader: cluster.NodeInfo{ID: 1, KafkaAddr: "127.0.0.1:1", RaftAddr: stub.Addr().String()}, dial: dial}
	srv := serveGateway(t, followerBackend{}, fc)

	stuck := dialRaw(t, srv.Addr().String())
	stuckReq := kmsg.NewPtrInitProducerIDRequest()
	stuckCorr := stuck.send(stuckReq)
	select { // the stuck request holds the stub's first connection
	case <-accepted:
	case <-time.After(ioTimeout):
		t.Fatal("the first request was not forwarded")
	}

	c := dialRaw(t, srv.Addr().String())
	if resp := c.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse); resp.ErrorCode != 0 || resp.ProducerID != 7 {
		t.Fatalf("second forwarded request behind a slow one: code %d, id %d", resp.ErrorCode, resp.ProducerID)
	}
	close(release)
	if resp := stuck.recv(stuckCorr, stuckReq).(*kmsg.InitProducerIDResponse); resp.ErrorCode != 0 || resp.ProducerID != 7 {
		t.Fatalf("the slow forwarded request: code %d, id %d", resp.ErrorCode, resp.ProducerID)
	}
}

// serveStubLeader answers InitProducerId requests on nc, each once hold is
// closed (nil: at once).
func serveStubLeader(nc net.Conn, hold <-chan struct{}) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		if hold != nil {
			<-hold
		}
		hdr, req, _, err := gateway.ParseRequest(frame)
		if err != nil {
			return
		}
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.SetVersion(hdr.Version)
		resp.ProducerID, resp.ProducerEpoch = 7, 0
		out := gateway.AppendResponse(nil, hdr.CorrelationID, resp)
		out = binary.BigEndian.AppendUint64(out, 0) // the applied log index trailer of the cluster's link
		if _, err := nc.Write(out); err != nil {
			return
		}
	}
}

// TestPeerLinksNotCountedAgainstMaxConnections: with the leader's client
// connections at --max-connections, a follower still forwards to it (Kafka
// admits inter-broker connections past max.connections), and the leader
// still refuses another client.
func TestPeerLinksNotCountedAgainstMaxConnections(t *testing.T) {
	leader := startNode(t, func(c *gateway.Config) { c.MaxConnections = 1 })
	held := dialRaw(t, leader.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	held.do(req)
	srv := serveGateway(t, followerBackend{leader.backend}, followerOf(t, leader))

	c := dialRaw(t, srv.Addr().String())
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionTimeoutMillis = 60000
	if resp := c.do(ip).(*kmsg.InitProducerIDResponse); resp.ErrorCode != 0 || resp.ProducerID < 0 {
		t.Fatalf("forwarded to a leader at its connection limit: code %d, producer id %d", resp.ErrorCode, resp.ProducerID)
	}
	expectClosed(t, dialRaw(t, leader.addr).nc)
	held.do(req)
}
