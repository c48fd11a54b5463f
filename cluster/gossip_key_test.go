package cluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func gossipKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func logMentions(tn *testNode, words ...string) bool {
	s := strings.ToLower(tn.log().String())
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// A node without the cluster's gossip key, or with another key, is refused
// by gossip: it never becomes a member, broker or voter, and receives none
// of the cluster's data. Then the key is rotated on the running cluster
// (install, use, remove) and a node with only the new key joins.
func TestGossipKeyRefusesStrangersAndRotates(t *testing.T) {
	k1, k2 := gossipKey(1), gossipKey(2)
	c := newCluster(t, 3, func(cfg *Config) { cfg.GossipKeys = [][]byte{k1} })
	three := append([]*testNode(nil), c.nodes...)
	leader := leaderAmong(t, three)
	votersAre(t, three, three)
	createTopic(t, three, "ours", 1)

	seed := c.nodes[0]
	for _, stranger := range []struct {
		id   int32
		keys [][]byte
	}{{7, nil}, {8, [][]byte{gossipKey(9)}}} {
		keys := stranger.keys
		tn := c.newNode(stranger.id, []string{seed.gossipAddr}, 1, func(cfg *Config) { cfg.GossipKeys = keys })
		tn.start(t)
		eventually(t, 20*time.Second, "the seed logs an undecryptable message", func() error {
			if !logMentions(seed, "decrypt", "not encrypted") {
				return errors.New("nothing in the seed's log yet")
			}
			return nil
		})
		leaderAmong(t, three).n.reconcile(t.Context())
		votersAre(t, three, three)
		brokersAre(t, three, three)
		for _, member := range three {
			if m, ok := memberState(member, tn.id); ok {
				t.Fatalf("node %d lists stranger %d: %+v", member.id, tn.id, m)
			}
		}
		if tn.f.Topic("ours") != nil {
			t.Fatalf("stranger %d received the cluster's data", tn.id)
		}
		tn.stop(t)
	}

	// Rotation: every node installs k2, then encrypts with it, then drops k1.
	for _, step := range [][][]byte{{k1, k2}, {k2, k1}, {k2}} {
		for _, tn := range three {
			if err := tn.n.SetGossipKeys(step); err != nil {
				t.Fatal(err)
			}
		}
	}
	newcomer := c.newNode(4, []string{seed.gossipAddr}, 1, func(cfg *Config) { cfg.GossipKeys = [][]byte{k2} })
	newcomer.start(t)
	four := append(append([]*testNode(nil), three...), newcomer)
	leader = leaderAmong(t, three)
	leader.n.reconcile(t.Context())
	votersAre(t, four, four)
	brokersAre(t, four, four)
}
