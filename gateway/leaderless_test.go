package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/coordinator"
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

// TestCutOffNodeAnswersAtOnce: with resets turned off (CutOffAfter < 0), a
// node leaderless for longer than LeaderWait no longer parks requests
// waiting for an election: Metadata and Produce get their retriable errors
// at once, so the client asks another node. (make chaos found a deposed
// leader, cut off from the others, holding its producers for the whole
// partition, each request parked for LeaderWait in turn.)
func TestCutOffNodeAnswersAtOnce(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "cut", 1, nil)
	fc := cutOffCluster{followerCluster{leader: leader.node.Self(), peers: listenLoopback(t)}}
	// A LeaderWait far beyond ioTimeout: a parked request fails the test.
	addr := serveFollower(t, gateway.Config{LeaderWait: time.Hour, CutOffAfter: -1}, leader, fc)
	c := dialRaw(t, addr)

	mresp := c.do(metadataOf("cut")).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != 1 ||
		mresp.Topics[0].Partitions[0].ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("metadata from a cut-off node: %+v, want partition 0 LEADER_NOT_AVAILABLE", mresp.Topics)
	}

	presp := c.do(produceTo("cut")).(*kmsg.ProduceResponse)
	if len(presp.Topics) != 1 || len(presp.Topics[0].Partitions) != 1 ||
		presp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a cut-off node: %+v, want NOT_LEADER_OR_FOLLOWER", presp.Topics)
	}
}

// serveFollower serves a follower node of leader's cluster, whose view of
// the cluster is fc, with cfg; while fc knows no leader, neither does its
// backend.
func serveFollower(t *testing.T, cfg gateway.Config, leader *testNode, fc gateway.Cluster) string {
	t.Helper()
	return serveWith(t, cfg, followerBackend{leaderOf{leader.backend, fc}}, fc).Addr().String()
}

func metadataOf(topic string) *kmsg.MetadataRequest {
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &topic
	md.Topics = append(md.Topics, mt)
	return md
}

func produceTo(topic string) *kmsg.ProduceRequest {
	pr := kmsg.NewPtrProduceRequest()
	pr.Version = 7
	pr.Acks = -1
	pr.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pt.Partitions = append(pt.Partitions, kmsg.NewProduceRequestTopicPartition())
	pr.Topics = append(pr.Topics, pt)
	return pr
}

// expectReset asserts the server resets the connection: what it answered
// before arrives, then the reset, and no other answer.
func expectReset(t *testing.T, c *rawConn) {
	t.Helper()
	_, _, err := c.readFrame()
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a request needing a leader: %v, want the connection reset", err)
	}
}

