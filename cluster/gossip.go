package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
)

// nodeMeta travels in gossip: who a node is and how to reach it.
type nodeMeta struct {
	ID        int32  `json:"id"`
	ClusterID string `json:"cid,omitempty"`
	KafkaAddr string `json:"kafka"`
	RaftAddr  string `json:"raft"`
	AdminAddr string `json:"admin"`
	Expect    int    `json:"expect"`
	HasState  bool   `json:"state"` // has Raft state: never bootstraps again
	// Leaving is set just before a graceful leave, so that the others read
	// the node's departure as a leave rather than a failure: memberlist
	// does not tell its event callbacks which of the two it was.
	Leaving bool `json:"leaving,omitempty"`
	// Level is the highest feature level this node's binary supports.
	// Releases before feature levels send none: LevelBaseline.
	Level fsm.Level `json:"fl,omitempty"`
	// Listeners are the advertised addresses of the node's named Kafka
	// listeners (its --kafka-addr one included); none when it has only the
	// one, unnamed.
	Listeners map[string]string `json:"ls,omitempty"`
}

func (m nodeMeta) equal(o nodeMeta) bool { return reflect.DeepEqual(m, o) }

// member is what gossip knows of a node.
type member struct {
	meta       nodeMeta
	gossipAddr string
	state      memberlist.NodeStateType
	since      time.Time // of the current state
}

// gossip wraps memberlist. Callbacks never block: they record the change
// and poke the node's reconcile loop.
type gossip struct {
	n       *Node
	ml      *memberlist.Memberlist
	log     *slog.Logger
	poke    chan struct{} // wakes membershipLoop
	changed chan struct{} // wakes the leader's voter reconcile
	// keyring is memberlist's (it is safe for concurrent use); nil when
	// gossip is not encrypted.
	keyring *memberlist.Keyring

	// refreshMu serialises metadata broadcasts: a newer one invalidates a
	// queued older one, which then may never be sent (see Node.Leave).
	refreshMu sync.Mutex

	mu      sync.Mutex
	members map[string]*member // by memberlist name
	// version counts the changes of the set of live members (and of their
	// Kafka addresses): work spread over Members compares it to learn that
	// the spread may have moved, even away and back, since it last looked.
	version uint64
	// pushed: what each node sent in its last push-pull with us
	// (pushState), for exchange.
	pushed map[int32]pushState
	// transport bounds direct exchanges (pushPull) by a deadline of
	// their own.
	transport *boundedTransport
}

// pushState is what a push-pull carries (LocalState): the sender's
// metadata and, when it leads, its Raft voters, so that a leaving node
// learns from the leader itself that it has been removed. Older nodes read
// it as a nodeMeta and ignore the voters.
type pushState struct {
	nodeMeta
	// Version is 1 from binaries that send Voters and LastIndex; 0 from
	// older ones, whose leader cannot confirm a removal (Node.Leave).
	Version int     `json:"pv,omitempty"`
	Voters  []int32 `json:"voters,omitempty"`
	// LastIndex is the sender's Raft log end: the leader promotes a
	// non-voter once it has caught up (reconcile).
	LastIndex uint64 `json:"li,omitempty"`
	// LeaderID and LeaderHeardMs: the leader the sender follows and how
	// long before the push-pull it last heard from it, in milliseconds;
	// nil on a leader, a node that knows none, or an older binary. A
	// follower whose leader's connections ended asks before it stands
	// for election (Node.stand).
	LeaderID      int32  `json:"ld,omitempty"`
	LeaderHeardMs *int64 `json:"lh,omitempty"`
}

func nodeName(id int32) string { return "kgate-" + strconv.Itoa(int(id)) }

