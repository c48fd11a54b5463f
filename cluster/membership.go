package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

func alive(s memberlist.NodeStateType) bool {
	return s == memberlist.StateAlive || s == memberlist.StateSuspect
}

func sortNodes(ns []NodeInfo) { sort.Slice(ns, func(i, j int) bool { return ns[i].ID < ns[j].ID }) }

// membershipLoop follows gossip on every node: it keeps this node's
// metadata current, rejoins the seeds, and bootstraps a new cluster once
// enough fresh nodes see each other. Voters are the leader's business
// (reconcileVoters). It runs on gossip events and on a timer, never inside
// a memberlist callback.
func (n *Node) membershipLoop() {
	defer n.wg.Done()
	// Often enough that a node's metadata shows its cluster id soon after
	// it applied it (mayJoin waits for that).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	every := n.cfg.RejoinInterval
	if every <= 0 {
		every = 30 * time.Second
	}
	rejoin := time.NewTicker(every)
	defer rejoin.Stop()
	// Until a seed answers, retry every second: nodes of a new cluster
	// usually start together and the first seed may not be up yet.
	seeking := time.NewTicker(time.Second)
	defer seeking.Stop()
	lastMeta := n.gossip.localMeta()
	asked := map[int32]time.Time{} // by confirmClusters
	saved := readPeers(n.cfg.DataDir)
	read := saved // not &saved: savePeers assigns to saved
	n.savedPeers.Store(&read)
	ctx, cancel := n.untilStop(context.Background())
	defer cancel()
	for {
		select {
		case <-n.stop:
			return
		case <-n.gossip.poke:
		case <-tick.C:
		case <-rejoin.C:
			// A node cut off long enough is forgotten by the others; joining
			// the seeds again brings it back.
			n.gossip.join(n.cfg.Join)
		case <-seeking.C:
			// Alone: a new cluster's nodes starting together, or this
			// node started again (its seeds may have left since; the
			// nodes it knew may not).
			if n.gossip.ml.NumMembers() <= 1 {
				n.gossip.join(n.seeds(saved))
			}
		}
		if m := n.gossip.localMeta(); !m.equal(lastMeta) && !n.leaving.Load() {
			lastMeta = m
			n.gossip.refresh()
		}
		if !n.hasRaftState() {
			n.tryBootstrap()
		}
		n.confirmClusters(ctx, asked)
		n.savePeers(&saved)
		if n.leaving.Load() && !n.removed.Load() {
			// A leave that failed (Leave's ctx ended) goes on: the leader
			// removes this node as soon as it hears.
			n.tellLeader(ctx)
		}
	}
}

// confirmClusters asks each live node that gossip shows without a cluster
// id, once we have one, for its own metadata. What a third party passed on
// may predate the node's cluster: a node of another cluster heard that way
// would be listed as a broker until memberlist's next periodic sync (30 s),
// since its own later updates, refused as foreign, never replace it. Asked
// directly, a foreign node is forgotten (MergeRemoteState); a fresh node
// waiting to join just shows it has no cluster yet. Each node is asked at
// most every few seconds: asked holds when.
func (n *Node) confirmClusters(ctx context.Context, asked map[int32]time.Time) {
	if n.clusterID() == "" {
		return
	}
	for _, m := range n.gossip.snapshot() {
		if m.meta.ID == n.cfg.NodeID || m.meta.ClusterID != "" || !alive(m.state) {
			continue
		}
		if last, ok := asked[m.meta.ID]; ok && time.Since(last) < confirmEvery {
			continue
		}
		asked[m.meta.ID] = time.Now()
		n.gossip.askDirectly(ctx, m)
	}
}

// confirmEvery is how often confirmClusters asks one node again.
const confirmEvery = 5 * time.Second

// reconcileVoters is the leader service that makes the Raft voters follow
// gossip: at the start of the term, on every gossip change and every
// second (a fresh node's wait or a dead node's reap time passes without an
// event).
func (n *Node) reconcileVoters(ctx context.Context) error {
	// A non-voter's progress is measured afresh in every term.
	n.reconcileMu.Lock()
	clear(n.promoting)
	n.reconcileMu.Unlock()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		n.reconcile(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-n.gossip.changed:
		case <-tick.C:
		}
	}
}

