package coordinator

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/internal/worktime"
)

// JoinRequest is a JoinGroup request.
type JoinRequest struct {
	Group                string
	MemberID             string
	InstanceID           string
	ClientID             string
	ClientHost           string
	ProtocolType         string
	SessionTimeout       time.Duration
	RebalanceTimeout     time.Duration
	Protocols            []fsm.Protocol
	RequireKnownMemberID bool // JoinGroup v4+ (KIP-394)
}

// JoinResult is a JoinGroup answer.
type JoinResult struct {
	Code         int16
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	MemberID     string
	Members      []fsm.MemberMetadata // for the leader only
	// SkipAssignment tells a returning static leader (JoinGroup v9+) that
	// the current assignment stands (KIP-814). PreviousLeader is its member
	// id before it returned: what older versions are told leads, so that
	// the client syncs as a follower instead of assigning in vain.
	SkipAssignment bool
	PreviousLeader string
}

// validGroupID is Kafka's rule for the APIs of a group's members (join,
// sync, heartbeat, leave, offset delete): any id but the empty one, of any
// length the protocol carries. Offset commits and fetches, describe and
// delete take the empty id too, as Kafka does for old clients.
func validGroupID(id string) bool { return id != "" }

// Join adds a member to a group and, unless it can be answered at once,
// parks until the join window closes.
func (c *Coordinator) Join(ctx context.Context, req JoinRequest) JoinResult {
	if code := c.Status(); code != 0 {
		return JoinResult{Code: code, MemberID: req.MemberID}
	}
	fail := func(e *kerr.Error) JoinResult { return JoinResult{Code: e.Code, MemberID: req.MemberID} }
	switch {
	case !validGroupID(req.Group):
		return fail(kerr.InvalidGroupID)
	case req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout)
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return fail(kerr.InconsistentGroupProtocol)
	}
	for _, p := range req.Protocols {
		if len(p.Metadata) > c.cfg.MaxMetadataBytes {
			return fail(kerr.InvalidRequest)
		}
	}
	rebalance := min(max(req.RebalanceTimeout, 0), c.cfg.MaxRebalanceTimeout)
	if rebalance == 0 {
		rebalance = req.SessionTimeout
	}

	c.mu.Lock()
	if !c.active {
		c.mu.Unlock()
		return fail(kerr.NotCoordinator)
	}
	sg := c.soft(req.Group)
	memberID := req.MemberID
	now := c.now()
	switch {
	case memberID == "":
		memberID = newMemberID(req.ClientID, req.InstanceID)
		if req.InstanceID == "" && req.RequireKnownMemberID {
			// KIP-394: hand out an id and let the client come back with it.
			if c.groupSizeLocked(req.Group, sg) >= c.cfg.MaxGroupMembers {
				c.mu.Unlock()
				return fail(kerr.GroupMaxSizeReached)
			}
			if _, members := c.fsm.GroupCounts(); members+c.pendingIDs >= c.cfg.MaxMembers {
				// The FSM answers a join past MaxMembers so too.
				c.mu.Unlock()
				return fail(kerr.CoordinatorNotAvailable)
			}
			sg.pending[memberID] = now.Add(req.SessionTimeout)
			c.pendingIDs++
			c.mu.Unlock()
			return JoinResult{Code: kerr.MemberIDRequired.Code, MemberID: memberID}
		}
	default:
		if _, ok := sg.pending[memberID]; ok {
			delete(sg.pending, memberID)
			c.pendingIDs--
			break
		}
		st := c.fsm.Member(req.Group, memberID, req.InstanceID)
		switch {
		case st.Fenced:
			c.mu.Unlock()
			return fail(kerr.FencedInstanceID)
		case !st.MemberFound, req.InstanceID != "" && req.InstanceID != st.InstanceID:
			// As Kafka: a known member id with an instance id the group
			// does not know is unknown; a member's instance id never changes.
			c.mu.Unlock()
			return fail(kerr.UnknownMemberID)
		}
		req.InstanceID = st.InstanceID
	}
	prev := c.fsm.Group(req.Group)
	wasEmpty := prev == nil || prev.State == fsm.GroupEmpty
	replaced := "" // a static member's previous member id, fenced once this join applies
	if req.InstanceID != "" && prev != nil {
		for _, m := range prev.Members {
			if m.InstanceID == req.InstanceID && m.ID != memberID {
				replaced = m.ID
			}
		}
	}
	if wasEmpty {
		sg.emptyJoins++ // a window another join opens meanwhile is still the initial one
	}
	ch := make(chan JoinResult, 1)
	if old, ok := sg.joinWaiters[memberID]; ok {
		old <- JoinResult{Code: kerr.RebalanceInProgress.Code, MemberID: memberID}
	}
	sg.joinWaiters[memberID] = ch
	c.mu.Unlock()

	res, code := c.proposeChange(ctx, req.Group, reasonJoin, &fsm.JoinGroup{
		Group: req.Group, MemberID: memberID, InstanceID: req.InstanceID, ClientID: req.ClientID,
		ClientHost: req.ClientHost, ProtocolType: req.ProtocolType,
		SessionTimeoutMs: int32(req.SessionTimeout / time.Millisecond), RebalanceTimeoutMs: int32(rebalance / time.Millisecond),
		Protocols: req.Protocols, NowMs: now.UnixMilli(),
		MaxMembers: int32(c.cfg.MaxGroupMembers), MaxGroups: int32(c.cfg.MaxGroups), MaxTotalMembers: int32(c.cfg.MaxMembers),
	})
	c.mu.Lock()
	if wasEmpty {
		sg.emptyJoins--
	}
	if code == 0 && res.Code == 0 {
		c.touchLocked(req.Group, sg, memberID, req.SessionTimeout, c.now())
		if replaced != "" {
			sg.forgetLocked(replaced, kerr.FencedInstanceID.Code)
		}
	}
	if code != 0 || res.Code != 0 || res.Immediate {
		if sg.joinWaiters[memberID] == ch {
			delete(sg.joinWaiters, memberID)
		}
		c.mu.Unlock()
		switch {
		case code != 0:
			return JoinResult{Code: code, MemberID: memberID}
		case res.Code != 0:
			return JoinResult{Code: res.Code, MemberID: memberID}
		}
		return JoinResult{Generation: res.Generation, ProtocolType: res.ProtocolType, Protocol: res.Protocol,
			Leader: res.Leader, MemberID: res.MemberID, Members: res.Members, SkipAssignment: res.SkipAssignment, PreviousLeader: res.PreviousLeader}
	}
	if g := c.fsm.Group(req.Group); g != nil {
		c.syncRebalancingLocked(req.Group, sg, g)
		c.armJoinLocked(req.Group, sg, g, wasEmpty)
	}
	c.mu.Unlock()

	defer worktime.Wait(ctx)() // parked until the join window closes
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		c.mu.Lock()
		if sg.joinWaiters[memberID] == ch {
			delete(sg.joinWaiters, memberID)
		}
		c.mu.Unlock()
		return JoinResult{Code: kerr.RebalanceInProgress.Code, MemberID: memberID}
	}
}