func startGossip(n *Node) (*gossip, error) {
	g := &gossip{n: n, log: n.log.With("part", "gossip"), poke: make(chan struct{}, 1), changed: make(chan struct{}, 1), members: map[string]*member{},
		pushed: map[int32]pushState{}}
	bind := n.cfg.GossipBindAddr
	if bind == "" {
		bind = n.cfg.GossipAddr
	}
	host, portStr, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("gossip addr: %w", err)
	}
	port, _ := strconv.Atoi(portStr)
	// memberlist advertises an IP: a name (a Kubernetes pod's DNS name) is
	// resolved once, here.
	adv, err := net.ResolveTCPAddr("tcp", n.cfg.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip advertise address: %w", err)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = nodeName(n.cfg.NodeID)
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = adv.IP.String(), adv.Port
	mc.Delegate = g
	mc.Events = g
	mc.Alive = g
	mc.Conflict = g
	mc.Logger = log.New(&slogWriter{log: g.log}, "", 0)
	mc.DeadNodeReclaimTime = 30 * time.Second // a node back on a new address reclaims its name
	// Faster than memberlist's LAN defaults (1 s probes, suspicion x4): a
	// dead node leaves Metadata in about 2 s instead of 6-7 s, so clients
	// stop dialling it sooner. A wrongly suspected node refutes and returns;
	// Raft membership never follows gossip failures quickly anyway.
	mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult = 500*time.Millisecond, 250*time.Millisecond, 3
	if n.cfg.GossipProbeInterval > 0 {
		mc.ProbeInterval = n.cfg.GossipProbeInterval
		mc.ProbeTimeout = min(mc.ProbeTimeout, n.cfg.GossipProbeInterval/2)
	}
	if keys := n.cfg.GossipKeys; len(keys) > 0 {
		kr, err := memberlist.NewKeyring(keys, keys[0])
		if err != nil {
			return nil, fmt.Errorf("gossip keys: %w", err)
		}
		// Refuse clear messages too: a node without the key gets nothing in.
		mc.Keyring, mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = kr, true, true
		g.keyring = kr
	}
	var tr memberlist.Transport
	if n.cfg.gossipTransport != nil {
		if tr, err = n.cfg.gossipTransport(host, port, mc.Logger); err != nil {
			return nil, fmt.Errorf("gossip on %s: %w", bind, err)
		}
	} else {
		// memberlist's own, made here to be wrapped.
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: mc.Logger})
		if err != nil {
			return nil, fmt.Errorf("gossip on %s: %w", bind, err)
		}
		if port == 0 {
			mc.BindPort = nt.GetAutoBindPort()
		}
		tr = nt
	}
	g.transport = newBoundedTransport(tr)
	mc.Transport = g.transport
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip on %s: %w", n.cfg.GossipAddr, err)
	}
	g.ml = ml
	return g, nil
}

// join contacts the seed list; errors are logged, the periodic rejoin retries.
func (g *gossip) join(seeds []string) {
	if len(seeds) == 0 {
		return
	}
	if n, err := g.ml.Join(seeds); err != nil {
		g.log.Warn("join", "seeds", strings.Join(seeds, ","), "contacted", n, "err", err)
	}
}

func (g *gossip) localMeta() nodeMeta {
	return nodeMeta{
		ID: g.n.cfg.NodeID, ClusterID: g.n.clusterID(), KafkaAddr: g.n.cfg.KafkaAddr,
		RaftAddr: g.n.cfg.RaftAddr, AdminAddr: g.n.cfg.AdminAddr, Expect: g.n.cfg.BootstrapExpect,
		HasState: g.n.hasRaftState(), Leaving: g.n.leaving.Load(), Level: g.n.maxLevel(),
		Listeners: g.n.cfg.Listeners,
	}
}

