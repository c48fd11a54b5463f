package fsm

import (
	"bytes"
	"fmt"
	"sort"
)

// GroupState is a classic consumer group's state, as Kafka names them.
type GroupState uint8

const (
	GroupEmpty GroupState = iota
	GroupPreparingRebalance
	GroupCompletingRebalance
	GroupStable
	GroupDead
)

func (s GroupState) String() string {
	switch s {
	case GroupEmpty:
		return "Empty"
	case GroupPreparingRebalance:
		return "PreparingRebalance"
	case GroupCompletingRebalance:
		return "CompletingRebalance"
	case GroupStable:
		return "Stable"
	}
	return "Dead"
}

// More Kafka error codes used by group commands.
const (
	ErrCoordinatorNotAvailable   int16 = 15
	ErrIllegalGeneration         int16 = 22
	ErrInconsistentGroupProtocol int16 = 23
	ErrUnknownMemberID           int16 = 25
	ErrRebalanceInProgress       int16 = 27
	ErrOffsetMetadataTooLarge    int16 = 12
	ErrNonEmptyGroup             int16 = 68
	ErrGroupIDNotFound           int16 = 69
	ErrGroupMaxSizeReached       int16 = 81
	ErrFencedInstanceID          int16 = 82
	// ErrStale answers a leader decision that no longer applies (the group
	// moved on). Not a Kafka code; the coordinator never sends it.
	ErrStale int16 = -3
)

// MaxOffsetMetadata is Kafka's offset.metadata.max.bytes default.
const MaxOffsetMetadata = 4096

// Member is one group member.
type Member struct {
	ID                 string
	InstanceID         string
	ClientID           string
	ClientHost         string
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	Protocols          []Protocol
	Assignment         []byte
	Joined             bool // has (re)joined the rebalance in progress
	// JoinedAt is the log index of the JoinGroup entry that last admitted
	// the member (0 before LevelGuardedRemoval): a removal decided before
	// it does not apply to it (RemovalGuard).
	JoinedAt uint64
}

// Offset is one committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitMs    int64
}

// Group is one consumer group. Members keep join order, which decides the
// leader when the old one is gone.
type Group struct {
	ID           string
	State        GroupState
	ProtocolType string
	Protocol     string
	Generation   int32
	Leader       string
	Members      []*Member
	EmptySinceMs int64
	Offsets      map[TopicPartition]Offset
}

func (g *Group) member(id string) *Member {
	for _, m := range g.Members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func (g *Group) memberByInstance(instance string) *Member {
	if instance == "" {
		return nil
	}
	for _, m := range g.Members {
		if m.InstanceID == instance {
			return m
		}
	}
	return nil
}

// GroupResult answers group commands.
type GroupResult struct {
	Code int16
	// Join: answered now without a rebalance.
	Immediate bool
	// Join: a static leader came back to a Stable group; its assignment
	// stands. PreviousLeader is the member id it had before.
	SkipAssignment bool
	PreviousLeader string
	// Join/CompleteJoin: the generation now in force and its facts.
	Generation   int32
	Protocol     string
	ProtocolType string
	Leader       string
	MemberID     string
	Members      []MemberMetadata // CompleteJoin: everyone; immediate Join: only for the leader
	// CompleteJoin: members dropped for not rejoining.
	Removed []string
	// SyncGroup: this member's assignment.
	Assignment []byte
	// Codes per item (CommitOffsets per offset, DeleteGroups per group).
	Codes []int16
}

// MemberMetadata is a member as the group leader sees it in JoinGroup.
type MemberMetadata struct {
	MemberID   string
	InstanceID string
	Metadata   []byte
}

func (f *FSM) totalMembersLocked() int {
	n := 0
	for _, g := range f.groups {
		n += len(g.Members)
	}
	return n
}

// newGroupLocked makes a group, reclaiming expired empty ones (those with no
// offsets) first when at the cap.
func (f *FSM) newGroupLocked(id string, now int64, maxGroups int32) (*Group, int16) {
	if maxGroups > 0 && len(f.groups) >= int(maxGroups) {
		for gid, g := range f.groups {
			if g.State == GroupEmpty && len(g.Offsets) == 0 {
				delete(f.groups, gid)
			}
		}
		if len(f.groups) >= int(maxGroups) {
			return nil, ErrCoordinatorNotAvailable
		}
	}
	g := &Group{ID: id, State: GroupEmpty, EmptySinceMs: now, Offsets: map[TopicPartition]Offset{}}
	f.groups[id] = g
	return g, ErrNone
}

func sameProtocols(a, b []Protocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Metadata, b[i].Metadata) {
			return false
		}
	}
	return true
}

