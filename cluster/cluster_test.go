package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/kgate/kgate/fsm"
)

// Three fresh nodes with bootstrap-expect 3 form one cluster: one leader,
// three voters, every node knows every broker, one cluster id, and data
// written on the leader is readable on every node.
func TestThreeNodesBootstrap(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	brokersAre(t, c.nodes, c.nodes)

	cid := leader.n.ClusterID()
	if cid == "" {
		t.Fatal("the leader serves without a cluster id")
	}
	for _, tn := range c.nodes {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d knows the cluster id", tn.id), func() error {
			if got := tn.n.ClusterID(); got != cid {
				return fmt.Errorf("cluster id %q, leader has %q", got, cid)
			}
			return nil
		})
	}
	// Every node names the same leader, and only that one serves as leader.
	for _, tn := range c.nodes {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d names the leader", tn.id), func() error {
			if id, ok := tn.n.LeaderID(); !ok || id != leader.id {
				return fmt.Errorf("leader id %d (known %v), want %d", id, ok, leader.id)
			}
			return nil
		})
	}
	if ls := servingLeaders(c.nodes); len(ls) != 1 || ls[0] != leader {
		t.Fatalf("%d nodes serve as leader", len(ls))
	}

	createTopic(t, c.nodes, "orders", 2)
	p := newProducer("orders", 1)
	p.produce(t, c.nodes, 5, 100)
	commitOffset(t, c.nodes, "billing", "orders", 0, 4)
	want := stateOf(leader, "billing")
	if want.Logs["orders/0"] != [2]int64{0, 10} {
		t.Fatalf("leader log bounds %v, want [0 10]", want.Logs["orders/0"])
	}
	converged(t, c.nodes, want, "billing")
	readyAll(t, c.nodes)
	for _, tn := range c.nodes {
		if got, lead := readAll(t, tn, "orders", 0), readAll(t, leader, "orders", 0); !equalBatches(got, lead) {
			t.Fatalf("node %d's record data differs from the leader's", tn.id)
		}
	}
}

func equalBatches(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// A graceful stop of the leader hands leadership to a follower; the stopped
// node stays a voter; the two others keep committing.
func TestLeaderShutdownHandsOver(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 10, 50)
	commitOffset(t, c.nodes, "g", "t", 0, 7)
	acked := stateOf(leader, "g")

	// The followers stop starting elections of their own: from here on only
	// a hand-over (Raft's TimeoutNow) can make one of them leader.
	// The leader's election timeout bounds each try of its hand-over
	// (hashicorp/raft); 250 ms could pass on a loaded machine before the
	// follower had caught up and answered, three tries in a row.
	for _, tn := range c.nodes {
		rc := tn.n.raft.ReloadableConfig()
		if tn != leader {
			rc.HeartbeatTimeout, rc.ElectionTimeout = time.Hour, time.Hour
		} else {
			rc.ElectionTimeout = 5 * time.Second
		}
		if err := tn.n.raft.ReloadConfig(rc); err != nil {
			t.Fatalf("node %d: %v", tn.id, err)
		}
	}
	began := time.Now()
	leader.stop(t)
	rest := c.running()
	next := leaderAmong(t, rest)
	t.Logf("leadership hand-over on graceful shutdown: %v (node %d -> node %d)", time.Since(began), leader.id, next.id)
	// Back to the usual timeouts: a leader heartbeats every tenth of its
	// heartbeat timeout, so one of an hour would leave its follower, and
	// its own lease, without word from the other for minutes.
	for _, tn := range rest {
		rc := tn.n.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = 250*time.Millisecond, 250*time.Millisecond
		if err := tn.n.raft.ReloadConfig(rc); err != nil {
			t.Fatalf("node %d: %v", tn.id, err)
		}
	}

	if got := stateOf(next, "g"); !equalState(got, acked) {
		t.Fatalf("new leader lacks acknowledged writes: %+v, want %+v", got, acked)
	}
	p.produce(t, rest, 5, 50)
	convergedOnLeader(t, rest, "g")
	votersAre(t, rest, c.nodes)
}

func equalState(a, b nodeState) bool { return reflect.DeepEqual(a, b) }

// A crashed leader (no hand-over, no gossip leave) is replaced by an
// election among the two others; every acknowledged write survives; the
// cluster keeps committing with 2 of 3; the dead node stays a voter.
func TestLeaderCrash(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 20, 50)
	commitOffset(t, c.nodes, "g", "t", 0, 11)
	acked := stateOf(leader, "g")

	began := time.Now()
	leader.crash(t)
	rest := c.running()
	next := leaderAmong(t, rest)
	t.Logf("leader re-election after a crash: %v (node %d -> node %d)", time.Since(began), leader.id, next.id)

	if got := stateOf(next, "g"); !equalState(got, acked) {
		t.Fatalf("new leader lacks acknowledged writes: %+v, want %+v", got, acked)
	}
	p.produce(t, rest, 5, 50)
	commitOffset(t, rest, "g", "t", 0, 15)
	convergedOnLeader(t, rest, "g")

	// Gossip declares the crashed node failed; the leader's reconcile pass
	// keeps it a voter (it is not reaped before --dead-node-reap-after).
	for _, tn := range rest {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d sees node %d failed", tn.id, leader.id), func() error {
			m, ok := memberState(tn, leader.id)
			if !ok || m.GossipState != "failed" {
				return fmt.Errorf("member %+v (known %v)", m, ok)
			}
			if !m.Voter {
				return errors.New("no longer a voter")
			}
			return nil
		})
	}
	next.n.reconcile(t.Context())
	votersAre(t, rest, c.nodes)
	brokersAre(t, rest, rest)
}

