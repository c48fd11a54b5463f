package coordinator

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
)

// Heartbeat refreshes a member's session. It is answered from local state
// and never goes through Raft. While the new leader loads, it answers NONE
// (Kafka's "respond blindly"): Java clients log any other code as unexpected.
func (c *Coordinator) Heartbeat(group, memberID, instanceID string, generation int32) int16 {
	if !validGroupID(group) {
		return kerr.InvalidGroupID.Code
	}
	switch c.Status() {
	case 0:
	case kerr.CoordinatorLoadInProgress.Code:
		return 0
	default:
		return kerr.NotCoordinator.Code
	}
	st := c.fsm.Member(group, memberID, instanceID)
	switch {
	case !st.GroupFound:
		return kerr.UnknownMemberID.Code
	case st.Fenced:
		return kerr.FencedInstanceID.Code
	case !st.MemberFound:
		return kerr.UnknownMemberID.Code
	case generation != st.Generation:
		return kerr.IllegalGeneration.Code
	}
	c.mu.Lock()
	if c.active {
		// With the member's own timeout: a session dropped by an expiry
		// decided meanwhile may have to start again (keepSessionsLocked).
		c.touchLocked(group, c.soft(group), memberID, time.Duration(st.SessionTimeoutMs)*time.Millisecond, c.now())
	}
	c.mu.Unlock()
	if st.State == fsm.GroupPreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// LeaveMember names a member leaving: by member id, instance id or both.
type LeaveMember struct {
	MemberID   string
	InstanceID string
}

// Leave removes members. It returns a code per member and a group-level code.
func (c *Coordinator) Leave(ctx context.Context, group string, members []LeaveMember) ([]int16, int16) {
	if !validGroupID(group) {
		return nil, kerr.InvalidGroupID.Code
	}
	if code := c.Status(); code != 0 {
		return nil, code
	}
	codes := make([]int16, len(members))
	// A member's own leave holds in every generation (Kafka's LeaveGroup
	// carries none), but not over a JoinGroup of the member applied after
	// it was resolved here.
	guard := c.removalGuard(fsm.AnyGeneration)
	g := c.fsm.Group(group)
	var ids []string
	var idx []int
	c.mu.Lock()
	sg := c.soft(group)
	for i, lm := range members {
		if _, ok := sg.pending[lm.MemberID]; ok && lm.MemberID != "" {
			delete(sg.pending, lm.MemberID)
			c.pendingIDs--
			continue
		}
		id, code := resolveLeaver(g, lm)
		if code != 0 {
			codes[i] = code
			continue
		}
		ids = append(ids, id)
		idx = append(idx, i)
	}
	if len(ids) == 0 {
		if g := c.fsm.Group(group); g != nil {
			c.armJoinLocked(group, sg, g, false) // a pending id gone may complete a join
		}
		c.mu.Unlock()
		return codes, 0
	}
	c.mu.Unlock()
	res, code := c.removeMembers(ctx, group, reasonLeave, ids, guard)
	if code != 0 {
		return nil, code
	}
	for j, i := range idx {
		if j < len(res) && res[j] != fsm.ErrStale {
			// A member kept because it rejoined meanwhile: the leave and
			// the join both took effect, in that order.
			codes[i] = res[j]
		}
	}
	return codes, 0
}

func resolveLeaver(g *fsm.GroupView, lm LeaveMember) (string, int16) {
	if g == nil {
		return "", kerr.UnknownMemberID.Code
	}
	if lm.InstanceID != "" {
		for _, m := range g.Members {
			if m.InstanceID == lm.InstanceID {
				if lm.MemberID != "" && lm.MemberID != m.ID {
					return "", kerr.FencedInstanceID.Code
				}
				return m.ID, 0
			}
		}
		return "", kerr.UnknownMemberID.Code
	}
	for _, m := range g.Members {
		if m.ID == lm.MemberID {
			return m.ID, 0
		}
	}
	return "", kerr.UnknownMemberID.Code
}

// CommitOffsets stores offsets for a group member, or for a standalone
// consumer or admin tool (generation -1, empty member id, Empty group;
// the group id may be empty then, as on Kafka).
// It returns a code per offset, or a group-level code.
func (c *Coordinator) CommitOffsets(ctx context.Context, group, memberID, instanceID string, generation int32, offsets []fsm.OffsetCommit) ([]int16, int16) {
	if code := c.Status(); code != 0 {
		return nil, code
	}
	res, code := c.propose(ctx, &fsm.CommitOffsets{Group: group, MemberID: memberID, InstanceID: instanceID,
		Generation: generation, NowMs: c.now().UnixMilli(), MaxGroups: int32(c.cfg.MaxGroups), Offsets: offsets})
	if code != 0 {
		return nil, code
	}
	if res.Code != 0 {
		return nil, res.Code
	}
	if memberID != "" {
		c.mu.Lock()
		if c.active {
			if sg := c.groups[group]; sg != nil && sg.sessions[memberID] != nil {
				c.touchLocked(group, sg, memberID, 0, c.now())
			}
		}
		c.mu.Unlock()
	}
	return res.Codes, 0
}

// FetchOffsets returns a group's committed offsets (none for an unknown group).
func (c *Coordinator) FetchOffsets(group string) (map[fsm.TopicPartition]fsm.Offset, int16) {
	if code := c.Status(); code != 0 {
		return nil, code
	}
	offs, _ := c.fsm.CommittedOffsets(group)
	return offs, 0
}

// DescribeGroup returns a group, or nil for an unknown one (Kafka: Dead).
func (c *Coordinator) DescribeGroup(group string) (*fsm.GroupView, int16) {
	if code := c.Status(); code != 0 {
		return nil, code
	}
	return c.fsm.Group(group), 0
}

// ListGroups lists the groups this node coordinates: all of them on the
// leader, none elsewhere (clients ask every broker and merge).
func (c *Coordinator) ListGroups() ([]fsm.GroupSummary, int16) {
	switch c.Status() {
	case 0:
		return c.fsm.Groups(), 0
	case kerr.CoordinatorLoadInProgress.Code:
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return nil, 0
}

// DeleteGroups deletes empty groups; a code per group.
func (c *Coordinator) DeleteGroups(ctx context.Context, groups []string) []int16 {
	codes := make([]int16, len(groups))
	if code := c.Status(); code != 0 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	res, code := c.propose(ctx, &fsm.DeleteGroups{Groups: groups})
	for i := range codes {
		switch {
		case code != 0:
			codes[i] = code
		case i < len(res.Codes):
			codes[i] = res.Codes[i]
		}
	}
	return codes
}

// DeleteOffsets deletes committed offsets of partitions no member is
// subscribed to; subscribed ones get GROUP_SUBSCRIBED_TO_TOPIC. subscribed
// returns a group's topics, nil when they cannot be known.
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, parts []fsm.TopicPartition, subscribed func(*fsm.GroupView) map[string]bool) ([]int16, int16) {
	if !validGroupID(group) {
		return nil, kerr.InvalidGroupID.Code
	}
	if code := c.Status(); code != 0 {
		return nil, code
	}
	g := c.fsm.Group(group)
	if g == nil {
		return nil, kerr.GroupIDNotFound.Code
	}
	codes := make([]int16, len(parts))
	var del []fsm.TopicPartition
	var subs map[string]bool
	if g.State != fsm.GroupEmpty {
		// As Kafka: offsets of a group with members can be deleted only
		// for a consumer group, and only for topics it does not subscribe
		// to; nil subscriptions (unparseable) cover every topic.
		if g.ProtocolType != "consumer" {
			return nil, kerr.NonEmptyGroup.Code
		}
		if subscribed != nil {
			subs = subscribed(g)
		}
	}
	for i, tp := range parts {
		if g.State != fsm.GroupEmpty && (subs == nil || subs[tp.Topic]) {
			codes[i] = kerr.GroupSubscribedToTopic.Code
			continue
		}
		del = append(del, tp)
	}
	if len(del) > 0 {
		res, code := c.propose(ctx, &fsm.DeleteOffsets{Group: group, Partitions: del})
		if code != 0 {
			return nil, code
		}
		if res.Code != 0 {
			return nil, res.Code
		}
	}
	return codes, 0
}