// supportsCommonProtocol reports whether some protocol in ps is supported
// by every member other than except.
func (g *Group) supportsCommonProtocol(ps []Protocol, except string) bool {
	for _, p := range ps {
		all := true
		for _, m := range g.Members {
			if m.ID == except {
				continue
			}
			found := false
			for _, mp := range m.Protocols {
				if mp.Name == p.Name {
					found = true
					break
				}
			}
			if !found {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (f *FSM) applyJoinGroup(c *JoinGroup) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[c.Group]
	if g == nil {
		var code int16
		if g, code = f.newGroupLocked(c.Group, c.NowMs, c.MaxGroups); code != ErrNone {
			return &GroupResult{Code: code}
		}
	}
	if len(g.Members) > 0 && (g.ProtocolType != c.ProtocolType || !g.supportsCommonProtocol(c.Protocols, c.MemberID)) {
		return &GroupResult{Code: ErrInconsistentGroupProtocol}
	}
	m := g.member(c.MemberID)
	if m == nil {
		if old := g.memberByInstance(c.InstanceID); old != nil {
			return f.replaceStaticMember(g, old, c)
		}
		if c.MaxMembers > 0 && len(g.Members) >= int(c.MaxMembers) {
			return &GroupResult{Code: ErrGroupMaxSizeReached}
		}
		if c.MaxTotalMembers > 0 && f.totalMembersLocked() >= int(c.MaxTotalMembers) {
			return &GroupResult{Code: ErrCoordinatorNotAvailable}
		}
		m = &Member{ID: c.MemberID}
		g.Members = append(g.Members, m)
		f.updateMember(m, c)
		g.ProtocolType = c.ProtocolType
		g.prepareRebalance(m)
		return &GroupResult{MemberID: m.ID, Generation: g.Generation}
	}
	changed := !sameProtocols(m.Protocols, c.Protocols)
	f.updateMember(m, c)
	switch g.State {
	case GroupPreparingRebalance:
		m.Joined = true
		return &GroupResult{MemberID: m.ID, Generation: g.Generation}
	case GroupCompletingRebalance, GroupStable:
		if changed || (g.State == GroupStable && m.ID == g.Leader) {
			g.prepareRebalance(m)
			return &GroupResult{MemberID: m.ID, Generation: g.Generation}
		}
		return g.immediateJoin(m)
	}
	// Empty with members cannot happen; treat as a fresh rebalance.
	g.prepareRebalance(m)
	return &GroupResult{MemberID: m.ID, Generation: g.Generation}
}

// replaceStaticMember hands an instance id's place to a new member id
// (KIP-345): the old id is fenced. In a Stable group the new id inherits the
// assignment without a rebalance unless its protocols would change the
// group's selected protocol — as Kafka decides: consumer metadata carries a
// generation and owned partitions, so its bytes differ on every restart.
func (f *FSM) replaceStaticMember(g *Group, old *Member, c *JoinGroup) any {
	wasLeader := g.Leader == old.ID
	previous := old.ID
	old.ID = c.MemberID
	if wasLeader {
		g.Leader = old.ID
	}
	f.updateMember(old, c)
	if g.State == GroupStable && g.selectProtocol() == g.Protocol {
		r := g.immediateJoin(old)
		if wasLeader { // the leader need not assign again (KIP-814)
			r.SkipAssignment, r.PreviousLeader = true, previous
		}
		return r
	}
	if g.State == GroupPreparingRebalance {
		old.Joined = true
	} else {
		g.prepareRebalance(old)
	}
	return &GroupResult{MemberID: old.ID, Generation: g.Generation}
}

// updateMember admits m with what c joined with.
func (f *FSM) updateMember(m *Member, c *JoinGroup) {
	if f.FeatureLevel() >= LevelGuardedRemoval {
		// Only from this level, so that every replica holds the same
		// stamps whichever snapshot (with or without them) it started from.
		m.JoinedAt = f.applying
	}
	m.InstanceID = c.InstanceID
	m.ClientID = c.ClientID
	m.ClientHost = c.ClientHost
	m.SessionTimeoutMs = c.SessionTimeoutMs
	m.RebalanceTimeoutMs = c.RebalanceTimeoutMs
	m.Protocols = c.Protocols
}

func (g *Group) immediateJoin(m *Member) *GroupResult {
	r := &GroupResult{Immediate: true, MemberID: m.ID, Generation: g.Generation, Protocol: g.Protocol,
		ProtocolType: g.ProtocolType, Leader: g.Leader}
	if m.ID == g.Leader {
		r.Members = g.memberMetadata()
	}
	return r
}

func (g *Group) memberMetadata() []MemberMetadata {
	out := make([]MemberMetadata, 0, len(g.Members))
	for _, m := range g.Members {
		var md []byte
		for _, p := range m.Protocols {
			if p.Name == g.Protocol {
				md = p.Metadata
				break
			}
		}
		out = append(out, MemberMetadata{MemberID: m.ID, InstanceID: m.InstanceID, Metadata: md})
	}
	return out
}

// prepareRebalance starts (or keeps) a rebalance; only trigger counts as
// already rejoined.
func (g *Group) prepareRebalance(trigger *Member) {
	if g.State != GroupPreparingRebalance {
		for _, m := range g.Members {
			m.Joined = false
		}
	}
	g.State = GroupPreparingRebalance
	g.EmptySinceMs = -1
	if trigger != nil {
		trigger.Joined = true
	}
}

func (f *FSM) applyCompleteJoin(c *CompleteJoin) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[c.Group]
	if g == nil || g.State != GroupPreparingRebalance || g.Generation != c.Generation {
		return &GroupResult{Code: ErrStale}
	}
	r := &GroupResult{}
	kept := g.Members[:0]
	for _, m := range g.Members {
		if m.Joined {
			kept = append(kept, m)
		} else {
			r.Removed = append(r.Removed, m.ID)
		}
	}
	g.Members = kept
	g.Generation++
	for _, m := range g.Members {
		m.Assignment = nil
		m.Joined = false
	}
	if len(g.Members) == 0 {
		g.State, g.Protocol, g.Leader, g.EmptySinceMs = GroupEmpty, "", "", c.NowMs
	} else {
		g.State = GroupCompletingRebalance
		g.Protocol = g.selectProtocol()
		if g.member(g.Leader) == nil {
			g.Leader = g.Members[0].ID
		}
		r.Members = g.memberMetadata()
	}
	r.Generation, r.Protocol, r.ProtocolType, r.Leader = g.Generation, g.Protocol, g.ProtocolType, g.Leader
	return r
}

// selectProtocol picks, among protocols every member supports, the one
// most members list first; ties go to the leader's (then the first
// member's) order, so the choice is deterministic.
func (g *Group) selectProtocol() string {
	ref := g.member(g.Leader)
	if ref == nil {
		ref = g.Members[0]
	}
	var candidates []string
	for _, p := range ref.Protocols {
		if g.supportsCommonProtocol([]Protocol{p}, "") {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	votes := map[string]int{}
	for _, m := range g.Members {
		for _, p := range m.Protocols {
			if contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, c := range candidates[1:] {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// checkMember applies Kafka's member checks in Kafka's order.
func (g *Group) checkMember(memberID, instanceID string, generation int32) (*Member, int16) {
	if instanceID != "" {
		if sm := g.memberByInstance(instanceID); sm != nil && sm.ID != memberID {
			return nil, ErrFencedInstanceID
		}
	}
	m := g.member(memberID)
	if m == nil {
		return nil, ErrUnknownMemberID
	}
	if generation != g.Generation {
		return nil, ErrIllegalGeneration
	}
	return m, ErrNone
}

func (f *FSM) applySyncGroup(c *SyncGroup) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[c.Group]
	if g == nil {
		return &GroupResult{Code: ErrUnknownMemberID}
	}
	m, code := g.checkMember(c.MemberID, c.InstanceID, c.Generation)
	if code != ErrNone {
		return &GroupResult{Code: code}
	}
	switch g.State {
	case GroupPreparingRebalance:
		return &GroupResult{Code: ErrRebalanceInProgress}
	case GroupCompletingRebalance:
		if m.ID != g.Leader {
			return &GroupResult{Code: ErrStale} // followers wait on the leader's sync
		}
		byID := make(map[string][]byte, len(c.Assignments))
		for _, a := range c.Assignments {
			byID[a.MemberID] = a.Assignment
		}
		for _, gm := range g.Members {
			gm.Assignment = byID[gm.ID]
			if gm.Assignment == nil {
				gm.Assignment = []byte{}
			}
		}
		g.State = GroupStable
	}
	return &GroupResult{Generation: g.Generation, Protocol: g.Protocol, ProtocolType: g.ProtocolType, Assignment: m.Assignment}
}

func (f *FSM) applyRemoveMembers(c *RemoveMembers) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[c.Group]
	if g == nil {
		return &GroupResult{Code: ErrUnknownMemberID}
	}
	if c.Guard != nil && c.Guard.Generation != AnyGeneration && c.Guard.Generation != g.Generation {
		return &GroupResult{Code: ErrStale} // decided in a generation that is over
	}
	r := &GroupResult{Codes: make([]int16, len(c.MemberIDs))}
	removed := false
	for i, id := range c.MemberIDs {
		idx := -1
		for j, m := range g.Members {
			if m.ID == id {
				idx = j
				break
			}
		}
		switch {
		case idx < 0:
			r.Codes[i] = ErrUnknownMemberID
			continue
		case c.Guard != nil && g.Members[idx].JoinedAt > c.Guard.AsOf:
			r.Codes[i] = ErrStale // rejoined after the removal was decided
			continue
		}
		g.Members = append(g.Members[:idx], g.Members[idx+1:]...)
		removed = true
	}
	if !removed {
		return r
	}
	if g.member(g.Leader) == nil {
		g.Leader = ""
	}
	if len(g.Members) == 0 {
		// The last member gone: a new, empty generation (as Kafka's
		// rebalance with no members completes).
		g.Generation++
		g.State, g.Protocol, g.Leader, g.EmptySinceMs = GroupEmpty, "", "", c.NowMs
	} else if g.State != GroupPreparingRebalance {
		g.prepareRebalance(nil)
	}
	r.Generation = g.Generation
	return r
}

func (f *FSM) applyCommitOffsets(c *CommitOffsets) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[c.Group]
	if g == nil {
		// As Kafka: a member's commit to a group that does not exist. The
		// gateway answers ILLEGAL_GENERATION to OffsetCommit before v9.
		if c.Generation >= 0 {
			return &GroupResult{Code: ErrGroupIDNotFound}
		}
		if c.MemberID != "" {
			return &GroupResult{Code: ErrUnknownMemberID}
		}
		var code int16
		if g, code = f.newGroupLocked(c.Group, c.NowMs, c.MaxGroups); code != ErrNone {
			return &GroupResult{Code: code}
		}
	}
	if c.Generation >= 0 || g.State != GroupEmpty { // else a standalone consumer or an admin tool
		// As Kafka: member, instance and generation first; only a valid
		// member of this generation learns that a rebalance is completing.
		if _, code := g.checkMember(c.MemberID, c.InstanceID, c.Generation); code != ErrNone {
			return &GroupResult{Code: code}
		}
		if g.State == GroupCompletingRebalance {
			return &GroupResult{Code: ErrRebalanceInProgress}
		}
	}
	r := &GroupResult{Codes: make([]int16, len(c.Offsets))}
	for i, o := range c.Offsets {
		if len(o.Metadata) > MaxOffsetMetadata {
			r.Codes[i] = ErrOffsetMetadataTooLarge
			continue
		}
		g.Offsets[TopicPartition{o.Topic, o.Partition}] = Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitMs: c.NowMs}
	}
	return r
}

func (f *FSM) applyDeleteGroups(c *DeleteGroups) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &GroupResult{Codes: make([]int16, len(c.Groups))}
	for i, id := range c.Groups {
		g := f.groups[id]
		switch {
		case g == nil:
			r.Codes[i] = ErrGroupIDNotFound
		case g.State != GroupEmpty:
			r.Codes[i] = ErrNonEmptyGroup
		default:
			delete(f.groups, id)
		}
	}
	return r
}

func (f *FSM) applyDeleteOffsets(c *DeleteOffsets) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[c.Group]
	if g == nil {
		return &GroupResult{Code: ErrGroupIDNotFound}
	}
	for _, tp := range c.Partitions {
		delete(g.Offsets, tp)
	}
	return &GroupResult{}
}

// applyExpireOffsets drops offsets past retention: for a group that had
// members, counted from when it became Empty (KIP-211); for a standalone
// group (never had a protocol), from each commit. Empty groups left with no
// offsets are deleted.
func (f *FSM) applyExpireOffsets(c *ExpireOffsets) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, g := range f.groups {
		if g.State != GroupEmpty {
			continue
		}
		if g.ProtocolType == "" {
			for tp, o := range g.Offsets {
				if c.NowMs-o.CommitMs > c.RetentionMs {
					delete(g.Offsets, tp)
				}
			}
		} else if g.EmptySinceMs >= 0 && c.NowMs-g.EmptySinceMs > c.RetentionMs {
			g.Offsets = map[TopicPartition]Offset{}
		}
		if len(g.Offsets) == 0 && c.NowMs-g.EmptySinceMs > c.RetentionMs {
			delete(f.groups, id)
		}
	}
	return &GroupResult{}
}

// encodeGroups writes every group in id order (part of the snapshot metadata).
func (f *FSM) encodeGroupsLocked(e *enc) {
	ids := make([]string, 0, len(f.groups))
	for id := range f.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	e.uvar(uint64(len(ids)))
	for _, id := range ids {
		g := f.groups[id]
		e.str(g.ID)
		e.u8(uint8(g.State))
		e.str(g.ProtocolType)
		e.str(g.Protocol)
		e.i32(g.Generation)
		e.str(g.Leader)
		e.i64(g.EmptySinceMs)
		e.uvar(uint64(len(g.Members)))
		for _, m := range g.Members {
			e.str(m.ID)
			e.str(m.InstanceID)
			e.str(m.ClientID)
			e.str(m.ClientHost)
			e.i32(m.SessionTimeoutMs)
			e.i32(m.RebalanceTimeoutMs)
			e.uvar(uint64(len(m.Protocols)))
			for _, p := range m.Protocols {
				e.str(p.Name)
				e.bytes(p.Metadata)
			}
			e.nullableBytes(m.Assignment)
			e.bool(m.Joined)
		}
		tps := make([]TopicPartition, 0, len(g.Offsets))
		for tp := range g.Offsets {
			tps = append(tps, tp)
		}
		sort.Slice(tps, func(i, j int) bool {
			if tps[i].Topic != tps[j].Topic {
				return tps[i].Topic < tps[j].Topic
			}
			return tps[i].Partition < tps[j].Partition
		})
		e.uvar(uint64(len(tps)))
		for _, tp := range tps {
			o := g.Offsets[tp]
			e.str(tp.Topic)
			e.i32(tp.Partition)
			e.i64(o.Offset)
			e.i32(o.LeaderEpoch)
			e.str(o.Metadata)
			e.i64(o.CommitMs)
		}
	}
}

// encodeJoinStampsLocked writes every member's JoinedAt, groups in id order
// and members in group order (the LevelGuardedRemoval snapshot section).
func (f *FSM) encodeJoinStampsLocked(e *enc) {
	ids := make([]string, 0, len(f.groups))
	for id := range f.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	e.uvar(uint64(len(ids)))
	for _, id := range ids {
		g := f.groups[id]
		e.str(id)
		e.uvar(uint64(len(g.Members)))
		for _, m := range g.Members {
			e.uvar(m.JoinedAt)
		}
	}
}

// decodeJoinStamps reads what encodeJoinStampsLocked wrote into groups.
func decodeJoinStamps(d *dec, groups map[string]*Group) {
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		g := groups[d.str()]
		nm := d.count(1)
		if d.err == nil && (g == nil || nm != len(g.Members)) {
			d.err = fmt.Errorf("fsm: join stamps do not match the groups section")
			return
		}
		for j := 0; j < nm && d.err == nil; j++ {
			g.Members[j].JoinedAt = d.uvar()
		}
	}
}