// A follower back from a long cut is sent its entries at once, so that
// the leader can lose its other follower right after the heal and still
// commit within seconds. hashicorp/raft waits up to 10 s before it tries
// again a follower that failed many times in a row (5.7 s after a 15 s cut
// here); in the fault campaign a follower killed 3 s after another's 11 s
// cut had healed stopped every commit for the 9 s it was down.
func TestFollowerBackFromACutIsCaughtUpAtOnce(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	cut := anyFollower(t, c.nodes, leader)
	other := without(c.nodes, leader, cut)[0]
	p := newProducer("t", 1)

	// Raft's attempts at the cut follower fail all along, and its wait
	// between attempts grows. About 200 batches a second: few enough that
	// the follower needs no snapshot after the cut.
	streamOf(t, cut.raftAddr).setCut(true)
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	for until := time.Now().Add(15 * time.Second); time.Now().Before(until); <-pace.C {
		p.produce(t, []*testNode{leader}, 1, 100)
	}
	healed := time.Now()
	streamOf(t, cut.raftAddr).setCut(false)
	// Heartbeats reach it again at once (their backoff stops at half the
	// heartbeat timeout); the entries are what may wait.
	eventually(t, 5*time.Second, "the cut follower hears from the leader again", func() error {
		if !cut.n.raft.LastContact().After(healed) {
			return errors.New("no word from the leader since the heal")
		}
		return nil
	})
	other.crash(t)

	p.now++
	cmd := fsm.EncodeAppend(&fsm.Append{NowMs: p.now, Batches: []fsm.Batch{{
		Topic: "t", Data: fakeBatch(1, p.now, []byte("after the heal")), MaxTimestamp: p.now, ProducerID: -1, BaseSequence: -1,
	}}})
	began := time.Now()
	_, err := leader.n.Propose(context.Background(), cmd, false)
	took := time.Since(began)
	if err != nil || took > 3*time.Second {
		t.Fatalf("with the other follower down, the leader and the follower back from the cut committed after %v (err %v), want within 3 s", took, err)
	}
	t.Logf("committed %v after the other follower's crash", took)
}

// A crashed follower restarted on its data dir catches up with what was
// written while it was down, and is the same single voter as before.
func TestFollowerRestartCatchesUp(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 10, 50)
	converged(t, c.nodes, stateOf(leader, "g"), "g")

	// Not the seed: the others' join list names only the seed, so a
	// restarted seed is found again only by their periodic rejoin
	// (TestRestartedSeedIsFoundAgain).
	f := anyFollower(t, c.nodes[1:], leader)
	f.crash(t)
	rest := c.running()
	p.produce(t, rest, 15, 50)
	createTopic(t, rest, "while-down", 3)
	commitOffset(t, rest, "g", "t", 0, 30)

	f.start(t)
	want := stateOf(leaderAmong(t, rest), "g")
	converged(t, c.nodes, want, "g")
	readyAll(t, c.nodes)
	votersAre(t, c.nodes, c.nodes) // exactly three voters, no duplicate
	brokersAre(t, c.nodes, c.nodes)
	if !equalBatches(readAll(t, f, "t", 0), readAll(t, leaderAmong(t, c.nodes), "t", 0)) {
		t.Fatal("restarted follower's record data differs from the leader's")
	}
	// It takes part again: a write now reaches it.
	p.produce(t, c.nodes, 1, 50)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
}