// tryBootstrap bootstraps once BootstrapExpect nodes without Raft state see
// each other and no node with state does (that cluster adds us instead).
// Every such node computes the same voter set: the lowest node ids.
func (n *Node) tryBootstrap() {
	expect := n.cfg.BootstrapExpect
	if expect <= 1 && len(n.cfg.Join) > 0 {
		return // joining an existing cluster: wait to be added
	}
	fresh := []nodeMeta{}
	sawSelf := false
	for _, m := range n.gossip.snapshot() {
		sawSelf = sawSelf || m.meta.ID == n.cfg.NodeID
		if !alive(m.state) {
			continue
		}
		if m.meta.HasState {
			return
		}
		if m.meta.Expect == expect {
			fresh = append(fresh, m.meta)
		}
	}
	if !sawSelf {
		fresh = append(fresh, n.gossip.localMeta())
		sort.Slice(fresh, func(i, j int) bool { return fresh[i].ID < fresh[j].ID })
	}
	if len(fresh) < expect {
		return
	}
	fresh = fresh[:expect]
	var cfg raft.Configuration
	self := false
	for _, m := range fresh {
		self = self || m.ID == n.cfg.NodeID
		cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(strconv.Itoa(int(m.ID))), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Voter})
	}
	if !self {
		return // the bootstrap set leaves us out; the leader will add us
	}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		n.log.Error("bootstrap", "err", err)
		return
	}
	n.log.Info("bootstrapped the cluster", "voters", len(cfg.Servers))
}

// reconcile makes the Raft voters match gossip: alive nodes join as
// non-voters and are promoted to voters once caught up (or get their
// address fixed), nodes that left are removed, and failed nodes are
// removed only after DeadNodeReapAfter. The leader never removes itself,
// and a restart never removes anyone.
func (n *Node) reconcile(ctx context.Context) {
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	fut := n.raft.GetConfiguration()
	if err := fut.Error(); err != nil {
		return
	}
	servers := map[raft.ServerID]raft.Server{}
	for _, s := range fut.Configuration().Servers {
		servers[s.ID] = s
	}
	self := raft.ServerID(strconv.Itoa(int(n.cfg.NodeID)))
	reap := n.cfg.DeadNodeReapAfter
	if reap <= 0 {
		reap = 72 * time.Hour
	}
	for _, m := range n.gossip.snapshot() {
		id := raft.ServerID(strconv.Itoa(int(m.meta.ID)))
		if id == self {
			continue
		}
		srv, inConfig := servers[id]
		addr, isVoter := srv.Address, inConfig && srv.Suffrage == raft.Voter
		if isVoter || !inConfig {
			delete(n.promoting, m.meta.ID)
		}
		switch {
		case m.meta.Leaving && !n.cfg.pushBareMeta:
			// It announced a graceful leave (Leave): remove it whatever
			// gossip now says of it. Failed is what a node that held it
			// dead when the leave came (after a partition) keeps showing,
			// and one that dies while it waits to be removed shows too.
			if inConfig {
				n.removeVoter(id, "left the cluster")
			}
		case alive(m.state) && !isVoter && m.meta.Level < n.fsm.FeatureLevel():
			if !n.refusedOld[m.meta.ID] {
				n.log.Warn("not adding a voter: its kgate is older than the cluster's feature level",
					"node_id", m.meta.ID, "its_level", m.meta.Level, "cluster_level", n.fsm.FeatureLevel())
				n.refusedOld[m.meta.ID] = true
			}
		case alive(m.state) && !inConfig && !n.mayJoin(ctx, m):
			// Not yet: it has Raft state but has not shown it is ours.
		case alive(m.state) && (!inConfig || addr != raft.ServerAddress(m.meta.RaftAddr)) && !n.linkProven(m):
			// Its Raft port does not show a certificate of the cluster's CA
			// naming it (LinkTLS): a voter no node can replicate to would
			// only shrink the quorum's margin.
		case alive(m.state) && isVoter:
			if addr != raft.ServerAddress(m.meta.RaftAddr) {
				n.log.Info("adding voter", "node_id", m.meta.ID, "raft_addr", m.meta.RaftAddr)
				if err := n.raft.AddVoter(id, raft.ServerAddress(m.meta.RaftAddr), 0, 10*time.Second).Error(); err != nil {
					n.log.Warn("add voter", "node_id", m.meta.ID, "err", err)
				}
			}
		case alive(m.state) && (!inConfig || addr != raft.ServerAddress(m.meta.RaftAddr)):
			// A newcomer replicates as a non-voter first: as a voter right
			// away it would count toward the quorum before it holds the log
			// (one voter to two: no quorum until it caught up; one that
			// cannot catch up would stall the cluster).
			n.log.Info("adding non-voter", "node_id", m.meta.ID, "raft_addr", m.meta.RaftAddr)
			delete(n.promoting, m.meta.ID)
			if err := n.raft.AddNonvoter(id, raft.ServerAddress(m.meta.RaftAddr), 0, 10*time.Second).Error(); err != nil {
				n.log.Warn("add non-voter", "node_id", m.meta.ID, "err", err)
			}
		case alive(m.state):
			n.promoteWhenCaughtUp(ctx, m, id)
		case m.state == memberlist.StateLeft && inConfig:
			n.removeVoter(id, "left the cluster")
		case m.state == memberlist.StateDead && inConfig && time.Since(m.since) > reap:
			n.removeVoter(id, "failed longer than --dead-node-reap-after")
		}
	}
}