func decodeGroups(d *dec) map[string]*Group {
	out := map[string]*Group{}
	n := d.count(20)
	for i := 0; i < n && d.err == nil; i++ {
		g := &Group{ID: d.str(), State: GroupState(d.u8()), ProtocolType: d.str(), Protocol: d.str(), Generation: d.i32(),
			Leader: d.str(), EmptySinceMs: d.i64(), Offsets: map[TopicPartition]Offset{}}
		nm := d.count(10)
		for j := 0; j < nm && d.err == nil; j++ {
			m := &Member{ID: d.str(), InstanceID: d.str(), ClientID: d.str(), ClientHost: d.str(),
				SessionTimeoutMs: d.i32(), RebalanceTimeoutMs: d.i32()}
			np := d.count(2)
			for k := 0; k < np && d.err == nil; k++ {
				m.Protocols = append(m.Protocols, Protocol{Name: d.str(), Metadata: cloneBytes(d.bytes())})
			}
			m.Assignment = cloneBytes(d.nullableBytes())
			m.Joined = d.bool()
			g.Members = append(g.Members, m)
		}
		no := d.count(26)
		for j := 0; j < no && d.err == nil; j++ {
			tp := TopicPartition{Topic: d.str(), Partition: d.i32()}
			g.Offsets[tp] = Offset{Offset: d.i64(), LeaderEpoch: d.i32(), Metadata: d.str(), CommitMs: d.i64()}
		}
		out[g.ID] = g
	}
	return out
}