// refresh re-broadcasts our metadata after it changed (cluster id, state)
// and waits until the broadcast has been sent.
func (g *gossip) refresh() {
	g.refreshMu.Lock()
	defer g.refreshMu.Unlock()
	if err := g.ml.UpdateNode(5 * time.Second); err != nil {
		g.log.Debug("update node meta", "err", err)
	}
}

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	b, _ := json.Marshal(g.localMeta())
	if len(b) > limit {
		g.log.Error("node metadata exceeds the gossip limit", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}

func (g *gossip) NotifyMsg([]byte)                           {}
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState sends our metadata as it is now in every push-pull: the
// metadata memberlist broadcasts is only as new as the last refresh, and a
// leader deciding whether to make a node a voter asks it directly
// (askDirectly) for the truth. A leader adds its voters.
func (g *gossip) LocalState(join bool) []byte {
	if g.n.cfg.pushBareMeta {
		b, _ := json.Marshal(g.localMeta())
		return b
	}
	ps := pushState{nodeMeta: g.localMeta(), Version: 1, LastIndex: g.n.raft.LastIndex()}
	if _, id := g.n.raft.LeaderWithID(); g.n.raft.State() == raft.Follower && id != "" {
		if lid, err := strconv.Atoi(string(id)); err == nil {
			ago := time.Since(g.n.raft.LastContact()).Milliseconds()
			ps.LeaderID, ps.LeaderHeardMs = int32(lid), &ago
		}
	}
	if g.n.raft.State() == raft.Leader {
		ps.Voters = []int32{}
		for _, v := range g.n.Voters() {
			ps.Voters = append(ps.Voters, v.ID)
		}
	}
	b, _ := json.Marshal(ps)
	return b
}

// MergeRemoteState takes the sender's current metadata (LocalState): a node
// of another cluster is forgotten, any other known node's metadata updated.
// A change wakes the leader's reconcile: a push-pull may be the only way a
// node's leave reaches a leader that holds it as failed (memberlist
// ignores a leave of a node it already holds dead).
func (g *gossip) MergeRemoteState(buf []byte, join bool) {
	var ps pushState
	if len(buf) == 0 || json.Unmarshal(buf, &ps) != nil || ps.ID == g.n.cfg.NodeID {
		return
	}
	m := ps.nodeMeta
	name := nodeName(m.ID)
	g.mu.Lock()
	if ours := g.n.clusterID(); ours != "" && m.ClusterID != "" && ours != m.ClusterID {
		if _, ok := g.members[name]; ok {
			g.log.Warn("refusing a node of another cluster", "node", name, "its_cluster", m.ClusterID, "our_cluster", ours)
			delete(g.members, name)
		}
		g.mu.Unlock()
		return
	}
	g.pushed[m.ID] = ps
	changed := false
	if cur, ok := g.members[name]; ok && !cur.meta.equal(m) {
		cur.meta, changed = m, true
	}
	g.mu.Unlock()
	if changed {
		g.wake()
	}
}

func decodeMeta(n *memberlist.Node) (nodeMeta, error) {
	var m nodeMeta
	if err := json.Unmarshal(n.Meta, &m); err != nil {
		return m, fmt.Errorf("node %s sent unreadable metadata: %w", n.Name, err)
	}
	return m, nil
}

// NotifyAlive refuses nodes of another cluster (AliveDelegate).
func (g *gossip) NotifyAlive(peer *memberlist.Node) error {
	if peer.Name == nodeName(g.n.cfg.NodeID) {
		return nil
	}
	m, err := decodeMeta(peer)
	if err != nil {
		return err
	}
	if peer.Name != nodeName(m.ID) {
		return fmt.Errorf("node %s claims node id %d", peer.Name, m.ID)
	}
	if ours := g.n.clusterID(); ours != "" && m.ClusterID != "" && ours != m.ClusterID {
		g.log.Warn("refusing a node of another cluster", "node", peer.Name, "its_cluster", m.ClusterID, "our_cluster", ours)
		// It may have been accepted earlier on metadata that did not show
		// its cluster yet: forget it, so it is never made a voter or broker.
		g.mu.Lock()
		delete(g.members, peer.Name)
		g.mu.Unlock()
		return fmt.Errorf("cluster id %s is not ours (%s)", m.ClusterID, ours)
	}
	return nil
}

// NotifyConflict logs two nodes claiming one node id (ConflictDelegate).
func (g *gossip) NotifyConflict(existing, other *memberlist.Node) {
	g.log.Error("two nodes claim the same node id; refusing the newcomer", "name", existing.Name,
		"existing", existing.Address(), "other", other.Address())
}

// memberlist (v0.6) never sets Node.State in these callbacks (it is always
// StateAlive), so the state comes from the event: join and update mean
// alive; a leave is a graceful leave when the node announced it, else a
// failure.
func (g *gossip) NotifyJoin(n *memberlist.Node)   { g.record(n, memberlist.StateAlive) }
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.record(n, memberlist.StateAlive) }
func (g *gossip) NotifyLeave(n *memberlist.Node)  { g.record(n, memberlist.StateDead) }

func (g *gossip) record(n *memberlist.Node, state memberlist.NodeStateType) {
	m, err := decodeMeta(n)
	if err != nil {
		g.log.Warn("ignoring node", "err", err)
		return
	}
	if state == memberlist.StateDead && m.Leaving {
		state = memberlist.StateLeft
	}
	g.mu.Lock()
	prev := g.members[n.Name]
	cur := &member{meta: m, gossipAddr: n.Address(), state: state, since: time.Now()}
	if prev != nil && prev.state == state {
		cur.since = prev.since
	}
	if prev == nil || alive(prev.state) != alive(state) || prev.meta.KafkaAddr != m.KafkaAddr || !maps.Equal(prev.meta.Listeners, m.Listeners) {
		g.version++
	}
	g.members[n.Name] = cur
	g.mu.Unlock()
	g.wake()
}