func newMemberID(clientID, instanceID string) string {
	var b [16]byte
	rand.Read(b[:])
	prefix := clientID
	if instanceID != "" {
		prefix = instanceID
	}
	if prefix == "" {
		prefix = "member"
	}
	return prefix + "-" + hex.EncodeToString(b[:4]) + "-" + hex.EncodeToString(b[4:6]) + "-" +
		hex.EncodeToString(b[6:8]) + "-" + hex.EncodeToString(b[8:10]) + "-" + hex.EncodeToString(b[10:])
}

// groupSizeLocked counts members and pending member ids.
func (c *Coordinator) groupSizeLocked(group string, sg *softGroup) int {
	n := len(sg.pending)
	if g := c.fsm.Group(group); g != nil {
		n += len(g.Members)
	}
	return n
}

// syncRebalancingLocked answers parked SyncGroups once the group went back
// to PreparingRebalance: their generation is over.
func (c *Coordinator) syncRebalancingLocked(group string, sg *softGroup, g *fsm.GroupView) {
	if g.State != fsm.GroupPreparingRebalance {
		return
	}
	for id, ch := range sg.syncWaiters {
		ch <- SyncResult{Code: kerr.RebalanceInProgress.Code}
		delete(sg.syncWaiters, id)
	}
	if sg.syncTimer != nil {
		sg.syncTimer.Stop()
		sg.syncTimer = nil
	}
}