// A follower behind the leader's compacted log catches up by snapshot, and
// its record data arrives with it.
func TestFarBehindFollowerCatchesUpBySnapshot(t *testing.T) {
	c, leader, p := compactingCluster(t)
	converged(t, c.nodes, stateOf(leader, "g"), "g")

	// The follower has a checkpoint of its own (at 5 batches) that the
	// leader's snapshot must replace.
	f := anyFollower(t, c.nodes, leader)
	if err := f.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("follower snapshot: %v", err)
	}
	f.stop(t)
	rest := c.running()
	p.produce(t, rest, 120, 300)
	commitOffset(t, rest, "g", "t", 0, 200)
	leader = leaderAmong(t, rest)
	// Raft checks its snapshot threshold only every SnapshotInterval
	// (minutes); take the snapshot now so the log is compacted.
	if err := leader.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	first, err := leader.n.store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first < 20 {
		t.Fatalf("leader's log starts at %d: not compacted", first)
	}

	leaderSnap, err := strconv.ParseUint(leader.n.raft.Stats()["last_snapshot_index"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	f.start(t)
	want := stateOf(leader, "g")
	converged(t, c.nodes, want, "g")
	readyAll(t, c.nodes)
	// Raft records the installed snapshot just after the FSM restored it.
	eventually(t, 20*time.Second, "the follower installed the leader's snapshot", func() error {
		if snap, _ := strconv.ParseUint(f.n.raft.Stats()["last_snapshot_index"], 10, 64); snap < leaderSnap {
			return fmt.Errorf("its last snapshot is at %d, the leader's at %d", snap, leaderSnap)
		}
		return nil
	})
	got, lead := readAll(t, f, "t", 0), readAll(t, leader, "t", 0)
	if len(lead) != 125 || !equalBatches(got, lead) {
		t.Fatalf("follower has %d batches, leader %d; equal: %v", len(got), len(lead), equalBatches(got, lead))
	}
	// And it keeps following after the snapshot.
	p.produce(t, c.nodes, 3, 300)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
}

// A leader whose Raft network is cut loses leadership to the two others,
// which keep committing; what it accepted while cut is never acknowledged
// and never appears; once the network is back it converges.
func TestRaftNetworkCut(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 10, 50)
	converged(t, c.nodes, stateOf(old, "g"), "g")

	streamOf(t, old.raftAddr).setCut(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := old.n.Propose(ctx, fsm.Encode(&fsm.CreateTopic{Name: "lost", Partitions: 1}), true)
	cancel()
	if err == nil {
		t.Fatal("a leader cut off from its followers acknowledged a write")
	}

	majority := without(c.nodes, old)
	next := leaderAmong(t, majority)
	p.produce(t, majority, 10, 50)
	commitOffset(t, majority, "g", "t", 0, 20)
	stopsLeading(t, old)

	streamOf(t, old.raftAddr).setCut(false)
	leader := leaderAmong(t, c.nodes)
	want := stateOf(leader, "g")
	converged(t, c.nodes, want, "g")
	if old.f.Topic("lost") != nil {
		t.Fatal("a write the cut-off leader never got acknowledged appeared")
	}
	if !equalBatches(readAll(t, old, "t", 0), readAll(t, next, "t", 0)) {
		t.Fatal("record data differs after the cut healed")
	}
	votersAre(t, c.nodes, c.nodes)
	p.produce(t, c.nodes, 2, 50)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
}

// A fourth node joining through a follower's gossip address becomes a
// voter, a broker on every node, and receives the data.
func TestFourthNodeJoinsThroughFollower(t *testing.T) {
	for _, expect := range []int{1, 3} {
		t.Run("bootstrap-expect="+strconv.Itoa(expect), func(t *testing.T) {
			c := newCluster(t, 3, nil)
			leader := leaderAmong(t, c.nodes)
			votersAre(t, c.nodes, c.nodes)
			createTopic(t, c.nodes, "t", 1)
			p := newProducer("t", 1)
			p.produce(t, c.nodes, 10, 100)
			commitOffset(t, c.nodes, "g", "t", 0, 9)

			f := anyFollower(t, c.nodes, leader)
			fourth := c.newNode(4, []string{f.gossipAddr}, expect, nil)
			fourth.start(t)
			votersAre(t, c.nodes, c.nodes)
			brokersAre(t, c.nodes, c.nodes)
			converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
			readyAll(t, c.nodes)
			if fourth.n.ClusterID() != leader.n.ClusterID() {
				t.Fatalf("cluster id %q, want %q", fourth.n.ClusterID(), leader.n.ClusterID())
			}
			if fourth.log().contains("bootstrapped") {
				t.Fatal("the joining node bootstrapped a cluster of its own")
			}
			p.produce(t, c.nodes, 2, 100)
			converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
		})
	}
}

// A follower that leaves gracefully is removed from the voters and shown as
// left; the two others still commit.
func TestGracefulLeave(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 5, 50)

	f := anyFollower(t, c.nodes, leader)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.n.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	rest := without(c.nodes, f)
	votersAre(t, rest, rest)
	for _, tn := range rest {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d reports node %d left", tn.id, f.id), func() error {
			m, ok := memberState(tn, f.id)
			if !ok || m.GossipState != "left" || m.Voter {
				return fmt.Errorf("member %+v (known %v)", m, ok)
			}
			return nil
		})
	}
	brokersAre(t, rest, rest)
	f.stop(t)

	p.produce(t, rest, 5, 50)
	commitOffset(t, rest, "g", "t", 0, 10)
	converged(t, rest, stateOf(leaderAmong(t, rest), "g"), "g")
	votersAre(t, rest, rest)
}

// Stopping all three nodes and starting them again on their data dirs
// brings back the same cluster: same id and voters, all data and offsets,
// and no node bootstraps again.
func TestFullRestart(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "a", 2)
	createTopic(t, c.nodes, "b", 1)
	pa, pb := newProducer("a", 1), newProducer("b", 2)
	pa.produce(t, c.nodes, 12, 100)
	pb.produce(t, c.nodes, 7, 100)
	commitOffset(t, c.nodes, "g", "a", 0, 20)
	commitOffset(t, c.nodes, "g", "b", 0, 5)
	want := stateOf(leader, "g")
	converged(t, c.nodes, want, "g")
	data := readAll(t, leader, "a", 0)
	cid := leader.n.ClusterID()

	for _, tn := range c.nodes {
		tn.stop(t)
	}
	for _, tn := range c.nodes {
		tn.start(t)
	}
	leader = leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	converged(t, c.nodes, want, "g")
	readyAll(t, c.nodes)
	for _, tn := range c.nodes {
		if tn.n.ClusterID() != cid {
			t.Fatalf("node %d: cluster id %q after restart, was %q", tn.id, tn.n.ClusterID(), cid)
		}
		if !equalBatches(readAll(t, tn, "a", 0), data) {
			t.Fatalf("node %d: record data changed across the restart", tn.id)
		}
		if tn.log().contains("bootstrapped") {
			t.Fatalf("node %d bootstrapped again after a restart", tn.id)
		}
	}
	brokersAre(t, c.nodes, c.nodes)
	pa.produce(t, c.nodes, 1, 100)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
}

