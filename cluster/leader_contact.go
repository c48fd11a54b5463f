package cluster

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/internal/worktime"
)

// How a follower tells a live leader from a dead one before Raft's own
// election timer says so. Clients ask for metadata the moment their
// connection to a killed leader breaks; an answer that still names it
// costs them their metadata refresh interval (5 s by default in franz-go)
// of dialling a dead node. So a follower names its leader only while the
// leader is evidently alive:
//
//   - a leader process that dies closes its Raft connections, and the
//     follower reads EOF on them at once (watchedStream);
//   - a leader that goes silent (a dead machine, a partition) is given up
//     after contactLostAfter, a few missed heartbeats, well before the
//     election timeout.
//
// Either way a wrongly suspected leader costs only a wait until its next
// heartbeat (a tenth of the heartbeat timeout): the gateway waits for a
// leader it can name rather than answering "no leader".

// contactLostAfter is how long a follower goes without hearing from its
// leader before it stops naming it. Raft's leader heartbeats every tenth
// of the heartbeat timeout (up to a fifth, with its jitter).
func (n *Node) contactLostAfter() time.Duration { return n.heartbeatTimeout() / 2 }

// inContact reports whether this follower has heard from its leader since
// the last Raft connection closed and within contactLostAfter.
func (n *Node) inContact() bool {
	last := n.raft.LastContact()
	if time.Since(last) > n.contactLostAfter() {
		return false
	}
	return n.connClosed.Load() <= last.UnixNano()
}

// noteConnClosed records that an inbound Raft connection ended.
func (n *Node) noteConnClosed() {
	n.connClosed.Store(time.Now().UnixNano())
	select {
	case n.connEnded <- struct{}{}:
	default:
	}
}

// hastenElections starts the election as soon as this follower suspects
// its leader died (a Raft connection ended after the leader's last
// contact), instead of waiting out Raft's heartbeat timeout and its jitter
// (up to twice as long) for a leader whose process is known to be gone.
//
// Both survivors see the connections end at once. Left to Raft's random
// timers they time out within a few hundred milliseconds of each other
// and, when both ask for votes in the same moment, split the vote: then
// the election waits out the election timeout and its jitter again (the
// 1.2-1.5 s elections seen under load). So the survivors take turns, in
// the order of their node ids. The first stands (see stand) suspectAfter
// (half the heartbeat timeout) after it saw the connections end, and wins
// at once unless another survivor's log is longer. That one refuses it
// (it sees the vote request in Raft's observations and compares the logs
// as Raft does) and then stands at once, and wins. A later survivor's own turn comes only a whole heartbeat
// timeout after the one before, for when the earlier ones never stood
// (one that missed the connections' end): standing deposes whoever leads
// by then and splits the vote with a candidate of the same term, so a
// survivor must not stand while an earlier one's vote request may still be
// on its way (seen: survivors that noticed the end 50 ms apart, and a vote
// request that took longer than that, on a loaded machine).
//
// A wrongly suspected live leader heartbeats every tenth of the heartbeat
// timeout, well within suspectAfter, so the turn never comes; the turn is
// dropped once a leader is in contact again or an election began, and
// skipped if another leader is known by then.
func (n *Node) hastenElections() {
	defer n.wg.Done()
	var (
		turn    *time.Timer // this follower's turn to stand, while suspecting
		suspect raft.ServerID
		term    uint64 // the term when the suspicion began
		refused uint64 // the term of a vote request this node refuses
	)
	turnC := func() <-chan time.Time {
		if turn == nil {
			return nil
		}
		return turn.C
	}
	disarm := func() {
		if turn != nil {
			turn.Stop()
			turn = nil
		}
	}
	defer disarm()
	poll := time.NewTicker(25 * time.Millisecond)
	defer poll.Stop()
	for {
		fire := false
		select {
		case <-n.stop:
			return
		case <-n.connEnded:
		case <-turnC():
			fire = true
		case o := <-n.votes:
			// Another survivor stood. If this one's log is longer, it
			// refuses the vote (Raft observes the request before
			// answering it): it then stands itself, at once.
			req, ok := o.Data.(raft.RequestVoteRequest)
			if !ok || turn == nil || req.Term <= term || !n.logLongerThan(req.LastLogTerm, req.LastLogIndex) {
				continue
			}
			fire, refused = true, req.Term
		case <-poll.C:
			if turn == nil {
				continue
			}
		}
		if n.raft.State() != raft.Follower || n.inContact() {
			disarm() // the leader is back, or an election began without us
			continue
		}
		if turn == nil {
			_, suspect = n.raft.LeaderWithID()
			term, refused = n.raft.CurrentTerm(), 0
			turn = time.NewTimer(n.suspectAfter() + n.turnOffset())
			continue
		}
		if fire {
			disarm()
			// Stand once Raft has taken the refused request's term, or
			// the candidate would look like a voter that moved on.
			if refused > 0 && !n.awaitTerm(refused) {
				continue
			}
			if _, id := n.raft.LeaderWithID(); id == "" || id == suspect {
				n.stand()
			}
		}
	}
}

