package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
)

// A node whose FSM meets an entry this binary cannot apply stops: the
// OnHalt hook (kgate serve exits there) gets an error naming the index and
// the command, and the node is not ready, not leader and takes no
// proposals. Nothing after the entry is applied.
func TestNodeHaltsOnEntryItCannotApply(t *testing.T) {
	halts := make(chan error, 4)
	c := &testCluster{t: t, used: map[string]bool{}}
	tn := c.newNode(1, nil, 1, func(cfg *Config) { cfg.OnHalt = func(err error) { halts <- err } })
	tn.start(t)
	leaderAmong(t, c.nodes)
	createTopic(t, c.nodes, "before", 1)

	// A command kind from a newer kgate, in the log as if a newer leader
	// had written it.
	fut := tn.n.raft.Apply([]byte{0, 1, 99, 1, 2, 3}, 5*time.Second)
	if err := fut.Error(); err != nil {
		t.Fatal(err)
	}
	var got error
	select {
	case got = <-halts:
	case <-time.After(20 * time.Second):
		t.Fatal("OnHalt not called")
	}
	var h *fsm.HaltError
	if !errors.As(got, &h) || h.Index != fut.Index() || !strings.Contains(h.Command, "unknown kind 99") {
		t.Fatalf("halt error %v, want one naming index %d and kind 99", got, fut.Index())
	}
	select {
	case <-tn.n.Halted():
	default:
		t.Fatal("Halted not closed")
	}
	if tn.n.Ready() || tn.n.IsLeader() {
		t.Fatalf("halted node: ready %v, leader %v", tn.n.Ready(), tn.n.IsLeader())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tn.n.Propose(ctx, fsm.Encode(&fsm.CreateTopic{Name: "after", Partitions: 1}), true); err == nil {
		t.Fatal("a halted node accepted a proposal")
	}
	// Even an entry that reaches the log is not applied after the halt.
	if err := tn.n.raft.Apply(fsm.Encode(&fsm.CreateTopic{Name: "later", Partitions: 1}), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if tn.f.Topic("later") != nil || tn.f.Topic("before") == nil {
		t.Fatal("the halted FSM applied an entry after the one it could not apply")
	}
	if !tn.log().contains("refuses to serve") || !tn.log().contains(fmt.Sprintf("index=%d", fut.Index())) {
		t.Fatalf("no log line naming the index:\n%s", tn.log())
	}
}

// The leader raises the cluster's feature level only once every voter
// reports a binary that supports it; until then entries are written in the
// form releases before feature levels read.
func TestFeatureLevelRaisedOnlyWhenEveryVoterSupportsIt(t *testing.T) {
	older := fsm.LevelBaseline
	c := newCluster(t, 3, func(cfg *Config) {
		if cfg.NodeID == 3 {
			cfg.MaxFeatureLevel = &older // node 3 still runs the previous release
		}
	})
	leader := leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	eventually(t, 20*time.Second, "the leader sees every voter's level", func() error {
		if l, ok := leader.n.supportedLevel(t.Context(), true); !ok || l != fsm.LevelBaseline {
			return fmt.Errorf("supported level %d (known %v)", l, ok)
		}
		return nil
	})
	createTopic(t, c.nodes, "before", 1)
	for _, tn := range c.nodes {
		if l := tn.f.FeatureLevel(); l != fsm.LevelBaseline {
			t.Fatalf("node %d at feature level %d while node 3 supports only %d", tn.id, l, fsm.LevelBaseline)
		}
	}
	if b := lastCommand(t, leader); b[0] != byte(fsm.KindCreateTopic) {
		t.Fatalf("entry written as %x at the baseline level, want the old form", b[:3])
	}

	// Node 3 is upgraded.
	n3 := c.nodes[2]
	n3.stop(t)
	n3.tune = nil
	n3.start(t)
	eventually(t, 30*time.Second, "every node at the latest feature level", func() error {
		for _, tn := range c.nodes {
			if l := tn.f.FeatureLevel(); l != fsm.LatestLevel {
				return fmt.Errorf("node %d at level %d", tn.id, l)
			}
		}
		return nil
	})
	createTopic(t, c.nodes, "after", 1)
	leader = leaderAmong(t, c.nodes)
	if b := lastCommand(t, leader); b[0] != 0 {
		t.Fatalf("entry written as %x at level %d, want the versioned form", b[:3], fsm.LatestLevel)
	}
	converged(t, c.nodes, stateOf(leader))

	// A node of the previous release is not made a voter any more: it
	// could not apply the log.
	three := append([]*testNode(nil), c.nodes...)
	old := c.newNode(4, []string{c.nodes[0].gossipAddr}, 1, func(cfg *Config) { cfg.MaxFeatureLevel = &older })
	old.start(t)
	eventually(t, 20*time.Second, "the leader refuses the old node", func() error {
		if !leaderAmong(t, three).log().contains("not adding a voter: its kgate is older than the cluster's feature level") {
			return errors.New("no refusal logged")
		}
		return nil
	})
	votersAre(t, three, three)
}

// lastCommand is the newest command entry in tn's Raft log.
func lastCommand(t *testing.T, tn *testNode) []byte {
	t.Helper()
	last, err := tn.n.store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := last; i > 0; i-- {
		var l raft.Log
		if err := tn.n.store.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == raft.LogCommand && len(l.Data) > 2 {
			if c, err := fsm.Decode(l.Data); err == nil {
				if _, ok := c.(*fsm.CreateTopic); ok {
					return l.Data
				}
			}
		}
	}
	t.Fatal("no command in the log")
	return nil
}