// TestCutOffNodeResetsClients: a node that has known no leader for
// CutOffAfter resets the connection of a Metadata or FindCoordinator
// request instead of answering "no leader", so the client asks another
// node of its list at once rather than after its metadata backoff; what
// needs no leader (ApiVersions) is still answered, and answers before the
// reset arrive. A connection is never reset sooner than a quarter second
// after it opened, which bounds the reconnects of a client that retries
// without a backoff. Produce and Fetch are answered at once with
// NOT_LEADER_OR_FOLLOWER, which sends franz-go to refresh its metadata
// (a reset produce it retries on the same node).
func TestCutOffNodeResetsClients(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "cut", 1, nil)
	fc := cutOffCluster{followerCluster{leader: leader.node.Self(), peers: listenLoopback(t)}}
	groups := coordinator.New(coordinator.Config{Logger: slog.New(slog.DiscardHandler)}, leader.node, leader.fsm)
	// A LeaderWait far beyond ioTimeout: a parked request fails the test.
	addr := serveFollower(t, gateway.Config{LeaderWait: time.Hour, Groups: groups}, leader, fc)

	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "kgate-test", "1"
	fcReq := kmsg.NewPtrFindCoordinatorRequest()
	fcReq.Version = 3
	fcReq.CoordinatorKey = "g"
	for _, req := range []kmsg.Request{metadataOf("cut"), fcReq} {
		t.Run(kmsg.NameForKey(req.Key()), func(t *testing.T) {
			// Timed from before the dial: the node counts from its accept,
			// which can come before dialRaw returns.
			opened := time.Now()
			c := dialRaw(t, addr)
			if resp := c.do(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
				t.Fatalf("ApiVersions from a cut-off node: error %d", resp.ErrorCode)
			}
			// Pipelined: the answer before the reset still arrives.
			avCorr := c.send(av)
			c.send(req)
			if corr, _, err := c.readFrame(); err != nil || corr != avCorr {
				t.Fatalf("answer before the reset: correlation %d, %v; want %d", corr, err, avCorr)
			}
			expectReset(t, c)
			if open := time.Since(opened); open < 250*time.Millisecond {
				t.Fatalf("reset %v after the connection opened, want no sooner than 250ms", open)
			}
		})
	}

	c := dialRaw(t, addr)
	presp := c.do(produceTo("cut")).(*kmsg.ProduceResponse)
	if len(presp.Topics) != 1 || len(presp.Topics[0].Partitions) != 1 ||
		presp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a cut-off node: %+v, want NOT_LEADER_OR_FOLLOWER", presp.Topics)
	}
	fresp := c.do(fetchFrom("cut", 100)).(*kmsg.FetchResponse)
	if len(fresp.Topics) != 1 || len(fresp.Topics[0].Partitions) != 1 ||
		fresp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch from a cut-off node: %+v, want NOT_LEADER_OR_FOLLOWER", fresp.Topics)
	}
}

func fetchFrom(topic string, maxWaitMillis int32) *kmsg.FetchRequest {
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 11
	fetch.MaxWaitMillis = maxWaitMillis
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	return fetch
}

// lateLeaderCluster is a follower that lost its leader when it was made
// and learns of a new one at found (never, if found is zero).
type lateLeaderCluster struct {
	followerCluster
	lost, found time.Time
}

func (c lateLeaderCluster) known() bool { return !c.found.IsZero() && time.Now().After(c.found) }
func (c lateLeaderCluster) LeaderID() (int32, bool) {
	if c.known() {
		return c.followerCluster.LeaderID()
	}
	return 0, false
}
func (c lateLeaderCluster) ServingLeader() (cluster.NodeInfo, bool) {
	if c.known() {
		return c.followerCluster.ServingLeader()
	}
	return cluster.NodeInfo{}, false
}
func (c lateLeaderCluster) AwaitServingLeader(ctx context.Context) (cluster.NodeInfo, bool) {
	for {
		if info, ok := c.ServingLeader(); ok {
			return info, true
		}
		select {
		case <-ctx.Done():
			return cluster.NodeInfo{}, false
		case <-time.After(5 * time.Millisecond):
		}
	}
}
func (c lateLeaderCluster) AwaitFreshLeader(ctx context.Context) (cluster.NodeInfo, bool) {
	return c.AwaitServingLeader(ctx)
}
func (c lateLeaderCluster) LeaderlessFor() time.Duration {
	if c.known() {
		return 0
	}
	return time.Since(c.lost)
}

// TestLeaderlessFollowerWaitsThenAnswers: during an election shorter
// than CutOffAfter a follower holds Metadata for the winner and names it,
// as before (no reset); a follower whose wait runs past CutOffAfter resets
// the connection then, although it was leaderless for less than that when
// the request came.
func TestLeaderlessFollowerWaitsThenAnswers(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "late", 1, nil)
	base := followerCluster{leader: leader.node.Self(), peers: listenLoopback(t)}

	now := time.Now()
	elected := lateLeaderCluster{followerCluster: base, lost: now, found: now.Add(300 * time.Millisecond)}
	c := dialRaw(t, serveFollower(t, gateway.Config{LeaderWait: time.Hour, CutOffAfter: time.Hour}, leader, elected))
	resp := c.do(metadataOf("late")).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 ||
		resp.Topics[0].Partitions[0].Leader != leader.node.Self().ID {
		t.Fatalf("metadata after an election: %+v, want partition 0 led by node %d", resp.Topics, leader.node.Self().ID)
	}

	never := lateLeaderCluster{followerCluster: base, lost: time.Now()}
	c = dialRaw(t, serveFollower(t, gateway.Config{LeaderWait: time.Hour, CutOffAfter: 300 * time.Millisecond}, leader, never))
	c.send(metadataOf("late"))
	expectReset(t, c)
}

