package coordinator

import (
	"context"
	"time"

	"github.com/kgate/kgate/fsm"
)

// softGroup is the leader-local state of one group. Guarded by Coordinator.mu.
type softGroup struct {
	joinWaiters map[string]chan JoinResult // member id → parked JoinGroup
	syncWaiters map[string]chan SyncResult // member id → parked SyncGroup
	pending     map[string]time.Time       // KIP-394 member ids handed out, until expiry
	sessions    map[string]*session

	joinTimer    Timer
	joinGen      int32     // generation the armed join window replaces
	windowStart  time.Time // when the current join window opened
	initialPhase bool      // KIP-134 delay applies (the group was empty)
	emptyJoins   int       // Joins in flight that found the group empty
	syncTimer    Timer
	// synced holds the members that sent SyncGroup in generation syncedGen:
	// the others are removed when the sync timer fires, Stable or not.
	synced    map[string]bool
	syncedGen int32
}

// markSyncedLocked records a member's SyncGroup in generation gen.
func (sg *softGroup) markSyncedLocked(gen int32, member string) {
	if sg.synced == nil || sg.syncedGen != gen {
		sg.synced, sg.syncedGen = map[string]bool{}, gen
	}
	sg.synced[member] = true
}

// unsyncedLocked lists the members of g that sent no SyncGroup in its
// generation.
func (sg *softGroup) unsyncedLocked(g *fsm.GroupView) []string {
	var out []string
	for _, m := range g.Members {
		if sg.syncedGen != g.Generation || !sg.synced[m.ID] {
			out = append(out, m.ID)
		}
	}
	return out
}

type session struct {
	last    time.Time
	timeout time.Duration
	timer   Timer
}

func (c *Coordinator) soft(group string) *softGroup {
	sg := c.groups[group]
	if sg == nil {
		sg = &softGroup{
			joinWaiters: map[string]chan JoinResult{},
			syncWaiters: map[string]chan SyncResult{},
			pending:     map[string]time.Time{},
			sessions:    map[string]*session{},
		}
		c.groups[group] = sg
	}
	return sg
}

// idle reports whether nothing is parked, pending, timed or tracked.
func (sg *softGroup) idle() bool {
	return len(sg.joinWaiters) == 0 && len(sg.syncWaiters) == 0 && len(sg.pending) == 0 &&
		len(sg.sessions) == 0 && sg.joinTimer == nil && sg.syncTimer == nil
}

// stop answers everything parked with code and stops every timer.
func (sg *softGroup) stop(code int16) {
	for id, ch := range sg.joinWaiters {
		ch <- JoinResult{Code: code, MemberID: id}
		delete(sg.joinWaiters, id)
	}
	for id, ch := range sg.syncWaiters {
		ch <- SyncResult{Code: code}
		delete(sg.syncWaiters, id)
	}
	if sg.joinTimer != nil {
		sg.joinTimer.Stop()
	}
	if sg.syncTimer != nil {
		sg.syncTimer.Stop()
	}
	for _, s := range sg.sessions {
		if s.timer != nil {
			s.timer.Stop()
		}
	}
}

// touchLocked refreshes a member's session deadline, arming its timer.
func (c *Coordinator) touchLocked(group string, sg *softGroup, member string, timeout time.Duration, now time.Time) {
	s := sg.sessions[member]
	if s == nil {
		s = &session{}
		sg.sessions[member] = s
	}
	s.last = now
	if timeout > 0 {
		s.timeout = timeout
	}
	if s.timer == nil {
		c.armSessionLocked(group, sg, member, s, s.timeout)
	}
}

func (c *Coordinator) armSessionLocked(group string, sg *softGroup, member string, s *session, d time.Duration) {
	term := c.term
	s.timer = c.clock.AfterFunc(d, func() { c.sessionCheck(term, group, member) })
}

// sessionCheck runs when a member's session may have expired.
func (c *Coordinator) sessionCheck(term uint64, group, member string) {
	c.mu.Lock()
	if c.term != term || !c.active {
		c.mu.Unlock()
		return
	}
	sg := c.groups[group]
	if sg == nil {
		c.mu.Unlock()
		return
	}
	s := sg.sessions[member]
	if s == nil {
		c.mu.Unlock()
		return
	}
	now := c.now()
	_, parkedJoin := sg.joinWaiters[member]
	_, parkedSync := sg.syncWaiters[member]
	if left := s.last.Add(s.timeout).Sub(now); left > 0 || parkedJoin || parkedSync {
		// Still alive, or parked: a parked request is its own proof of life.
		if left <= 0 {
			left = s.timeout
		}
		c.armSessionLocked(group, sg, member, s, left)
		c.mu.Unlock()
		return
	}
	delete(sg.sessions, member)
	// The expiry is decided on this state: if the member rejoins before
	// the removal applies, or the group moves to another generation, the
	// FSM keeps it (and removeMembers gives it a session again).
	guard := c.removalGuard(c.fsm.Member(group, member, "").Generation)
	c.mu.Unlock()
	// Logged once the removal is committed: a deposed leader that wakes
	// from a pause finds every session stale, and its removals never
	// commit.
	codes, code := c.removeMembers(context.Background(), group, reasonSession, []string{member}, guard)
	if code == 0 && (len(codes) == 0 || codes[0] == 0) {
		c.log.Info("member session expired", "group", group, "member", member)
	} else {
		c.log.Debug("member session expiry not applied", "group", group, "member", member, "code", code)
	}
}

// forgetLocked drops a member's soft state after it left the group.
func (sg *softGroup) forgetLocked(member string, code int16) {
	if s := sg.sessions[member]; s != nil && s.timer != nil {
		s.timer.Stop()
	}
	delete(sg.sessions, member)
	if ch, ok := sg.joinWaiters[member]; ok {
		ch <- JoinResult{Code: code, MemberID: member}
		delete(sg.joinWaiters, member)
	}
	if ch, ok := sg.syncWaiters[member]; ok {
		ch <- SyncResult{Code: code}
		delete(sg.syncWaiters, member)
	}
}

// maxRebalanceTimeout is the longest rebalance timeout among members.
func (c *Coordinator) maxRebalanceTimeout(g *fsm.GroupView) time.Duration {
	var d time.Duration
	for _, m := range g.Members {
		d = max(d, time.Duration(m.RebalanceTimeoutMs)*time.Millisecond)
	}
	if d <= 0 {
		d = c.cfg.MaxRebalanceTimeout
	}
	return min(d, c.cfg.MaxRebalanceTimeout)
}
