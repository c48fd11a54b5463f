package cluster

import (
	"context"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
)

// FeatureLevel is the cluster's feature level as this node has applied it.
func (n *Node) FeatureLevel() fsm.Level { return n.fsm.FeatureLevel() }

// raiseFeatureLevel is the leader service that raises the cluster's feature
// level (fsm.Level) as far as every voter's binary supports, as Kafka's
// controller finalizes metadata.version: after a rolling upgrade, once the
// last voter runs the new binary. A voter that gossip does not see alive
// counts as unable: it may come back with any binary.
func (n *Node) raiseFeatureLevel(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if target, ok := n.supportedLevel(ctx, false); ok && target > n.fsm.FeatureLevel() {
			// Confirm with each voter itself: gossip may still carry what a
			// node ran before its last restart.
			if target, ok = n.supportedLevel(ctx, true); ok && target > n.fsm.FeatureLevel() {
				n.log.Info("raising the cluster feature level", "from", n.fsm.FeatureLevel(), "to", target)
				if _, err := n.Propose(ctx, fsm.Encode(&fsm.SetFeatureLevel{Level: target}), false); err != nil {
					n.log.Warn("raising the cluster feature level", "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// supportedLevel is the highest level every voter (and every live
// non-voter) supports; ok is false
// when some voter's support is unknown. With direct set, each voter is
// asked itself (a gossip push-pull) first.
func (n *Node) supportedLevel(ctx context.Context, direct bool) (fsm.Level, bool) {
	fut := n.raft.GetConfiguration()
	if fut.Error() != nil {
		return 0, false
	}
	level := n.maxLevel()
	self := raft.ServerID(strconv.Itoa(int(n.cfg.NodeID)))
	for _, s := range fut.Configuration().Servers {
		if s.ID == self {
			continue
		}
		if n.gossip == nil {
			return 0, false
		}
		m, ok := n.gossip.member(s.ID)
		if ok && direct {
			m, ok = n.gossip.askDirectly(ctx, m)
		}
		if s.Suffrage != raft.Voter && (!ok || !alive(m.state)) {
			// A non-voter replicates the log too, so a live one counts;
			// one gone away holds nothing up (it is promoted only if its
			// binary supports the level then).
			continue
		}
		if !ok || !alive(m.state) {
			return 0, false
		}
		level = min(level, m.meta.Level)
	}
	return level, true
}