// promoteAfter is how long a non-voter must stay caught up before it is
// made a voter (autopilot's server stabilization time, shorter: joins here
// happen with the cluster serving, and the lag is measured directly).
const promoteAfter = 2 * time.Second

// promoteMaxLag is how many entries a caught-up non-voter may trail the
// leader's commit index by (appends still in flight under load).
const promoteMaxLag = 64

// catchUp is a non-voter's progress as the leader's reconcile follows it.
type catchUp struct {
	floor uint64    // the leader's commit index when it first saw the non-voter
	since time.Time // caught up since (zero: not caught up)
	lag   uint64    // the last lag measured, for the log
}

// promoteWhenCaughtUp makes the non-voter m a voter once it has held the
// log up to where it was when the leader first saw it, trails the commit
// index by at most promoteMaxLag, and has done so for promoteAfter. Its
// log end comes from the node itself (a push-pull).
func (n *Node) promoteWhenCaughtUp(ctx context.Context, m member, id raft.ServerID) {
	p := n.promoting[m.meta.ID]
	if p == nil {
		p = &catchUp{floor: n.raft.CommitIndex()}
		n.promoting[m.meta.ID] = p
	}
	commit := n.raft.CommitIndex()
	ps, ok := n.gossip.exchange(ctx, m)
	switch {
	case ok && ps.Version == 0:
		// A release from before pushState reports no progress (an older
		// binary joining, as going back to it does): make it a voter at
		// once, as that release's leaders did.
		n.log.Info("promoting a non-voter of an older kgate, which reports no progress", "node_id", m.meta.ID)
	case !ok || ps.LastIndex < p.floor || ps.LastIndex+promoteMaxLag < commit:
		n.behindChecks.Add(1)
		if !p.since.IsZero() || p.lag == 0 {
			n.log.Info("non-voter not caught up; not promoting it yet", "node_id", m.meta.ID, "its_last_index", ps.LastIndex, "commit_index", commit, "reached", ok)
		}
		p.since, p.lag = time.Time{}, max(1, commit-min(commit, ps.LastIndex))
		return
	case p.since.IsZero():
		p.since = time.Now()
		return
	case time.Since(p.since) < promoteAfter:
		return
	default:
		n.log.Info("promoting a caught-up non-voter to voter", "node_id", m.meta.ID, "its_last_index", ps.LastIndex, "commit_index", commit)
	}
	if err := n.raft.AddVoter(id, raft.ServerAddress(m.meta.RaftAddr), 0, 10*time.Second).Error(); err != nil {
		n.log.Warn("promote to voter", "node_id", m.meta.ID, "err", err)
		return
	}
	delete(n.promoting, m.meta.ID)
}

