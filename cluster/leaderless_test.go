package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A leader cut off from both followers knows no leader from soon after it
// steps down for as long as the cut lasts, while the majority names its new
// leader; once the cut heals the old leader names that leader too. Asked to
// confirm its leadership once cut off, it cannot (no majority answers),
// where before the cut it could.
func TestLeaderlessForCutOffNode(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	if d := old.n.LeaderlessFor(); d != 0 {
		t.Fatalf("the leader reports no leader for %v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !old.n.ConfirmLeader(ctx) {
		t.Fatal("the leader could not confirm its leadership with both followers in reach")
	}

	streamOf(t, old.raftAddr).setCut(true)
	// An answer a follower sent before the cut may still be on its way
	// through Raft's replication goroutines and confirm the first call or
	// two (Raft counts any answer that reaches it after the call was
	// registered); after those, nothing can.
	confirmed := 0
	for old.n.ConfirmLeader(ctx) {
		if confirmed++; confirmed == 3 {
			t.Fatal("a leader cut off from both followers confirmed its leadership three times")
		}
	}
	if ctx.Err() != nil {
		t.Fatal("confirming the leadership of a cut-off leader waited until the test's deadline, not its lease")
	}
	if old.n.ConfirmLeader(ctx) {
		t.Fatal("a cut-off leader confirmed its leadership after it had failed to")
	}
	majority := without(c.nodes, old)
	leaderAmong(t, majority)
	var first time.Duration
	eventually(t, 20*time.Second, "the cut-off node knows no leader", func() error {
		if first = old.n.LeaderlessFor(); first <= 0 {
			return fmt.Errorf("leaderless for %v", first)
		}
		return nil
	})
	eventually(t, 20*time.Second, "the cut-off node's leaderless time grows", func() error {
		if d := old.n.LeaderlessFor(); d <= first {
			return fmt.Errorf("leaderless for %v, first %v", d, first)
		}
		return nil
	})
	eventually(t, 20*time.Second, "the majority names its leader", func() error {
		for _, tn := range majority {
			if d := tn.n.LeaderlessFor(); d != 0 {
				return fmt.Errorf("node %d leaderless for %v", tn.id, d)
			}
		}
		return nil
	})

	streamOf(t, old.raftAddr).setCut(false)
	eventually(t, 20*time.Second, "the healed node names the leader", func() error {
		if d := old.n.LeaderlessFor(); d != 0 {
			return fmt.Errorf("leaderless for %v", d)
		}
		return nil
	})
}