// awaitTerm waits (a quarter of the heartbeat timeout at most) until Raft's
// term is at least term.
func (n *Node) awaitTerm(term uint64) bool {
	deadline := time.NewTimer(n.heartbeatTimeout() / 4)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for n.raft.CurrentTerm() < term {
		select {
		case <-poll.C:
		case <-deadline.C:
			return false
		case <-n.stop:
			return false
		}
	}
	return true
}

// logLongerThan reports whether this node's log is more up to date than
// one ending at (term, index), the way a voter compares a candidate's.
func (n *Node) logLongerThan(term, index uint64) bool {
	lastTerm, err := strconv.ParseUint(n.raft.Stats()["last_log_term"], 10, 64)
	if err != nil {
		return false
	}
	return lastTerm > term || lastTerm == term && n.raft.LastIndex() > index
}

// suspectAfter is how long after the leader's connections ended the first
// survivor stands, if it has not heard from the leader since.
func (n *Node) suspectAfter() time.Duration { return n.heartbeatTimeout() / 2 }

// stand makes this follower a candidate now, as a leader makes its
// successor one in a leadership transfer: by Raft's TimeoutNow, sent to
// itself. Lowering the heartbeat timeout instead (ReloadConfig) would
// need the leader lease to be no longer than the lowered timeout, and a
// lease that short deposes leaders that were merely starved of CPU.
//
// Such a candidate skips pre-vote, and the others grant it their vote
// even while they still follow the old leader (as for a transfer), so
// the election ends in one round even when the other survivor has not
// seen the leader's connections end (it would have refused a pre-vote
// "since we have a leader" until its own heartbeat timeout, as in one
// kill of 300 in make failover-bench). Votes still go only to a log at
// least as long as the voter's, and one per term, so Raft's safety holds.
// What a wrong stand costs is an election: it replaces a live leader, or
// splits the vote with another survivor that stood a moment before. So
// it takes a connection's end and no word from the leader since, and
// first asks the other voters their term (newerTermAmong).
func (n *Node) stand() {
	fut := n.raft.GetConfiguration()
	if fut.Error() != nil {
		return
	}
	self := raft.ServerID(strconv.Itoa(int(n.cfg.NodeID)))
	_, leader := n.raft.LeaderWithID()
	voter := false
	voters := 0
	var others []raft.Server
	for _, s := range fut.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		switch {
		case s.Suffrage != raft.Voter:
		case s.ID == self:
			voter = true
		case s.ID != leader:
			others = append(others, s)
		}
	}
	if !voter || n.raft.State() != raft.Follower || n.inContact() {
		return
	}
	term := n.raft.CurrentTerm()
	id, newer, answered := n.newerTermAmong(others, term)
	if newer {
		n.log.Info("not standing for election: another voter has moved on", "voter", id, "term", term)
		return
	}
	// Standing skips pre-vote and moves this node to a new term, which
	// deposes the leader the moment the two hear from each other again.
	// A node whose leader's connections ended because the node itself was
	// cut off (a partition that closes connections) would, once healed,
	// depose a leader that never failed: an election and every group
	// member's coordinator moving for nothing (the fault campaign: a
	// follower cut off for 5 s, a librdkafka member's session lost to the
	// two coordinator changes that followed). So it stands only with
	// enough voters answering to elect it; otherwise Raft's own timer and
	// pre-vote decide, which change no term while the node is cut off.
	if 1+answered < majority(voters) {
		n.log.Info("not standing for election: too few voters answer", "answered", answered, "voters", voters)
		return
	}
	// Only this node's links to the leader may have gone (a partition
	// that leaves the others in touch with it): then the leader lives,
	// and standing would depose it for nothing (the fault campaign's
	// bridge partitions: an election at every cut, and a librdkafka
	// member's session lost to it). Another voter that heard from the
	// leader much more recently than this node did says so; in a leader's
	// death all of them lost it at about the same time.
	since := time.Since(n.raft.LastContact())
	if v, ago, ok := n.leaderHeardAmong(others, leader, since/2); ok {
		n.log.Info("not standing for election: another voter hears the leader", "voter", v, "leader", leader,
			"heard_ms_ago", ago, "since_last_contact", since.Round(time.Millisecond))
		return
	}
	if n.raft.CurrentTerm() != term || n.raft.State() != raft.Follower || n.inContact() {
		return // a vote request came meanwhile
	}
	since = time.Since(n.raft.LastContact())
	req := &raft.TimeoutNowRequest{RPCHeader: n.rpcHeader(self)}
	var err error
	select {
	case err = <-n.rpc(func() error {
		return n.trans.TimeoutNow(self, n.trans.LocalAddr(), req, &raft.TimeoutNowResponse{})
	}):
	case <-n.stop:
		return
	}
	if err != nil {
		n.log.Warn("stand for election", "err", err)
		return
	}
	n.log.Info("stood for election: the leader's connections ended", "since_last_contact", since.Round(time.Millisecond))
}