// mayJoin reports whether a node that is not a voter may become one: a
// node whose gossip metadata shows this cluster's id, or one that says,
// asked directly, that it has no Raft state. Metadata heard through third
// parties can be stale: a node may still show what it sent before it
// bootstrapped a cluster of its own, and if it has not applied its log yet
// it shows no cluster id. Adding such a node would let this leader
// overwrite another cluster's log.
func (n *Node) mayJoin(ctx context.Context, m member) bool {
	if ours := n.clusterID(); m.meta.HasState {
		return ours != "" && m.meta.ClusterID == ours
	}
	fresh, ok := n.gossip.askDirectly(ctx, m)
	return ok && !fresh.meta.HasState
}

// linkProven reports, with LinkTLS, whether m's Raft port completes a
// mutual TLS handshake with a certificate of the cluster's CA naming m;
// without LinkTLS it is always true.
func (n *Node) linkProven(m member) bool {
	if n.cfg.LinkTLS == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := n.cfg.LinkTLS.dialTLS(ctx, m.meta.RaftAddr, m.meta.ID)
	if err != nil {
		if !n.refusedLink[m.meta.ID] {
			n.log.Warn("not adding a voter: its Raft port does not prove it is a node of this cluster",
				"node_id", m.meta.ID, "raft_addr", m.meta.RaftAddr, "err", err)
			n.refusedLink[m.meta.ID] = true
		}
		return false
	}
	delete(n.refusedLink, m.meta.ID)
	nc.Close()
	return true
}

func (n *Node) removeVoter(id raft.ServerID, why string) {
	n.log.Info("removing voter", "node_id", id, "why", why)
	if err := n.raft.RemoveServer(id, 0, 10*time.Second).Error(); err != nil {
		n.log.Warn("remove voter", "node_id", id, "err", err)
	}
}

// transferLeadership hands leadership to an up-to-date follower before this
// leader stops, so clients see a sub-second hand-over instead of an election.
// A node halted on its disk transfers nothing (haltedOnDisk), and a
// transfer under way is abandoned when it halts so.
func (n *Node) transferLeadership() {
	if n.haltedOnDisk() {
		return
	}
	fut := n.raft.GetConfiguration()
	if !n.awaitRaft(fut) || fut.Error() != nil || len(fut.Configuration().Servers) < 2 {
		return
	}
	for try := 0; try < 3; try++ {
		tf := n.raft.LeadershipTransfer()
		if !n.awaitRaft(tf) {
			n.log.Warn("leadership transfer abandoned: this node halted on a failed write of its Raft store")
			return
		}
		err := tf.Error()
		if err == nil {
			n.log.Info("leadership transferred")
			return
		}
		n.log.Warn("leadership transfer", "try", try+1, "err", err)
	}
}

// haltedOnDisk reports whether the node halted on a failed write of its
// Raft store (diskHalted).
func (n *Node) haltedOnDisk() bool {
	select {
	case <-n.diskHalted:
		return true
	default:
		return false
	}
}

// awaitRaft waits until Raft answers f, or reports false once the node
// halts on its disk: Raft's goroutine, which answers, may then be held in
// the failed write until Shutdown, and Shutdown may be the caller (seen in
// the campaign: a leader's shutdown hung on its transfer for six minutes,
// heartbeating, while the others could elect nobody). The goroutine that
// waits then ends once Raft answers, which it may never do before the
// process exits; it holds nothing. It reports false too once Raft was told
// to stop: a transfer's future still queued then is never answered
// (hashicorp/raft gives it no shutdown channel), and a hand-over started
// by a halt (haltWith) would hold Shutdown's wait for the node's
// goroutines.
func (n *Node) awaitRaft(f raft.Future) bool {
	done := make(chan struct{})
	go func() {
		f.Error()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-n.diskHalted:
		return false
	case <-n.raftStopped:
		return false
	}
}

// Leave decommissions this node: leadership is handed over, gossip
// metadata announces the leave, and once the leader says it has removed
// this node from the voters, gossip announces a graceful leave. A plain
// stop (Shutdown) keeps the node a voter.
//
// The leader learns of the leave from this node's metadata, which this
// node also pushes to it directly until it answers that the node is no
// longer a voter: a leader that holds this node as failed (gossip after a
// partition can take many seconds to call it alive again) would never hear
// a leave broadcast, as memberlist ignores the leave of a node it holds
// dead. If ctx ends first, Leave fails and the node stays a voter; it
// stays marked as leaving, so any leader that hears of it later removes
// it, and Leave may be called again.
func (n *Node) Leave(ctx context.Context) error {
	if n.gossip == nil {
		return errors.New("cluster: no gossip to leave")
	}
	if n.raft.State() == raft.Leader {
		n.transferLeadership()
	}
	// Announce the leave in our metadata first (see nodeMeta.Leaving):
	// refresh returns once that broadcast went out, before the leave
	// message would invalidate it.
	n.leaving.Store(true)
	n.gossip.refresh()
	if err := n.awaitRemoval(ctx); err != nil {
		return err
	}
	return n.gossip.ml.Leave(5 * time.Second)
}