// deposedLeader is a node that stopped leading because a majority stopped
// answering it, a moment ago, and has heard of no leader since.
type deposedLeader struct{ lateLeaderCluster }

func (deposedLeader) CutOff() bool { return true }

// TestDeposedLeaderResetsClientsAtOnce: a leader deposed for want of a
// majority's answers (cluster.Node.CutOff) resets a Metadata request's
// connection at once, long before CutOffAfter, instead of holding it for
// an election it cannot hear of; its client asks another node.
func TestDeposedLeaderResetsClientsAtOnce(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "deposed", 1, nil)
	base := followerCluster{leader: leader.node.Self(), peers: listenLoopback(t)}
	deposed := deposedLeader{lateLeaderCluster{followerCluster: base, lost: time.Now()}}
	// CutOffAfter and LeaderWait far beyond ioTimeout: a parked request
	// fails the test.
	c := dialRaw(t, serveFollower(t, gateway.Config{LeaderWait: time.Hour, CutOffAfter: time.Hour}, leader, deposed))
	c.send(metadataOf("deposed"))
	expectReset(t, c)
}

// leaderOf is a backend whose partitions have no leader while its node
// knows none.
type leaderOf struct {
	gateway.Backend
	c gateway.Cluster
}

func (b leaderOf) PartitionLeader(topic string, p int32) (int32, bool) {
	if _, ok := b.c.LeaderID(); !ok {
		return noLeaderBackend{b.Backend}.PartitionLeader(topic, p)
	}
	return b.Backend.PartitionLeader(topic, p)
}

// noLeaderBackend reports every partition without a leader, as a node
// that knows of no Raft leader does.
type noLeaderBackend struct{ gateway.Backend }

func (noLeaderBackend) PartitionLeader(string, int32) (int32, bool) { return -1, true }

// fadingLeader is the real leader's node until lost, then a node that
// knows no leader (cut off from a majority that elected another).
type fadingLeader struct {
	*cluster.Node
	lost time.Time
}

func (c fadingLeader) gone() bool { return time.Now().After(c.lost) }
func (c fadingLeader) LeaderID() (int32, bool) {
	if c.gone() {
		return 0, false
	}
	return c.Node.LeaderID()
}
func (c fadingLeader) ServingLeader() (cluster.NodeInfo, bool) {
	if c.gone() {
		return cluster.NodeInfo{}, false
	}
	return c.Node.ServingLeader()
}
func (c fadingLeader) LeaderlessFor() time.Duration {
	if c.gone() {
		return time.Since(c.lost)
	}
	return 0
}

// TestCutOffEndsLongPoll: a fetch parked on the leader for new records
// (a long poll) ends when the node becomes cut off, answered
// NOT_LEADER_OR_FOLLOWER, rather than hold its client for the rest of its
// wait (franz-go's is 5 s).
func TestCutOffEndsLongPoll(t *testing.T) {
	leader := startNode(t, nil)
	createTopic(t, leader.addr, "poll", 1, nil)
	fc := fadingLeader{Node: leader.node, lost: time.Now().Add(500 * time.Millisecond)}
	srv := serveWith(t, gateway.Config{LeaderWait: time.Hour, CutOffAfter: 300 * time.Millisecond}, leaderOf{leader.backend, fc}, fc)

	c := dialRaw(t, srv.Addr().String())
	// A wait longer than the test's read deadline.
	resp := c.do(fetchFrom("poll", 30000)).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("long poll on a node that got cut off: %+v, want NOT_LEADER_OR_FOLLOWER", resp.Topics)
	}
}