// armJoinLocked (re)schedules the end of the join window of a group in
// PreparingRebalance. A group that was empty waits out the initial delay,
// pushed back by each new joiner up to the rebalance timeout (KIP-134);
// otherwise the window closes when every member has rejoined and no
// handed-out member id is pending, or at the rebalance timeout.
func (c *Coordinator) armJoinLocked(group string, sg *softGroup, g *fsm.GroupView, initial bool) {
	if g.State != fsm.GroupPreparingRebalance {
		return
	}
	now := c.now()
	if sg.joinTimer == nil || sg.joinGen != g.Generation || initial {
		sg.windowStart = now
		sg.joinGen = g.Generation
		sg.initialPhase = initial || sg.emptyJoins > 0
	}
	limit := sg.windowStart.Add(c.maxRebalanceTimeout(g))
	deadline := limit
	if sg.initialPhase {
		if d := now.Add(max(c.cfg.InitialRebalanceDelay, 0)); d.Before(limit) {
			deadline = d
		}
	} else if allJoined(g) && len(sg.pending) == 0 {
		deadline = now
	}
	if sg.joinTimer != nil {
		sg.joinTimer.Stop()
	}
	term, gen := c.term, g.Generation
	d := deadline.Sub(now)
	if d <= 0 {
		sg.joinTimer = stoppedTimer{}
		go c.completeJoin(term, group, gen)
		return
	}
	sg.joinTimer = c.clock.AfterFunc(d, func() { c.completeJoin(term, group, gen) })
}

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool { return false }

func allJoined(g *fsm.GroupView) bool {
	for _, m := range g.Members {
		if !m.Joined {
			return false
		}
	}
	return true
}

// completeJoin closes the join window: members that did not rejoin are
// dropped, the generation moves on and every parked join is answered.
func (c *Coordinator) completeJoin(term uint64, group string, gen int32) {
	c.mu.Lock()
	if c.term != term || !c.active {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.keepStaticMembers(group, gen)
	res, code := c.propose(context.Background(), &fsm.CompleteJoin{Group: group, Generation: gen, NowMs: c.now().UnixMilli()})
	if code != 0 || res.Code != 0 {
		return // leadership lost (parked requests are answered) or the group moved on
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term != term {
		return
	}
	sg := c.soft(group)
	sg.joinTimer = nil
	for _, id := range res.Removed {
		sg.forgetLocked(id, kerr.UnknownMemberID.Code)
	}
	now := c.now()
	for _, m := range res.Members {
		if s := sg.sessions[m.MemberID]; s != nil {
			s.last = now
		}
		ch, ok := sg.joinWaiters[m.MemberID]
		if !ok {
			continue
		}
		delete(sg.joinWaiters, m.MemberID)
		r := JoinResult{Generation: res.Generation, ProtocolType: res.ProtocolType, Protocol: res.Protocol,
			Leader: res.Leader, MemberID: m.MemberID}
		if m.MemberID == res.Leader {
			r.Members = res.Members
		}
		ch <- r
	}
	if g := c.fsm.Group(group); g != nil {
		c.armSyncLocked(group, sg, g)
	}
}

// keepStaticMembers rejoins, on their behalf and with what they joined
// with last, the static members that have not rejoined a closing join
// window: as in Kafka (KIP-345), only dynamic members are dropped then; a
// static member stays until its session times out, so an instance that is
// restarting causes one rebalance, not two. (The command is an ordinary
// JoinGroup, which every replica applies alike.)
func (c *Coordinator) keepStaticMembers(group string, gen int32) {
	g := c.fsm.Group(group)
	if g == nil || g.State != fsm.GroupPreparingRebalance || g.Generation != gen {
		return
	}
	for _, m := range g.Members {
		if m.Joined || m.InstanceID == "" || m.ID == g.Leader {
			// An absent leader is dropped: the FSM would keep it leading
			// (Kafka elects a joined member instead), and nobody would assign.
			continue
		}
		_, _ = c.propose(context.Background(), &fsm.JoinGroup{
			Group: group, MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			ProtocolType: g.ProtocolType, SessionTimeoutMs: m.SessionTimeoutMs, RebalanceTimeoutMs: m.RebalanceTimeoutMs,
			Protocols: m.Protocols, NowMs: c.now().UnixMilli(),
		})
	}
}

// removeMembers takes members out (leave, expiry, missed sync) and starts
// the rebalance that follows. guard is the group state the removal was
// decided on (removalGuard); members the FSM keeps because the group moved
// on since keep their session.
func (c *Coordinator) removeMembers(ctx context.Context, group, reason string, ids []string, guard *fsm.RemovalGuard) ([]int16, int16) {
	res, code := c.proposeChange(ctx, group, reason, &fsm.RemoveMembers{Group: group, MemberIDs: ids, NowMs: c.now().UnixMilli(), Guard: guard})
	if code != 0 {
		return nil, code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return res.Codes, res.Code
	}
	sg := c.soft(group)
	var kept []string
	for i, id := range ids {
		switch {
		case res.Code == fsm.ErrStale || (i < len(res.Codes) && res.Codes[i] == fsm.ErrStale):
			kept = append(kept, id)
		case res.Code == 0 && (i >= len(res.Codes) || res.Codes[i] == 0):
			sg.forgetLocked(id, kerr.UnknownMemberID.Code)
		}
	}
	if g := c.fsm.Group(group); g != nil {
		c.keepSessionsLocked(group, sg, g, kept)
		c.syncRebalancingLocked(group, sg, g)
		c.armJoinLocked(group, sg, g, false)
	}
	return res.Codes, res.Code
}

// removalGuard is the state a removal decided now is decided on: the
// group's generation (fsm.AnyGeneration for one valid in every generation)
// and the FSM's applied index, so that the FSM leaves alone a group that
// has moved to another generation, or a member that rejoined, by the time
// the removal is applied. Nil below fsm.LevelGuardedRemoval: a voter may
// still run a kgate that reads only version 1 of RemoveMembers.
func (c *Coordinator) removalGuard(generation int32) *fsm.RemovalGuard {
	if c.fsm.FeatureLevel() < fsm.LevelGuardedRemoval {
		return nil
	}
	return &fsm.RemovalGuard{Generation: generation, AsOf: c.fsm.Applied()}
}

// keepSessionsLocked gives the members among ids that are still in g a
// session again if they have none: deciding their expiry dropped it, and
// the removal did not apply.
func (c *Coordinator) keepSessionsLocked(group string, sg *softGroup, g *fsm.GroupView, ids []string) {
	now := c.now()
	for _, m := range g.Members {
		if slices.Contains(ids, m.ID) && sg.sessions[m.ID] == nil {
			c.touchLocked(group, sg, m.ID, time.Duration(m.SessionTimeoutMs)*time.Millisecond, now)
		}
	}
}

// expirePending forgets KIP-394 member ids that never came back.
func (c *Coordinator) expirePending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return
	}
	now := c.now()
	for group, sg := range c.groups {
		if sg.idle() && c.fsm.Group(group) == nil {
			delete(c.groups, group) // requests for unknown groups leave nothing behind
			continue
		}
		expired := false
		for id, until := range sg.pending {
			if now.After(until) {
				delete(sg.pending, id)
				c.pendingIDs--
				expired = true
			}
		}
		if expired {
			if g := c.fsm.Group(group); g != nil {
				c.armJoinLocked(group, sg, g, false)
			}
		}
	}
}

