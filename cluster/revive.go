package cluster

import (
	"context"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// reviveEvery is how often reviveFailedServers asks failed servers.
const reviveEvery = time.Second

// reviveFailedServers asks every server of the Raft configuration that
// gossip holds failed or dead, or has not heard of at all (at the address
// of the peers file), for its state directly (a push-pull, as a
// rejoin does), once a second. After a partition heals, gossip alone calls
// the cut-off nodes alive again only at the next rejoin of the seeds
// (--rejoin-interval, 30 s): memberlist neither probes nor push-pulls with
// a node it holds dead, and the broadcasts that said so were spent while
// the cut held. Meanwhile Metadata lists fewer brokers than there are
// (the chaos campaign saw a single one, which the Java client then kept
// to), and a healed leader is not named to clients. A push-pull lets each
// side learn that the other holds it dead and refute it; the next one
// carries the refutation back. A node that is really down refuses the
// connection at once; one behind a black hole holds this loop for
// directExchangeTimeout (not memberlist's 10 s stream timeout), after
// which the next server is asked.
func (n *Node) reviveFailedServers() {
	defer n.wg.Done()
	ctx, cancel := n.untilStop(context.Background())
	defer cancel()
	tick := time.NewTicker(reviveEvery)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		fut := n.raft.GetConfiguration()
		if fut.Error() != nil {
			continue
		}
		self := raft.ServerID(strconv.Itoa(int(n.cfg.NodeID)))
		for _, s := range fut.Configuration().Servers {
			m, known := n.gossip.member(s.ID)
			if !known && s.ID != self {
				// Never heard of in gossip since this node started: its
				// seeds led elsewhere. Ask at the address saved for it.
				id, err := strconv.Atoi(string(s.ID))
				addr, saved := n.savedAddr(int32(id))
				if err != nil || !saved {
					continue
				}
				m, known = member{meta: nodeMeta{ID: int32(id)}, gossipAddr: addr, state: memberlist.StateDead}, true
			}
			if s.ID == self || !known || alive(m.state) || m.meta.Leaving {
				continue
			}
			select {
			case <-n.stop:
				return
			default:
			}
			if _, ok := n.gossip.askDirectly(ctx, m); ok {
				n.log.Debug("asked a node gossip holds failed for its state", "node", m.meta.ID)
			}
		}
	}
}

// untilStop is parent, also ended when the node stops.
func (n *Node) untilStop(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() { // ends with ctx: the caller's cancel, or the stop
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