// A node holding another cluster's data is refused by gossip: it never
// becomes a broker or voter of this cluster, and its log says why.
func TestNodeOfAnotherClusterRefused(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "ours", 1)
	three := append([]*testNode(nil), c.nodes...)

	// A separate single-node cluster, with data of its own.
	other := c.newNode(9, nil, 1, nil)
	other.start(t)
	leaderAmong(t, []*testNode{other})
	eventually(t, 20*time.Second, "the other cluster has an id", func() error {
		if other.n.ClusterID() == "" {
			return errors.New("no cluster id")
		}
		return nil
	})
	createTopic(t, []*testNode{other}, "theirs", 1)
	otherID := other.n.ClusterID()
	if otherID == leader.n.ClusterID() {
		t.Fatal("two clusters share an id")
	}
	other.stop(t)

	// Restarted pointing at the three-node cluster.
	other.join = []string{c.nodes[0].gossipAddr}
	other.start(t)
	eventually(t, 20*time.Second, "the foreign node logs the refusal", func() error {
		if !other.log().contains("refusing a node of another cluster") {
			return errors.New("no refusal in its log")
		}
		return nil
	})
	// The seed it contacted refuses it too; the other two never hear of it.
	eventually(t, 20*time.Second, "the seed logs the refusal", func() error {
		if !c.nodes[0].log().contains("refusing a node of another cluster") {
			return errors.New("no refusal in its log")
		}
		return nil
	})
	leaderAmong(t, three).n.reconcile(t.Context())
	votersAre(t, three, three)
	brokersAre(t, three, three)
	for _, tn := range three {
		if m, ok := memberState(tn, other.id); ok {
			t.Fatalf("node %d lists the foreign node as a member: %+v", tn.id, m)
		}
	}
	brokersAre(t, []*testNode{other}, []*testNode{other})
	if got := voterIDs(other); len(got) != 1 || got[0] != other.id {
		t.Fatalf("foreign node's voters changed: %v", got)
	}
	eventually(t, 20*time.Second, "the foreign node keeps its cluster id", func() error {
		if got := other.n.ClusterID(); got != otherID {
			return fmt.Errorf("cluster id %q, want %q", got, otherID)
		}
		return nil
	})
	if other.f.Topic("ours") != nil {
		t.Fatal("foreign node received this cluster's data")
	}
}

// A node of another cluster that gossip passed on before it had a cluster
// id (a third party's view, taken while that node was bootstrapping) is
// asked directly and forgotten: it is never listed as a broker, though its
// own later updates are refused as foreign and never replace what was heard.
func TestForeignNodeHeardBeforeItsClusterIsForgotten(t *testing.T) {
	c := newCluster(t, 0, nil)
	ours := c.newNode(1, nil, 1, nil)
	ours.start(t)
	leaderAmong(t, []*testNode{ours})
	other := c.newNode(9, nil, 1, nil)
	other.start(t)
	leaderAmong(t, []*testNode{other})
	for _, tn := range []*testNode{ours, other} {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d has a cluster id", tn.id), func() error {
			if tn.n.ClusterID() == "" {
				return errors.New("no cluster id")
			}
			return nil
		})
	}
	if ours.n.ClusterID() == other.n.ClusterID() {
		t.Fatal("two clusters share an id")
	}

	// What a third party would have passed on: node 9 with Raft state and
	// no cluster id yet, alive.
	g := ours.n.gossip
	g.mu.Lock()
	g.members[nodeName(other.id)] = &member{
		meta:       nodeMeta{ID: other.id, KafkaAddr: other.kafkaAddr, RaftAddr: other.raftAddr, HasState: true, Level: ours.n.maxLevel()},
		gossipAddr: other.gossipAddr, state: memberlist.StateAlive, since: time.Now(),
	}
	g.mu.Unlock()

	brokersAre(t, []*testNode{ours}, []*testNode{ours})
	if !ours.log().contains("refusing a node of another cluster") {
		t.Fatal("no refusal in the log")
	}
	if got := voterIDs(ours); len(got) != 1 || got[0] != ours.id {
		t.Fatalf("voters %v, want only node %d", got, ours.id)
	}
}

// Every node joins through the seed (node 1), so a restarted seed, whose
// own join list names only itself, is found again by the others' periodic
// rejoin of their seed list.
func TestRestartedSeedIsFoundAgain(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.RejoinInterval = time.Second })
	leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	brokersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)

	seed := c.nodes[0]
	seed.crash(t)
	rest := c.running()
	for _, tn := range rest {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d sees the seed failed", tn.id), func() error {
			if m, _ := memberState(tn, seed.id); m.GossipState != "failed" {
				return fmt.Errorf("seed is %q", m.GossipState)
			}
			return nil
		})
	}
	brokersAre(t, rest, rest)
	createTopic(t, rest, "while-down", 1)

	seed.start(t)
	brokersAre(t, c.nodes, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes)))
	readyAll(t, c.nodes)
}