// rpc runs a Raft RPC and hands back its error. It may wait up to the
// transport's timeout (10 s) for a peer that is cut off, or for this
// node's own Raft once it stopped reading: callers wait for it only until
// n.stop, and Shutdown waits for it once the transport is closed.
func (n *Node) rpc(call func() error) <-chan error {
	done := make(chan error, 1)
	n.rpcs.Add(1)
	go func() {
		defer n.rpcs.Done()
		done <- call()
	}()
	return done
}

func (n *Node) rpcHeader(self raft.ServerID) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: n.trans.EncodePeer(self, n.trans.LocalAddr())}
}

// newerTermAmong asks voters for their term, the way a candidate's
// pre-vote does (a pre-vote request changes nothing on the voter, and this
// one is always refused: it claims an empty log), and reports one whose
// term is past term: it has seen another survivor stand (its vote request
// may still be on its way here) or a new leader. Voters that do not answer
// within a quarter of the heartbeat timeout (a dead or cut-off node) count
// as not having moved on; a dead one refuses the connection at once.
// answered counts the voters that answered.
func (n *Node) newerTermAmong(voters []raft.Server, term uint64) (id raft.ServerID, newer bool, answered int) {
	self := raft.ServerID(strconv.Itoa(int(n.cfg.NodeID)))
	type answer struct {
		id   raft.ServerID
		term uint64
	}
	answers := make(chan answer, len(voters))
	for _, v := range voters {
		n.rpcs.Add(1) // see rpc
		go func() {
			defer n.rpcs.Done()
			req := &raft.RequestPreVoteRequest{RPCHeader: n.rpcHeader(self), Term: term}
			var resp raft.RequestPreVoteResponse
			if err := n.trans.RequestPreVote(v.ID, v.Address, req, &resp); err != nil {
				answers <- answer{id: v.ID}
				return
			}
			answers <- answer{id: v.ID, term: resp.Term}
		}()
	}
	wait := time.NewTimer(n.heartbeatTimeout() / 4)
	defer wait.Stop()
	for range voters {
		select {
		case a := <-answers:
			if a.term > term {
				return a.id, true, answered + 1
			}
			if a.term > 0 {
				answered++
			}
		case <-wait.C:
			return "", false, answered
		case <-n.stop:
			return "", false, answered
		}
	}
	return "", false, answered
}

// leaderHeardAmong asks voters, by a gossip push-pull each, when they
// last heard from leader, and reports one that did less than within ago.
// Voters that do not answer within a quarter of the heartbeat timeout,
// follow another leader or run a binary that does not say count as not
// hearing it.
func (n *Node) leaderHeardAmong(voters []raft.Server, leader raft.ServerID, within time.Duration) (id raft.ServerID, agoMs int64, heard bool) {
	lid, err := strconv.Atoi(string(leader))
	if n.gossip == nil || err != nil {
		return "", 0, false
	}
	stopCtx, stop := n.untilStop(context.Background())
	defer stop()
	ctx, cancel := context.WithTimeout(stopCtx, n.heartbeatTimeout()/4)
	defer cancel()
	type answer struct {
		id    raft.ServerID
		agoMs int64
		heard bool
	}
	answers := make(chan answer, len(voters))
	for _, v := range voters {
		m, known := n.gossip.member(v.ID)
		if !known {
			answers <- answer{}
			continue
		}
		n.rpcs.Add(1) // see rpc
		go func() {
			defer n.rpcs.Done()
			ps, ok := n.gossip.exchange(ctx, m)
			if !ok || ps.LeaderHeardMs == nil || ps.LeaderID != int32(lid) {
				answers <- answer{}
				return
			}
			answers <- answer{v.ID, *ps.LeaderHeardMs, time.Duration(*ps.LeaderHeardMs)*time.Millisecond < within}
		}()
	}
	for range voters {
		select {
		case a := <-answers:
			if a.heard {
				return a.id, a.agoMs, true
			}
		case <-ctx.Done():
			return "", 0, false
		}
	}
	return "", 0, false
}

