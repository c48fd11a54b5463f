package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// holeGossip puts a black hole around tn's gossip and waits until every
// node of others holds it failed. The hole ends before the nodes stop.
func holeGossip(t *testing.T, tn *testNode, others []*testNode) {
	t.Helper()
	g := gossipOf(t, tn)
	g.holed.Store(true)
	t.Cleanup(g.unhole) // after newCluster's: runs first
	for _, o := range others {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d holds node %d failed", o.id, tn.id), func() error {
			if m, _ := memberState(o, tn.id); m.GossipState != "failed" {
				return fmt.Errorf("gossip state %q", m.GossipState)
			}
			return nil
		})
	}
}

// A black-holed node holds reviveFailedServers' round for only a direct
// exchange's deadline (directExchangeTimeout), not memberlist's 10 s stream
// timeout: node 1 holds nodes 2 and 3 failed; node 2 is behind a black hole
// (every stream to it connects and hangs) and comes first in the Raft
// configuration; node 3 is reachable again but cannot send anything itself
// (mute), so only node 1 asking it directly, twice (node 3 learns it is held
// dead and refutes; the next exchange carries that back), calls it alive.
// That happens within a few seconds, although every round asks node 2
// first; before, each round waited 10 s on node 2.
func TestBlackHoledPeerHoldsReviveBriefly(t *testing.T) {
	c := newCluster(t, 3, nil)
	leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	isolateGossip(t, n3, []*testNode{n1})
	holeGossip(t, n2, []*testNode{n1})

	// Heal node 3 one way while node 1's revive is inside an exchange
	// with node 2: a new stream into the hole.
	dials := gossipOf(t, n2).holeDials.Load()
	eventually(t, 10*time.Second, "node 1 asks node 2 (behind the hole) directly", func() error {
		if gossipOf(t, n2).holeDials.Load() == dials {
			return errors.New("no stream into the hole yet")
		}
		return nil
	})
	gossipOf(t, n3).mute.Store(true)
	gossipOf(t, n3).isolated.Store(false)
	healed := time.Now()
	// Two rounds of at most directExchangeTimeout on node 2 each, a
	// second apart, plus the exchanges with node 3: well under the 10 s one
	// round took.
	eventually(t, 6*time.Second, "node 1 calls node 3 alive", func() error {
		if m, _ := memberState(n1, n3.id); m.GossipState != "alive" {
			return fmt.Errorf("gossip state %q", m.GossipState)
		}
		return nil
	})
	t.Logf("node 1 called node 3 alive %v after it could be reached, node 2 still behind the black hole",
		time.Since(healed).Round(time.Millisecond))
	if m, _ := memberState(n1, n2.id); m.GossipState != "failed" {
		t.Errorf("node 1 holds the black-holed node 2 %q, want failed", m.GossipState)
	}
}

// A leaving follower whose leader is behind a black hole (gossip only:
// Raft is whole) cannot tell it; Leave ends with its context, not after
// memberlist's 10 s stream timeout.
func TestLeaveToBlackHoledLeaderEndsWithItsContext(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	f := anyFollower(t, c.nodes, leader)
	holeGossip(t, leader, without(c.nodes, leader))

	const limit = 1500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	dials := gossipOf(t, leader).holeDials.Load()
	start := time.Now()
	err := f.n.Leave(ctx)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "still a voter") {
		t.Fatalf("leave with the leader behind a black hole: %v, want an error saying it is still a voter", err)
	}
	if gossipOf(t, leader).holeDials.Load() == dials {
		t.Fatal("the leaving node never tried to tell the leader directly")
	}
	// The context's time, then the exchange in flight ends with it.
	if took > limit+time.Second {
		t.Errorf("leave returned %v after it began, want within about its context's %v", took.Round(time.Millisecond), limit)
	}
	t.Logf("leave returned %v after it began: %v", took.Round(time.Millisecond), err)
	votersAre(t, c.nodes, c.nodes)
}
