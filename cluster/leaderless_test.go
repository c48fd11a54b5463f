package cluster

import (
	"fmt"
	"testing"
	"time"
)

// A leader cut off from both followers knows no leader from soon after it
// steps down for as long as the cut lasts, while the majority names its new
// leader; once the cut heals the old leader names that leader too.
func TestLeaderlessForCutOffNode(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	if d := old.n.LeaderlessFor(); d != 0 {
		t.Fatalf("the leader reports no leader for %v", d)
	}

	streamOf(t, old.raftAddr).setCut(true)
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