// turnOffset is how long after the others this follower stands for
// election when its leader seems dead: one stagger per surviving voter
// with a lower node id, each the heartbeat timeout (500 ms by default):
// much more than a vote's round trip between live nodes, even loaded ones.
func (n *Node) turnOffset() time.Duration {
	fut := n.raft.GetConfiguration()
	if fut.Error() != nil {
		return 0
	}
	// The leader Raft still follows; a node restarted since the last
	// election has not seen it elected, only heard from it.
	_, leader := n.raft.LeaderWithID()
	if leader == "" {
		leader = n.lastLeaderID()
	}
	rank := 0
	for _, s := range fut.Configuration().Servers {
		if s.Suffrage != raft.Voter || s.ID == leader {
			continue
		}
		if id, err := strconv.Atoi(string(s.ID)); err == nil && int32(id) < n.cfg.NodeID {
			rank++
		}
	}
	return time.Duration(rank) * n.heartbeatTimeout()
}

func (n *Node) lastLeaderID() raft.ServerID {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	return n.lastLeader
}

// watchedConn is an inbound Raft connection that calls closed once when
// it ends: a read error or EOF, a write error, or its close. Raft's
// handler stops at a failed write without reading again (a response to a
// leader killed while it waited for it meets a broken pipe), so reads
// alone can miss the leader's death, and the follower then waits out
// Raft's whole heartbeat timeout instead of taking its turn.
type watchedConn struct {
	net.Conn
	closed func()
	once   sync.Once
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(c.closed)
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.once.Do(c.closed)
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.once.Do(c.closed)
	return c.Conn.Close()
}

// departedHold bounds how long a leader this node saw replaced stays out of
// Brokers while gossip has not seen it since (see noteLeader).
const departedHold = 10 * time.Second

// noteLeader follows Raft's leader observations. A leader replaced by
// another (or by an election) is usually dead, but gossip needs seconds to
// say so; until it has a newer word on that node, or departedHold passes,
// Brokers leaves it out, so that clients refreshing their metadata after
// the failover do not keep it among the nodes they pick for lookups.
func (n *Node) noteLeader(id raft.ServerID) {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	if n.departed == nil {
		n.departed = map[int32]time.Time{}
	}
	if v, err := strconv.Atoi(string(id)); err == nil {
		delete(n.departed, int32(v))
	}
	if prev, err := strconv.Atoi(string(n.lastLeader)); err == nil && id != n.lastLeader && int32(prev) != n.cfg.NodeID {
		n.departed[int32(prev)] = time.Now()
	}
	if id != "" {
		n.lastLeader = id
	}
}

// departedHidden reports whether gossip member m is a replaced leader that
// gossip has not seen in a new state since.
func (n *Node) departedHidden(m member) bool {
	n.leaderMu.Lock()
	at, ok := n.departed[m.meta.ID]
	n.leaderMu.Unlock()
	return ok && time.Since(at) < departedHold && m.state == memberlist.StateAlive && !m.since.After(at)
}

// ServingLeader returns the leader clients should be sent to, if there is
// one now: known, in contact, with a known Kafka address and, if it is this
// node, done catching up (see IsLeader).
func (n *Node) ServingLeader() (NodeInfo, bool) {
	id, ok := n.LeaderID()
	if !ok {
		return NodeInfo{}, false
	}
	if id == n.cfg.NodeID {
		return n.Self(), n.IsLeader()
	}
	for _, b := range n.Brokers() {
		if b.ID == id {
			return b, true
		}
	}
	return NodeInfo{}, false
}