// awaitRemoval waits until the leader answers that this node is not a
// voter, telling it of the leave directly every retry interval.
func (n *Node) awaitRemoval(ctx context.Context) error {
	retry := time.NewTicker(250 * time.Millisecond)
	defer retry.Stop()
	for {
		if n.raft.State() == raft.Leader {
			n.transferLeadership()
		}
		why := n.tellLeader(ctx)
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: node %d is still a voter: %s; it stays marked as leaving (the leader removes it once it hears), retry the leave", n.cfg.NodeID, why)
		case <-n.stop:
			return errors.New("cluster: node stopped while leaving")
		case <-retry.C:
		}
	}
}

// tellLeader pushes this leaving node's state (its metadata says it is
// leaving) to the leader directly and returns "" once this node is no
// longer a voter, or why it still is.
func (n *Node) tellLeader(ctx context.Context) (why string) {
	self := raft.ServerID(strconv.Itoa(int(n.cfg.NodeID)))
	voters, ok := n.configuredVoters()
	switch {
	case !ok:
		return "its Raft configuration is unreadable"
	case !voters[self]:
		n.removed.Store(true)
		return "" // never was one, or the removal reached this node
	case len(voters) == 1:
		// The last voter: no one is left to remove it. As before, gossip
		// alone hears of the leave.
		return ""
	case n.raft.State() == raft.Leader:
		return "leadership could not be handed over"
	}
	leader, ok := n.gossipOfLeader()
	if !ok {
		return "no leader is known to gossip"
	}
	lv, ok, older := n.gossip.leaderVoters(ctx, leader)
	if older {
		// A leader from before this answer (a rolling upgrade) removes a
		// node once gossip says it left: leave as those releases did.
		if !n.removed.Swap(true) {
			n.log.Info("the leader runs an older kgate; leaving by gossip alone", "leader", leader.meta.ID)
		}
		return ""
	}
	if !ok {
		return fmt.Sprintf("the leader (node %d) could not be told", leader.meta.ID)
	}
	if slices.Contains(lv, n.cfg.NodeID) {
		return fmt.Sprintf("the leader (node %d) has not removed it yet", leader.meta.ID)
	}
	if !n.removed.Swap(true) {
		n.log.Info("the leader removed this node from the voters", "leader", leader.meta.ID)
	}
	return ""
}

// configuredVoters returns the voters of this node's latest Raft
// configuration.
func (n *Node) configuredVoters() (map[raft.ServerID]bool, bool) {
	fut := n.raft.GetConfiguration()
	if fut.Error() != nil {
		return nil, false
	}
	out := map[raft.ServerID]bool{}
	for _, s := range fut.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out[s.ID] = true
		}
	}
	return out, true
}

// gossipOfLeader is what gossip knows of the node Raft names as leader.
func (n *Node) gossipOfLeader() (member, bool) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return member{}, false
	}
	return n.gossip.member(id)
}

// Voter is one Raft voter as the admin API reports it.
type Voter struct {
	ID      int32
	Address string
}

// Voters lists the Raft configuration's voters.
func (n *Node) Voters() []Voter { return n.servers(raft.Voter) }

// NonVoters lists the Raft configuration's non-voters: nodes that joined
// and are catching up before the leader promotes them (Kafka's observers).
func (n *Node) NonVoters() []Voter { return n.servers(raft.Nonvoter) }