func (c *Coordinator) expireOffsets(ctx context.Context) {
	if c.Status() != 0 {
		return
	}
	now := c.now().UnixMilli()
	c.propose(ctx, &fsm.ExpireOffsets{NowMs: now, RetentionMs: c.cfg.OffsetsRetention.Milliseconds()})
	c.expireUnsubscribed(ctx, now)
}

// expireUnsubscribed applies KIP-496: in a Stable consumer group, the
// offsets of a topic no member subscribes to any more expire once the
// retention has passed since their commit, as an Empty group's do.
func (c *Coordinator) expireUnsubscribed(ctx context.Context, nowMs int64) {
	retention := c.cfg.OffsetsRetention.Milliseconds()
	for _, sum := range c.fsm.Groups() {
		if sum.State != fsm.GroupStable || sum.ProtocolType != "consumer" {
			continue
		}
		g := c.fsm.Group(sum.ID)
		if g == nil {
			continue
		}
		subs := SubscribedTopics(g)
		if subs == nil {
			continue // subscriptions unknown: every topic counts as subscribed
		}
		offsets, _ := c.fsm.CommittedOffsets(sum.ID)
		var expired []fsm.TopicPartition
		for tp, o := range offsets {
			if !subs[tp.Topic] && nowMs-o.CommitMs > retention {
				expired = append(expired, tp)
			}
		}
		if len(expired) == 0 {
			continue
		}
		slices.SortFunc(expired, func(a, b fsm.TopicPartition) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		c.propose(ctx, &fsm.DeleteOffsets{Group: sum.ID, Partitions: expired})
	}
}

// SubscribedTopics reads the consumer-protocol subscriptions of a group's
// members: nil (every topic) when they cannot be known, as in Kafka — the
// group is not a consumer group, has no protocol selected yet, or a
// member's metadata does not parse.
func SubscribedTopics(g *fsm.GroupView) map[string]bool {
	if g.ProtocolType != "consumer" || g.Protocol == "" {
		return nil
	}
	out := map[string]bool{}
	for _, m := range g.Members {
		for _, p := range m.Protocols {
			if p.Name != g.Protocol {
				continue
			}
			var md kmsg.ConsumerMemberMetadata
			if err := md.ReadFrom(p.Metadata); err != nil {
				return nil
			}
			for _, t := range md.Topics {
				out[t] = true
			}
		}
	}
	return out
}
