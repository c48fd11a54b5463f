package coordinator

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/internal/worktime"
)

// SyncRequest is a SyncGroup request.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   string
	Generation   int32
	ProtocolType *string // v5+
	Protocol     *string // v5+
	Assignments  []fsm.Assignment
}

// SyncResult is a SyncGroup answer.
type SyncResult struct {
	Code         int16
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Sync completes a rebalance: the leader's call stores the assignments,
// the others park until it does.
func (c *Coordinator) Sync(ctx context.Context, req SyncRequest) SyncResult {
	if !validGroupID(req.Group) {
		return SyncResult{Code: kerr.InvalidGroupID.Code}
	}
	if code := c.Status(); code != 0 {
		return SyncResult{Code: code}
	}
	for _, a := range req.Assignments {
		if len(a.Assignment) > c.cfg.MaxMetadataBytes {
			return SyncResult{Code: kerr.InvalidRequest.Code}
		}
	}
	c.mu.Lock()
	if !c.active {
		c.mu.Unlock()
		return SyncResult{Code: kerr.NotCoordinator.Code}
	}
	sg := c.soft(req.Group)
	g := c.fsm.Group(req.Group)
	if code := checkSync(g, req); code != 0 {
		c.mu.Unlock()
		return SyncResult{Code: code}
	}
	c.touchLocked(req.Group, sg, req.MemberID, 0, c.now())
	sg.markSyncedLocked(g.Generation, req.MemberID)
	switch {
	case g.State == fsm.GroupStable:
		st := c.fsm.Member(req.Group, req.MemberID, req.InstanceID)
		c.mu.Unlock()
		return SyncResult{ProtocolType: g.ProtocolType, Protocol: g.Protocol, Assignment: nonNil(st.Assignment)}
	case req.MemberID != g.Leader:
		ch := make(chan SyncResult, 1)
		if old, ok := sg.syncWaiters[req.MemberID]; ok {
			old <- SyncResult{Code: kerr.RebalanceInProgress.Code}
		}
		sg.syncWaiters[req.MemberID] = ch
		c.mu.Unlock()
		defer worktime.Wait(ctx)() // parked until the leader's assignment
		select {
		case r := <-ch:
			return r
		case <-ctx.Done():
			c.mu.Lock()
			if sg.syncWaiters[req.MemberID] == ch {
				delete(sg.syncWaiters, req.MemberID)
			}
			c.mu.Unlock()
			return SyncResult{Code: kerr.RebalanceInProgress.Code}
		}
	}
	c.mu.Unlock()

	res, code := c.propose(ctx, &fsm.SyncGroup{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID,
		Generation: req.Generation, Assignments: req.Assignments})
	if code != 0 {
		return SyncResult{Code: code}
	}
	if res.Code != 0 {
		return SyncResult{Code: res.Code}
	}
	c.releaseSyncs(req.Group)
	return SyncResult{ProtocolType: res.ProtocolType, Protocol: res.Protocol, Assignment: nonNil(res.Assignment)}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func checkSync(g *fsm.GroupView, req SyncRequest) int16 {
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	var m *fsm.Member
	for i := range g.Members {
		if req.InstanceID != "" && g.Members[i].InstanceID == req.InstanceID && g.Members[i].ID != req.MemberID {
			return kerr.FencedInstanceID.Code
		}
		if g.Members[i].ID == req.MemberID {
			m = &g.Members[i]
		}
	}
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Generation != g.Generation:
		return kerr.IllegalGeneration.Code
	case req.ProtocolType != nil && *req.ProtocolType != g.ProtocolType,
		req.Protocol != nil && *req.Protocol != g.Protocol:
		return kerr.InconsistentGroupProtocol.Code
	case g.State == fsm.GroupPreparingRebalance:
		return kerr.RebalanceInProgress.Code
	case g.State != fsm.GroupCompletingRebalance && g.State != fsm.GroupStable:
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// releaseSyncs answers parked SyncGroups once the group is Stable.
func (c *Coordinator) releaseSyncs(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sg := c.groups[group]
	if sg == nil {
		return
	}
	g := c.fsm.Group(group)
	if g == nil || g.State != fsm.GroupStable {
		return
	}
	if sg.syncTimer != nil && len(sg.unsyncedLocked(g)) == 0 {
		// Else the timer stays: as in Kafka, members that never sync are
		// removed when it fires even though the group is Stable.
		sg.syncTimer.Stop()
		sg.syncTimer = nil
	}
	for _, m := range g.Members {
		if ch, ok := sg.syncWaiters[m.ID]; ok {
			delete(sg.syncWaiters, m.ID)
			ch <- SyncResult{ProtocolType: g.ProtocolType, Protocol: g.Protocol, Assignment: nonNil(m.Assignment)}
		}
	}
}

// armSyncLocked bounds CompletingRebalance: members that have not sent
// SyncGroup when the rebalance timeout passes are removed, whether or not
// the leader's sync has made the group Stable meanwhile.
func (c *Coordinator) armSyncLocked(group string, sg *softGroup, g *fsm.GroupView) {
	if g.State != fsm.GroupCompletingRebalance {
		return
	}
	if sg.syncTimer != nil {
		sg.syncTimer.Stop()
	}
	term, gen := c.term, g.Generation
	sg.syncTimer = c.clock.AfterFunc(c.maxRebalanceTimeout(g), func() { c.syncTimeout(term, group, gen) })
}

func (c *Coordinator) syncTimeout(term uint64, group string, gen int32) {
	c.mu.Lock()
	if c.term != term || !c.active {
		c.mu.Unlock()
		return
	}
	g := c.fsm.Group(group)
	sg := c.groups[group]
	if g == nil || sg == nil || (g.State != fsm.GroupCompletingRebalance && g.State != fsm.GroupStable) || g.Generation != gen {
		c.mu.Unlock()
		return
	}
	sg.syncTimer = nil
	missing := sg.unsyncedLocked(g)
	guard := c.removalGuard(gen)
	c.mu.Unlock()
	if len(missing) > 0 {
		c.log.Info("members missed SyncGroup; removing them", "group", group, "generation", gen, "members", missing)
		c.removeMembers(context.Background(), group, reasonSyncTimeout, missing, guard)
	}
}
