package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// A leader cut off from both followers knows it is cut off (CutOff) as
// soon as it steps down for want of their answers, long before it has
// known no leader for the gateway's CutOffAfter (2 s); the majority's nodes
// never count as cut off; once the cut heals the old leader hears the new
// one and no longer does. A leader that hands its leadership over, its
// followers answering, is not cut off either.
func TestDeposedLeaderKnowsItIsCutOff(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	if old.n.CutOff() {
		t.Fatal("a leader in reach of both followers reports itself cut off")
	}

	streamOf(t, old.raftAddr).setCut(true)
	eventually(t, 20*time.Second, "the deposed leader knows it is cut off", func() error {
		if !old.n.CutOff() {
			return fmt.Errorf("not cut off; leaderless for %v", old.n.LeaderlessFor())
		}
		return nil
	})
	if d := old.n.LeaderlessFor(); d >= time.Second {
		t.Fatalf("the deposed leader knew itself cut off only after %v without a leader", d)
	}
	majority := without(c.nodes, old)
	leader := leaderAmong(t, majority)
	for _, tn := range majority {
		if tn.n.CutOff() {
			t.Fatalf("node %d of the majority reports itself cut off", tn.id)
		}
	}

	streamOf(t, old.raftAddr).setCut(false)
	eventually(t, 20*time.Second, "the healed node no longer counts as cut off", func() error {
		if old.n.CutOff() {
			return fmt.Errorf("cut off; leaderless for %v", old.n.LeaderlessFor())
		}
		return nil
	})

	votersAre(t, c.nodes, c.nodes)
	leader.n.transferLeadership()
	eventually(t, 20*time.Second, "another node leads", func() error {
		if now := leaderAmong(t, c.nodes); now == leader {
			return fmt.Errorf("node %d still leads", leader.id)
		}
		return nil
	})
	if leader.n.CutOff() {
		t.Fatal("a leader that handed its leadership over reports itself cut off")
	}
}

// A follower cut off from the others by a cut that closes its connections
// sees its leader's connections end, as when the leader dies, but cannot
// reach enough voters to be elected: it does not stand (which would skip
// pre-vote and move it to a new term), so once the cut heals the leader
// it never lost keeps leading in the same term, with no election.
func TestCutOffFollowerDoesNotDeposeTheLeaderOnHealing(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	term := leader.n.raft.CurrentTerm()
	f := without(c.nodes, leader)[0]

	streamOf(t, f.raftAddr).setCut(true)
	// Raft's own timer and pre-vote go on meanwhile: they leave the term
	// alone.
	eventually(t, 20*time.Second, "the cut-off follower campaigns with pre-vote", func() error {
		if strings.Count(f.log().String(), "pre-vote campaign failed") < 2 {
			return errors.New("fewer than two pre-vote campaigns yet")
		}
		return nil
	})
	if got := f.n.raft.CurrentTerm(); got != term {
		t.Fatalf("the cut-off follower moved from term %d to %d", term, got)
	}
	streamOf(t, f.raftAddr).setCut(false)
	stillLeads(t, c, f, leader, term)
}

// stillLeads waits for the healed follower f to follow leader again and
// checks that leader leads in the term it led in before the cut.
func stillLeads(t *testing.T, c *testCluster, f, leader *testNode, term uint64) {
	t.Helper()
	eventually(t, 20*time.Second, "the healed follower follows the leader", func() error {
		if id, ok := f.n.LeaderID(); !ok || id != leader.id {
			return fmt.Errorf("follower names leader %d (%v), want %d", id, ok, leader.id)
		}
		return nil
	})
	if now := leaderAmong(t, c.nodes); now != leader || leader.n.raft.CurrentTerm() != term {
		t.Fatalf("after the heal node %d leads in term %d; before the cut node %d led in term %d",
			now.id, now.n.raft.CurrentTerm(), leader.id, term)
	}
}

// A follower cut off from the leader alone, while the third voter still
// hears it (a bridge partition, which closes the two's connections), does
// not stand for election: the leader lives. It keeps leading in its term,
// and the cut follower is left to Raft's own pre-vote, which the third
// voter refuses while it has a leader. (The fault campaign: the cut
// follower stood, its vote request moved the third voter to a newer term,
// and the leader lost its leadership for 0.6 s.)
func TestFollowerCutFromTheLeaderAloneDoesNotDeposeIt(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	term := leader.n.raft.CurrentTerm()
	f := without(c.nodes, leader)[0]
	// A voter that has not yet heard from the leader is a term behind.
	eventually(t, 10*time.Second, "every voter at the leader's term", func() error {
		for _, tn := range c.nodes {
			if got := tn.n.raft.CurrentTerm(); got != term {
				return fmt.Errorf("node %d at term %d, the leader at %d", tn.id, got, term)
			}
		}
		return nil
	})

	cutLink(t, leader, f, true)
	eventually(t, 20*time.Second, "the cut follower campaigns with pre-vote (or a term moves)", func() error {
		for _, tn := range c.nodes {
			if tn.n.raft.CurrentTerm() != term {
				return nil // checked below
			}
		}
		if strings.Count(f.log().String(), "pre-vote campaign failed") < 2 {
			return errors.New("fewer than two pre-vote campaigns yet")
		}
		return nil
	})
	for _, tn := range c.nodes {
		if got := tn.n.raft.CurrentTerm(); got != term {
			t.Fatalf("node %d moved from term %d to %d while only the link between nodes %d and %d was cut",
				tn.id, term, got, leader.id, f.id)
		}
	}
	if !f.log().contains("not standing for election: another voter hears the leader") {
		t.Error("the cut follower never asked the other voter before it would stand")
	}
	cutLink(t, leader, f, false)
	stillLeads(t, c, f, leader, term)
}