// clusterWhoseSeedLeft starts nodes 1-3 (2 and 3 join through node 1) and
// node 4 (joining through node 2), has the seed, node 1, leave and stop,
// and waits until node 3's peers file names nodes 2 and 4.
func clusterWhoseSeedLeft(t *testing.T) (c *testCluster, seed, second, third, fourth *testNode) {
	t.Helper()
	c = newCluster(t, 3, nil)
	leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	seed, second, third = c.nodes[0], c.nodes[1], c.nodes[2]
	fourth = c.newNode(4, []string{second.gossipAddr}, 1, nil)
	fourth.start(t)
	votersAre(t, c.nodes, c.nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := seed.n.Leave(ctx); err != nil {
		t.Fatalf("the seed's leave: %v", err)
	}
	seed.stop(t)
	rest := []*testNode{second, third, fourth}
	votersAre(t, rest, rest)
	want := []savedPeer{{ID: second.id, Addr: second.gossipAddr}, {ID: fourth.id, Addr: fourth.gossipAddr}}
	eventually(t, 20*time.Second, "node 3 saves the gossip addresses of nodes 2 and 4", func() error {
		if ps := readPeers(third.dir); !reflect.DeepEqual(ps, want) {
			return fmt.Errorf("saved %+v, want %+v", ps, want)
		}
		return nil
	})
	return c, seed, second, third, fourth
}

// A node whose --join seed has left finds the cluster again when it starts
// again, through the nodes it knew (the peers file), though no other node
// reaches out to it. (The fault campaign: a node that had joined through a
// node gone since was killed and started again; alone in gossip for 36 s,
// it followed the Raft leader but named no broker, and a producer that
// asked it waited 41 s.)
func TestRestartedNodeWhoseSeedLeftFindsTheClusterAgain(t *testing.T) {
	_, _, second, third, fourth := clusterWhoseSeedLeft(t)
	rest := []*testNode{second, third, fourth}

	// Node 3 crashes and starts again, and nothing the others send reaches
	// it: only its own dials can bring it back.
	third.crash(t)
	testDeaf.Store(third.gossipAddr, struct{}{})
	t.Cleanup(func() { testDeaf.Delete(third.gossipAddr) })
	third.start(t)
	eventually(t, 20*time.Second, "node 3's gossip knows nodes 2 and 4 again", func() error {
		for _, id := range []int32{second.id, fourth.id} {
			if m, _ := memberState(third, id); m.GossipState == "" || m.GossipState == "unknown" {
				return fmt.Errorf("node %d unknown to gossip", id)
			}
		}
		return nil
	})
	testDeaf.Delete(third.gossipAddr)
	brokersAre(t, rest, rest)
	votersAre(t, rest, rest)
	readyAll(t, rest)
}

// A node started again whose seeds reach only a node outside the cluster
// (a fresh node, as a churn brings, that dialled it first) is not alone in
// gossip, so it never fell back on its peers file: it followed the Raft
// leader but knew no other voter in gossip until another node's periodic
// sync found it (the fault campaign: 38 s). It now asks the voters of its
// Raft configuration that gossip does not know at the addresses it saved,
// and keeps those addresses saved while gossip has not found them.
func TestRestartedNodeNotAloneStillFindsItsVoters(t *testing.T) {
	c, seed, second, third, fourth := clusterWhoseSeedLeft(t)
	want := []savedPeer{{ID: second.id, Addr: second.gossipAddr}, {ID: fourth.id, Addr: fourth.gossipAddr}}

	// A fresh node waits for a cluster; node 3 crashes and starts again
	// with it among its seeds, and nothing the cluster sends reaches node 3.
	fresh := c.newNode(5, nil, 3, nil)
	fresh.start(t)
	third.crash(t)
	third.join = []string{seed.gossipAddr, fresh.gossipAddr}
	testDeaf.Store(third.gossipAddr, struct{}{})
	t.Cleanup(func() { testDeaf.Delete(third.gossipAddr) })
	third.start(t)
	eventually(t, 10*time.Second, "node 3's gossip knows the fresh node", func() error {
		if m, _ := memberState(third, fresh.id); m.GossipState != "alive" {
			return fmt.Errorf("node %d is %q", fresh.id, m.GossipState)
		}
		return nil
	})
	eventually(t, 20*time.Second, "node 3's gossip knows nodes 2 and 4 again", func() error {
		for _, id := range []int32{second.id, fourth.id} {
			if m, _ := memberState(third, id); m.GossipState != "alive" {
				return fmt.Errorf("node %d is %q to node 3's gossip", id, m.GossipState)
			}
		}
		return nil
	})
	if ps := readPeers(third.dir); !reflect.DeepEqual(ps[:min(2, len(ps))], want) {
		t.Fatalf("node 3's peers file lists %+v, want nodes 2 and 4 first", ps)
	}
}

// TestFreshLeaderNeverNamesASilentLeader: a follower asked for the leader
// right after the leader fell silent — before the follower can tell, its
// last word from the leader being a heartbeat ago — does not name it: it
// waits for word newer than the question, which here only the leader the
// two others elect gives. (A client whose connection to a dying leader
// broke asks a follower within milliseconds; named the dead leader again,
// franz-go keeps that answer for its 5 s metadata interval.)
func TestFreshLeaderNeverNamesASilentLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := leaderAmong(t, c.nodes)
	f := anyFollower(t, c.nodes, old)

	streamOf(t, old.raftAddr).setStalled(true)
	// What the old leader wrote just before the stall can still reach f
	// after it: ask once f has heard nothing for more than two heartbeat
	// intervals (the harness's leader sends one every 25 ms), so that the
	// old leader's last word comes before the question.
	awaitSilence(t, f, old.id, 60*time.Millisecond)
	asked := time.Now()
	stale, _ := f.n.ServingLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, ok := f.n.AwaitFreshLeader(ctx)
	t.Logf("ServingLeader right after the stall: node %d; AwaitFreshLeader: node %d after %v", stale.ID, info.ID, time.Since(asked))
	if !ok {
		t.Fatal("no leader named within 20 s")
	}
	if info.ID == old.id {
		t.Fatalf("node %d named node %d, which had fallen silent before it was asked", f.id, old.id)
	}
	if !f.n.raft.LastContact().After(asked) && info.ID != f.id {
		t.Fatal("named a leader without word from it since it was asked")
	}

	// Once the old leader is heard again it follows; a follower of a
	// leader that speaks answers within a few heartbeats.
	streamOf(t, old.raftAddr).setStalled(false)
	leader := leaderAmong(t, c.nodes)
	follower := anyFollower(t, c.nodes, leader)
	start := time.Now()
	got, ok := follower.n.AwaitFreshLeader(ctx)
	if !ok || got.ID != leader.id {
		t.Fatalf("follower %d named %d (%v), want the leader %d", follower.id, got.ID, ok, leader.id)
	}
	t.Logf("a follower of a live leader answered after %v", time.Since(start))
}