// wake pokes the membership loop and the leader's voter reconcile.
func (g *gossip) wake() {
	for _, ch := range []chan struct{}{g.poke, g.changed} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// exchange pushes our state to m with a push-pull and returns what m sent
// back; ok is false when it could not be reached.
func (g *gossip) exchange(ctx context.Context, m member) (pushState, bool) {
	g.mu.Lock()
	delete(g.pushed, m.meta.ID)
	g.mu.Unlock()
	if !g.pushPull(ctx, m) {
		return pushState{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ps, ok := g.pushed[m.meta.ID]
	return ps, ok
}

// leaderVoters pushes our state to the leader m and returns the voters it
// answered with; ok is false when it could not be reached or did not
// answer as the leader; older is true when its binary predates the answer.
func (g *gossip) leaderVoters(ctx context.Context, m member) (voters []int32, ok, older bool) {
	ps, ok := g.exchange(ctx, m)
	return ps.Voters, ok && ps.Voters != nil, ok && ps.Version == 0
}

// askDirectly refreshes what we know of m from m itself (a push-pull with
// it) and returns the result; ok is false when it is gone or was refused.
func (g *gossip) askDirectly(ctx context.Context, m member) (member, bool) {
	if !g.pushPull(ctx, m) {
		return member{}, false
	}
	return g.memberByID(m.meta.ID)
}

// pushPull exchanges state with m directly, as a join does; false when m
// could not be reached within directExchangeTimeout or before ctx ended.
func (g *gossip) pushPull(ctx context.Context, m member) bool {
	if ctx.Err() != nil {
		return false
	}
	deadline := time.Now().Add(directExchangeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return g.transport.do(ctx, deadline, m.gossipAddr, func() bool {
		if _, err := g.ml.Join([]string{m.gossipAddr}); err != nil {
			g.log.Debug("push-pull", "node", m.meta.ID, "err", err)
			return false
		}
		return true
	})
}

// member returns what gossip knows of the node with Raft server id id.
func (g *gossip) member(id raft.ServerID) (member, bool) {
	n, err := strconv.Atoi(string(id))
	if err != nil {
		return member{}, false
	}
	return g.memberByID(int32(n))
}

// memberByID returns what gossip knows of node id.
func (g *gossip) memberByID(id int32) (member, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[nodeName(id)]
	if !ok {
		return member{}, false
	}
	return *m, true
}

// live returns the live members sorted by node id and the version of
// that set.
func (g *gossip) live() ([]member, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]member, 0, len(g.members))
	for _, m := range g.members {
		if alive(m.state) {
			out = append(out, *m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.ID < out[j].meta.ID })
	return out, g.version
}

// snapshot returns every known member sorted by node id.
func (g *gossip) snapshot() []member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.ID < out[j].meta.ID })
	return out
}

func (g *gossip) shutdown(leave bool) {
	if leave {
		if err := g.ml.Leave(5 * time.Second); err != nil {
			g.log.Warn("gossip leave", "err", err)
		}
	}
	g.ml.Shutdown()
}

// slogWriter forwards memberlist's log lines to slog, errors and warnings
// only: its debug chatter would drown everything else.
type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.Contains(line, "[ERR]"):
		w.log.Error(memberlistMessage(line, "[ERR]"))
	case strings.Contains(line, "[WARN]"):
		w.log.Warn(memberlistMessage(line, "[WARN]"))
	}
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)

// memberlistMessage is the text of a memberlist log line after its level
// tag and "memberlist: " prefix; slog adds its own level.
func memberlistMessage(line, tag string) string {
	if i := strings.Index(line, tag); i >= 0 {
		line = strings.TrimSpace(line[i+len(tag):])
	}
	return strings.TrimPrefix(line, "memberlist: ")
}

// SetGossipKeys replaces the gossip keyring without a restart (key
// rotation): keys[0] becomes the key that encrypts, every key decrypts, and
// keys no longer listed are removed. Only for a node started with keys.
func (n *Node) SetGossipKeys(keys [][]byte) error {
	if n.gossip == nil || len(keys) == 0 {
		return fmt.Errorf("gossip keys: none given, or gossip is off")
	}
	kr := n.gossip.keyring
	if kr == nil {
		return fmt.Errorf("gossip keys: this node was started without encryption")
	}
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("gossip keys: %w", err)
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return fmt.Errorf("gossip keys: %w", err)
	}
	for _, old := range kr.GetKeys() {
		keep := false
		for _, k := range keys {
			keep = keep || string(k) == string(old)
		}
		if !keep {
			if err := kr.RemoveKey(old); err != nil {
				return fmt.Errorf("gossip keys: %w", err)
			}
		}
	}
	return nil
}