// AwaitServingLeader is ServingLeader, waiting (bounded by ctx) while an
// election runs or the new leader catches up.
func (n *Node) AwaitServingLeader(ctx context.Context) (NodeInfo, bool) {
	defer worktime.Wait(ctx)()
	recheck := time.NewTicker(20 * time.Millisecond) // contact, gossip and catching up change without an observation
	defer recheck.Stop()
	for {
		n.leaderMu.Lock()
		ch := n.leaderCh
		n.leaderMu.Unlock()
		if info, ok := n.ServingLeader(); ok {
			return info, true
		}
		select {
		case <-ch:
		case <-recheck.C:
		case <-ctx.Done():
			return NodeInfo{}, false
		case <-n.stop:
			return NodeInfo{}, false
		}
	}
}

// AwaitFreshLeader is AwaitServingLeader on evidence newer than the call: a
// follower names its leader only once it has heard from it after it was
// asked. A client whose connection to the leader has just broken asks a
// follower at once, often before the follower has seen the leader's
// connections close; named the dead leader again, franz-go keeps that
// answer for its 5 s metadata interval (seen in make failover-bench: the
// producer back after 5.15 s where the election took 0.5 s). While the
// leader lives the wait is at most one heartbeat interval (a tenth to a
// fifth of the heartbeat timeout); if it died, its connections close
// within that and the wait becomes the election's.
func (n *Node) AwaitFreshLeader(ctx context.Context) (NodeInfo, bool) {
	defer worktime.Wait(ctx)()
	asked := time.Now()
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for {
		info, ok := n.AwaitServingLeader(ctx)
		if !ok {
			return NodeInfo{}, false
		}
		if info.ID == n.cfg.NodeID || n.raft.LastContact().After(asked) {
			// Heard from after the question; ServingLeader still holds
			// unless a connection closed since.
			if again, ok := n.ServingLeader(); ok && again.ID == info.ID {
				return again, true
			}
			continue
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
			return NodeInfo{}, false
		case <-n.stop:
			return NodeInfo{}, false
		}
	}
}

// CaughtUp reports whether this node has applied every entry it knows to
// be committed. A restarted node starts from its last snapshot with a
// commit index of 0, and learns the commit index only from the leader's
// next append (heartbeats carry none, so it may well be in contact
// before): until then it has not caught up unless its snapshot covers its
// whole log, or a topic created since the snapshot would look deleted.
func (n *Node) CaughtUp() bool {
	return n.knowsCommit() && n.raft.AppliedIndex() >= n.raft.CommitIndex()
}

func (n *Node) knowsCommit() bool {
	return n.raft.CommitIndex() > 0 || n.raft.AppliedIndex() >= n.startIndex
}

// AwaitCaughtUp waits (bounded by ctx) until this node has applied the
// entries committed when it was called: a node restarted a moment ago
// replays its log once the leader tells it the commit index, and until
// then its topics are those of its last snapshot.
func (n *Node) AwaitCaughtUp(ctx context.Context) bool {
	defer worktime.Wait(ctx)()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for !n.knowsCommit() {
		select {
		case <-poll.C:
		case <-ctx.Done():
			return false
		case <-n.stop:
			return false
		}
	}
	target := n.raft.CommitIndex()
	for n.raft.AppliedIndex() < target {
		select {
		case <-poll.C:
		case <-ctx.Done():
			return false
		case <-n.stop:
			return false
		}
	}
	return true
}

// LeaderEpoch is the Raft term, which Kafka clients see as the leader epoch
// of every partition: it grows with every election, so a client can tell a
// newer leader from an older one (KIP-320, KIP-951).
func (n *Node) LeaderEpoch() int32 {
	t := n.raft.CurrentTerm()
	if t > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(t)
}

// ConfirmLeader reports whether this node still leads, confirmed by a
// majority after the call (Raft's VerifyLeader: one heartbeat round), or
// false once ctx ends. A leader cut off from the others still believes it
// leads until its lease runs out; named in a Metadata answer then, it keeps
// a client (franz-go: for its 5 s metadata backoff) on a node that can no
// longer serve it.
func (n *Node) ConfirmLeader(ctx context.Context) bool {
	defer worktime.Wait(ctx)()
	f := n.raft.VerifyLeader()
	done := make(chan error, 1)
	// Ends when Raft answers the future: confirmed, or failed when this
	// node steps down or shuts down, which Raft's lease bounds.
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err == nil
	case <-ctx.Done():
		return false
	}
}