// awaitSilence waits until tn has heard nothing from its leader for quiet,
// or follows a leader other than was.
func awaitSilence(t *testing.T, tn *testNode, was int32, quiet time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Since(tn.n.raft.LastContact()) < quiet {
		if _, id := tn.n.raft.LeaderWithID(); id != "" && string(id) != fmt.Sprint(was) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d kept hearing from its leader for 10 s after the stall", tn.id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Two of three nodes lost for good: the survivor, restarted with a
// peers.json naming only itself (docs/operations.md), leads alone with every
// acknowledged write and takes new ones.
func TestRecoverFromPeersFile(t *testing.T) {
	c := newCluster(t, 3, nil)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	p := newProducer("t", 1)
	p.produce(t, c.nodes, 20, 300)
	commitOffset(t, c.nodes, "g", "t", 0, 11)
	converged(t, c.nodes, stateOf(leaderAmong(t, c.nodes), "g"), "g")
	survivor := c.nodes[2]
	acked := stateOf(survivor, "g")
	for _, tn := range c.nodes {
		tn.crash(t)
	}

	peers := fmt.Sprintf(`[{"id": "%d", "address": %q, "non_voter": false}]`, survivor.id, survivor.raftAddr)
	if err := os.WriteFile(filepath.Join(survivor.dir, "raft", "peers.json"), []byte(peers), 0o644); err != nil {
		t.Fatal(err)
	}
	survivor.start(t)
	alone := []*testNode{survivor}
	leaderAmong(t, alone)
	if got := stateOf(survivor, "g"); !equalState(got, acked) {
		t.Fatalf("recovered node: %+v, want %+v", got, acked)
	}
	p.produce(t, alone, 5, 300)
	if got := len(readAll(t, survivor, "t", 0)); got != 25 {
		t.Fatalf("recovered node has %d batches, want 25", got)
	}
}

// isolateGossip cuts tn off gossip and waits until every node of others
// holds it failed, as the far side of a partition does until gossip calls
// it alive again.
func isolateGossip(t *testing.T, tn *testNode, others []*testNode) {
	t.Helper()
	gossipOf(t, tn).isolated.Store(true)
	for _, o := range others {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d holds node %d failed", o.id, tn.id), func() error {
			if m, _ := memberState(o, tn.id); m.GossipState != "failed" {
				return fmt.Errorf("gossip state %q", m.GossipState)
			}
			return nil
		})
	}
}

// The leader of five leaves while the others' gossip still holds it failed
// (as after a partition, before gossip calls the cut-off node alive again):
// memberlist ignores the leave of a node it holds dead, so the new leader
// must learn of it another way. The leave returns once the new leader has
// removed it, and no node counts it as a voter afterwards.
func TestLeaveWhileGossipHoldsTheLeaverFailed(t *testing.T) {
	c := newCluster(t, 5, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	rest := without(c.nodes, leader)
	isolateGossip(t, leader, rest)

	left := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		left <- leader.n.Leave(ctx)
	}()
	// Gossip heals only once the leave has been announced into the cut
	// (its broadcasts lost), and is still slow to call the leaver alive.
	var err error
	returned, dials := false, int64(-1)
	eventually(t, 20*time.Second, "the leave announced while cut off", func() error {
		select {
		case err = <-left:
			returned = true
			return nil
		default:
		}
		switch {
		case !leader.n.leaving.Load():
			return errors.New("not leaving yet")
		case dials < 0:
			dials = gossipOf(t, leader).blockedDials.Load()
			return errors.New("leaving")
		case gossipOf(t, leader).blockedDials.Load() == dials:
			return errors.New("no dial into the cut since it announced the leave")
		}
		return nil
	})
	gossipOf(t, leader).isolated.Store(false)
	if !returned {
		err = <-left
	}
	if err != nil {
		t.Fatalf("leave: %v", err)
	}
	votersAre(t, rest, rest)
	leaderAmong(t, rest)
	createTopic(t, rest, "t", 1)
	newProducer("t", 1).produce(t, rest, 3, 50)
}