// servers lists the Raft configuration's servers of one suffrage, by id.
func (n *Node) servers(suffrage raft.ServerSuffrage) []Voter {
	fut := n.raft.GetConfiguration()
	if fut.Error() != nil {
		return nil
	}
	var out []Voter
	for _, s := range fut.Configuration().Servers {
		if s.Suffrage != suffrage {
			continue
		}
		id, err := strconv.Atoi(string(s.ID))
		if err != nil {
			continue
		}
		out = append(out, Voter{ID: int32(id), Address: string(s.Address)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// MemberInfo is one node as the admin API reports it.
type MemberInfo struct {
	ID          int32  `json:"id"`
	KafkaAddr   string `json:"kafka_addr"`
	RaftAddr    string `json:"raft_addr"`
	GossipAddr  string `json:"gossip_addr"`
	AdminAddr   string `json:"admin_addr"`
	GossipState string `json:"gossip_state"`
	Voter       bool   `json:"voter"`
	Leader      bool   `json:"leader"`
	// Suffrage is the node's place in the Raft configuration: "voter",
	// "nonvoter" (a newcomer catching up before the leader promotes it) or
	// "none".
	Suffrage string `json:"suffrage"`
}

// Members lists every node known to gossip or to Raft, by node id.
func (n *Node) Members() []MemberInfo {
	leader, hasLeader := n.LeaderID()
	byID := map[int32]*MemberInfo{}
	self := n.cfg.NodeID
	byID[self] = &MemberInfo{ID: self, KafkaAddr: n.cfg.KafkaAddr, RaftAddr: n.cfg.RaftAddr,
		GossipAddr: n.cfg.GossipAddr, AdminAddr: n.cfg.AdminAddr, GossipState: "alive"}
	if n.gossip != nil {
		for _, m := range n.gossip.snapshot() {
			if m.meta.ID == self {
				continue
			}
			byID[m.meta.ID] = &MemberInfo{ID: m.meta.ID, KafkaAddr: m.meta.KafkaAddr, RaftAddr: m.meta.RaftAddr,
				GossipAddr: m.gossipAddr, AdminAddr: m.meta.AdminAddr, GossipState: stateName(m.state)}
		}
	}
	if fut := n.raft.GetConfiguration(); fut.Error() == nil {
		for _, s := range fut.Configuration().Servers {
			id, err := strconv.Atoi(string(s.ID))
			if err != nil {
				continue
			}
			mi := byID[int32(id)]
			if mi == nil {
				mi = &MemberInfo{ID: int32(id), RaftAddr: string(s.Address), GossipState: "unknown"}
				byID[int32(id)] = mi
			}
			mi.Voter = s.Suffrage == raft.Voter
			mi.Suffrage = "nonvoter"
			if mi.Voter {
				mi.Suffrage = "voter"
			}
		}
	}
	out := make([]MemberInfo, 0, len(byID))
	for _, mi := range byID {
		if mi.Suffrage == "" {
			mi.Suffrage = "none"
		}
		mi.Leader = hasLeader && mi.ID == leader
		out = append(out, *mi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func stateName(s memberlist.NodeStateType) string {
	switch s {
	case memberlist.StateAlive:
		return "alive"
	case memberlist.StateSuspect:
		return "suspect"
	case memberlist.StateDead:
		return "failed"
	case memberlist.StateLeft:
		return "left"
	}
	return "unknown"
}

// Ready reports whether a leader is known and this node has caught up
// (CaughtUp).
func (n *Node) Ready() bool {
	if n.HaltErr() != nil {
		return false
	}
	if _, ok := n.LeaderID(); !ok {
		return false
	}
	return n.CaughtUp()
}

// Replicas returns the voters' node ids and, of those, the ones in contact:
// this node, and every other voter gossip sees alive. Not Brokers, which
// also leaves out a leader this follower lost contact with a moment ago
// (so that clients go elsewhere): the Iggy backend's partition leaders
// follow gossip too, and a partition listed as led by a node missing from
// its own ISR is what kafka-topics showed then.
func (n *Node) Replicas() (replicas, isr []int32) {
	alive := map[int32]bool{n.cfg.NodeID: true}
	live, _ := n.LiveNodes()
	for _, b := range live {
		alive[b.ID] = true
	}
	for _, v := range n.Voters() {
		replicas = append(replicas, v.ID)
		if alive[v.ID] {
			isr = append(isr, v.ID)
		}
	}
	if replicas == nil {
		replicas, isr = []int32{}, []int32{}
	}
	return replicas, isr
}
