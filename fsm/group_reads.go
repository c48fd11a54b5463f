package fsm

import "sort"

// GroupView is a reader's deep copy of a group.
type GroupView struct {
	ID           string
	State        GroupState
	ProtocolType string
	Protocol     string
	Generation   int32
	Leader       string
	Members      []Member
}

// Group returns a copy of a group, or nil.
func (f *FSM) Group(id string) *GroupView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g := f.groups[id]
	if g == nil {
		return nil
	}
	v := &GroupView{ID: g.ID, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol,
		Generation: g.Generation, Leader: g.Leader, Members: make([]Member, len(g.Members))}
	for i, m := range g.Members {
		v.Members[i] = *m
		v.Members[i].Protocols = append([]Protocol(nil), m.Protocols...)
	}
	return v
}

// MemberStatus is what a heartbeat needs to know, read without copying the group.
type MemberStatus struct {
	GroupFound  bool
	MemberFound bool
	Fenced      bool // another member holds the instance id
	// InstanceID and SessionTimeoutMs are the found member's.
	InstanceID       string
	SessionTimeoutMs int32
	State            GroupState
	Generation       int32
	Leader           string
	Assignment       []byte
}

// Member looks a member up.
func (f *FSM) Member(group, memberID, instanceID string) MemberStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g := f.groups[group]
	if g == nil {
		return MemberStatus{}
	}
	st := MemberStatus{GroupFound: true, State: g.State, Generation: g.Generation, Leader: g.Leader}
	if instanceID != "" {
		if sm := g.memberByInstance(instanceID); sm != nil && sm.ID != memberID {
			st.Fenced = true
		}
	}
	if m := g.member(memberID); m != nil {
		st.MemberFound = true
		st.Assignment = m.Assignment
		st.InstanceID = m.InstanceID
		st.SessionTimeoutMs = m.SessionTimeoutMs
	}
	return st
}

// GroupSummary is one row of ListGroups.
type GroupSummary struct {
	ID           string
	ProtocolType string
	State        GroupState
}

// Groups lists every group, sorted by id.
func (f *FSM) Groups() []GroupSummary {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]GroupSummary, 0, len(f.groups))
	for _, g := range f.groups {
		out = append(out, GroupSummary{ID: g.ID, ProtocolType: g.ProtocolType, State: g.State})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// GroupCounts returns the number of groups and of members in all groups.
func (f *FSM) GroupCounts() (groups, members int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.groups), f.totalMembersLocked()
}

// CommittedOffsets returns a group's offsets; topics limits it when non-nil.
// found is false for an unknown group.
func (f *FSM) CommittedOffsets(group string) (map[TopicPartition]Offset, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g := f.groups[group]
	if g == nil {
		return nil, false
	}
	out := make(map[TopicPartition]Offset, len(g.Offsets))
	for tp, o := range g.Offsets {
		out[tp] = o
	}
	return out, true
}