// A follower that cannot tell any leader of its leave (cut off gossip)
// fails the leave with a clear error and stays a voter. It stays marked as
// leaving: once gossip heals, the leader removes it without another call,
// and a second leave succeeds.
func TestLeaveFailsUntilTheLeaderHears(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	var f *testNode
	for _, tn := range c.nodes {
		if tn != leader && tn.id != 1 { // node 1 is the seed the others rejoin through
			f = tn
			break
		}
	}
	rest := without(c.nodes, f)
	isolateGossip(t, f, rest)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := f.n.Leave(ctx)
	if err == nil || !strings.Contains(err.Error(), "still a voter") {
		t.Fatalf("leave while cut off: %v, want an error saying it is still a voter", err)
	}
	votersAre(t, c.nodes, c.nodes)

	gossipOf(t, f).isolated.Store(false)
	votersAre(t, rest, rest)
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.n.Leave(ctx); err != nil {
		t.Fatalf("second leave: %v", err)
	}
	for _, tn := range rest {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d reports node %d left", tn.id, f.id), func() error {
			if m, _ := memberState(tn, f.id); m.GossipState != "left" || m.Voter {
				return fmt.Errorf("member %+v", m)
			}
			return nil
		})
	}
}

// suffrageOf is node id's place in tn's Raft configuration.
func suffrageOf(tn *testNode, id int32) string {
	m, _ := memberState(tn, id)
	return m.Suffrage
}

// A node joins as a non-voter and is promoted once it has caught up; one
// whose Raft link is down never catches up, stays a non-voter, and the
// cluster commits all along (as a voter right away it would have been a
// second voter of two, unreachable: no quorum). Once its link is up it
// catches up and becomes a voter.
func TestJoinAsNonVoterUntilCaughtUp(t *testing.T) {
	for _, size := range []int{1, 3} {
		t.Run("cluster-of-"+strconv.Itoa(size), func(t *testing.T) {
			var c *testCluster
			if size == 1 { // a single node bootstraps alone, joining no one
				c = &testCluster{t: t, used: map[string]bool{}}
				t.Cleanup(func() {
					if t.Failed() {
						c.dumpLogs()
					}
				})
				c.newNode(1, nil, 1, nil).start(t)
			} else {
				c = newCluster(t, size, nil)
			}
			leader := leaderAmong(t, c.nodes)
			votersAre(t, c.nodes, c.nodes)
			createTopic(t, c.nodes, "t", 1)
			p := newProducer("t", 1)
			p.produce(t, c.nodes, 5, 50)

			newcomer := c.newNode(int32(size+1), []string{leader.gossipAddr}, 1, nil)
			testStartCut.Store(newcomer.raftAddr, true)
			newcomer.start(t)
			eventually(t, 20*time.Second, "the leader adds the newcomer as a non-voter", func() error {
				if s := suffrageOf(leader, newcomer.id); s != "nonvoter" {
					return fmt.Errorf("suffrage %q", s)
				}
				return nil
			})
			// Every check finds it behind (it holds nothing), so it is never
			// promoted; a longer cut would only lengthen Raft's back-off
			// before it retries the newcomer.
			behind := func() (sum int64) {
				for _, tn := range c.nodes[:size] {
					sum += tn.n.behindChecks.Load()
				}
				return sum
			}
			before := behind()
			eventually(t, 30*time.Second, "the leader finds the newcomer behind three times", func() error {
				if got := behind() - before; got < 3 {
					return fmt.Errorf("%d checks", got)
				}
				return nil
			})
			if s := suffrageOf(leaderAmong(t, c.nodes[:size]), newcomer.id); s != "nonvoter" {
				t.Fatalf("a newcomer that never caught up: suffrage %q, want nonvoter", s)
			}
			if nv := leaderAmong(t, c.nodes[:size]).n.NonVoters(); len(nv) != 1 || nv[0].ID != newcomer.id {
				t.Fatalf("non-voters %+v, want the newcomer alone", nv)
			}
			old := c.nodes[:size]
			votersAre(t, old, old)
			p.produce(t, old, 5, 50) // the quorum is the old voters'

			streamOf(t, newcomer.raftAddr).setCut(false)
			all := c.nodes
			votersAre(t, all, all)
			converged(t, all, stateOf(leaderAmong(t, all)))
			for _, tn := range all {
				if s := suffrageOf(tn, newcomer.id); s != "voter" {
					t.Fatalf("node %d reports the newcomer as %q", tn.id, s)
				}
				if nv := tn.n.NonVoters(); len(nv) != 0 {
					t.Fatalf("node %d still lists non-voters %+v", tn.id, nv)
				}
			}
		})
	}
}

// A node leaves a cluster whose leader runs a release from before the
// leader's answer (a rolling upgrade): it leaves by gossip alone, as that
// release expects, and is removed.
func TestLeaveUnderAnOlderLeader(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.pushBareMeta = true })
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	f := c.nodes[1] // not node 1, the seed: restarted, it would learn of the others only when they rejoin
	if f == leader {
		f = c.nodes[2]
	}
	f.stop(t)
	f.tune = nil // this one runs the new release
	f.start(t)
	readyAll(t, c.nodes)
	eventually(t, 20*time.Second, "an older node leads", func() error {
		if leaderAmong(t, c.nodes) == f {
			f.n.transferLeadership()
			return errors.New("the upgraded node leads")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.n.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	rest := without(c.nodes, f)
	votersAre(t, rest, rest)
	if !f.log().contains("the leader runs an older kgate") {
		t.Fatal("the leaving node did not fall back to a gossip leave")
	}
}

// A node of a release from before the progress report joins (as going
// back to that release does, one node at a time): it reports no progress,
// so the leader makes it a voter at once, as that release's leaders did.
func TestOlderNodeJoinsAsVoter(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	older := c.newNode(4, []string{leader.gossipAddr}, 1, func(cfg *Config) { cfg.pushBareMeta = true })
	older.start(t)
	votersAre(t, c.nodes, c.nodes)
	for _, tn := range c.nodes {
		if tn.log().contains("promoting a non-voter of an older kgate") {
			return
		}
	}
	t.Fatal("no node's log shows the older node promoted for its release")
}

// A node cut off gossip until the others hold it failed is called alive
// again once the cut heals, without the next rejoin of the seeds (an hour
// away here): every node asks the failed servers of the Raft
// configuration directly (reviveFailedServers). Until then Metadata would
// leave it out of the brokers.
func TestFailedServerCalledAliveAfterTheCutHeals(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.RejoinInterval = time.Hour })
	leader := leaderAmong(t, c.nodes)
	f := anyFollower(t, c.nodes, leader)
	isolateGossip(t, f, without(c.nodes, f))
	gossipOf(t, f).isolated.Store(false)
	for _, o := range c.nodes {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d sees every node alive", o.id), func() error {
			for _, p := range c.nodes {
				if p == o {
					continue
				}
				if m, _ := memberState(o, p.id); m.GossipState != "alive" {
					return fmt.Errorf("node %d: gossip state %q", p.id, m.GossipState)
				}
			}
			return nil
		})
	}
}

// While gossip holds the leader failed but Raft is in contact with it (a
// leader elected just as a partition healed), the followers still list it
// among the brokers and name it as the serving leader.
func TestLeaderListedWhileGossipHoldsItFailed(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.RejoinInterval = time.Hour })
	leader := leaderAmong(t, c.nodes)
	rest := without(c.nodes, leader)
	isolateGossip(t, leader, rest)
	for _, o := range rest {
		eventually(t, 10*time.Second, fmt.Sprintf("node %d names leader %d", o.id, leader.id), func() error {
			info, ok := o.n.ServingLeader()
			if !ok || info.ID != leader.id {
				return fmt.Errorf("serving leader %+v, %v", info, ok)
			}
			for _, b := range o.n.Brokers() {
				if b.ID == leader.id {
					return nil
				}
			}
			return fmt.Errorf("brokers %+v lack the leader", o.n.Brokers())
		})
	}
	gossipOf(t, leader).isolated.Store(false)
}

// A leader cut off from the others (a black hole: its Raft stalled, its
// gossip swallowed) stays among the brokers the majority lists, last,
// until gossip has held it failed for fenceAfter, as a Kafka broker stays in
// Metadata until its controller fences it; then it is left out. Before, the
// majority left it out at once, and a client that refreshed its metadata
// during the cut kept a list without it long after the cut healed (seed
// 1796468115103236564, faults 4-6 of the fault campaign: the Java member,
// told of nodes 1 and 2 alone while node 3 was cut off, knew no live node
// once node 1 had left and node 2 was cut off in turn).
func TestCutOffLeaderListedUntilFenced(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.RejoinInterval = time.Hour })
	old := leaderAmong(t, c.nodes)
	rest := without(c.nodes, old)
	stream := streamOf(t, old.raftAddr)
	stream.setStalled(true)
	t.Cleanup(func() { stream.setStalled(false) })
	holeGossip(t, old, rest)
	for _, o := range rest {
		got := o.n.Brokers()
		if len(got) != 3 || got[2].ID != old.id {
			t.Fatalf("node %d lists brokers %+v %v after gossip held node %d failed, want all three, node %d last",
				o.id, got, time.Since(failedSince(t, o, old)).Round(time.Millisecond), old.id, old.id)
		}
	}
	leaderAmong(t, rest)
	for _, o := range rest {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d leaves node %d out once fenced", o.id, old.id), func() error {
			for _, b := range o.n.Brokers() {
				if b.ID == old.id {
					return fmt.Errorf("still listed %v after gossip held it failed", time.Since(failedSince(t, o, old)).Round(time.Millisecond))
				}
			}
			return nil
		})
		if held := time.Since(failedSince(t, o, old)); held < fenceAfter {
			t.Errorf("node %d left node %d out %v after gossip held it failed, before fenceAfter (%v)", o.id, old.id, held, fenceAfter)
		}
	}
}

// failedSince is when gossip on tn began to hold other failed.
func failedSince(t *testing.T, tn, other *testNode) time.Time {
	t.Helper()
	m, ok := tn.n.gossip.memberByID(other.id)
	if !ok {
		t.Fatalf("node %d knows no node %d", tn.id, other.id)
	}
	return m.since
}

// A node whose gossip holds every other node failed (the leader here, its
// gossip cut off while Raft still reaches the followers) still lists a
// majority of the voters among the brokers: a client that took a Metadata
// answer naming this node alone knew no other broker once this node left
// (seed 1796468115103236564, fault 42 of the fault campaign: a franz-go
// member that could not rejoin for minutes).
func TestBrokersNameAMajorityWhileGossipHoldsTheOthersFailed(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.RejoinInterval = time.Hour })
	leader := leaderAmong(t, c.nodes)
	rest := without(c.nodes, leader)
	isolateGossip(t, leader, rest)
	eventually(t, 20*time.Second, "the leader's gossip holds the others failed", func() error {
		for _, o := range rest {
			if m, _ := memberState(leader, o.id); m.GossipState == "alive" {
				return fmt.Errorf("node %d: gossip state %q", o.id, m.GossipState)
			}
		}
		return nil
	})
	if got := leader.n.Brokers(); len(got) < 2 {
		t.Fatalf("brokers %+v: fewer than a majority of the three voters", got)
	}
	gossipOf(t, leader).isolated.Store(false)
}
