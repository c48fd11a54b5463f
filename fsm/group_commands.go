package fsm

// Group command kinds continue the numbering in command.go.
const (
	KindJoinGroup     Kind = 9
	KindCompleteJoin  Kind = 10
	KindSyncGroup     Kind = 11
	KindRemoveMembers Kind = 12
	KindCommitOffsets Kind = 13
	KindDeleteGroups  Kind = 14
	KindDeleteOffsets Kind = 15
	KindExpireOffsets Kind = 16
)

// Protocol is one group protocol a member supports, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinGroup adds or updates a member. The leader has already minted the
// member id and checked everything that needs its soft state.
type JoinGroup struct {
	Group              string
	MemberID           string
	InstanceID         string // "" when not a static member
	ClientID           string
	ClientHost         string
	ProtocolType       string
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	Protocols          []Protocol
	NowMs              int64
	MaxMembers         int32 // per group, stamped from the leader's config
	MaxGroups          int32
	MaxTotalMembers    int32
}

func (*JoinGroup) Kind() Kind { return KindJoinGroup }
func (c *JoinGroup) encode(e *enc) {
	e.str(c.Group)
	e.str(c.MemberID)
	e.str(c.InstanceID)
	e.str(c.ClientID)
	e.str(c.ClientHost)
	e.str(c.ProtocolType)
	e.i32(c.SessionTimeoutMs)
	e.i32(c.RebalanceTimeoutMs)
	e.uvar(uint64(len(c.Protocols)))
	for _, p := range c.Protocols {
		e.str(p.Name)
		e.bytes(p.Metadata)
	}
	e.i64(c.NowMs)
	e.i32(c.MaxMembers)
	e.i32(c.MaxGroups)
	e.i32(c.MaxTotalMembers)
}

func decodeJoinGroup(d *dec) *JoinGroup {
	c := &JoinGroup{Group: d.str(), MemberID: d.str(), InstanceID: d.str(), ClientID: d.str(), ClientHost: d.str(),
		ProtocolType: d.str(), SessionTimeoutMs: d.i32(), RebalanceTimeoutMs: d.i32()}
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		c.Protocols = append(c.Protocols, Protocol{Name: d.str(), Metadata: cloneBytes(d.bytes())})
	}
	c.NowMs, c.MaxMembers, c.MaxGroups, c.MaxTotalMembers = d.i64(), d.i32(), d.i32(), d.i32()
	return c
}

// CompleteJoin closes the join window of a rebalance of Generation.
type CompleteJoin struct {
	Group      string
	Generation int32 // the generation being replaced; a stale command is refused
	NowMs      int64
}

func (*CompleteJoin) Kind() Kind { return KindCompleteJoin }
func (c *CompleteJoin) encode(e *enc) {
	e.str(c.Group)
	e.i32(c.Generation)
	e.i64(c.NowMs)
}

// Assignment is one member's assignment from the group leader.
type Assignment struct {
	MemberID   string
	Assignment []byte
}

// SyncGroup stores the leader's assignments and makes the group Stable.
type SyncGroup struct {
	Group       string
	MemberID    string
	InstanceID  string
	Generation  int32
	Assignments []Assignment
}

func (*SyncGroup) Kind() Kind { return KindSyncGroup }
func (c *SyncGroup) encode(e *enc) {
	e.str(c.Group)
	e.str(c.MemberID)
	e.str(c.InstanceID)
	e.i32(c.Generation)
	e.uvar(uint64(len(c.Assignments)))
	for _, a := range c.Assignments {
		e.str(a.MemberID)
		e.bytes(a.Assignment)
	}
}

func decodeSyncGroup(d *dec) *SyncGroup {
	c := &SyncGroup{Group: d.str(), MemberID: d.str(), InstanceID: d.str(), Generation: d.i32()}
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		c.Assignments = append(c.Assignments, Assignment{MemberID: d.str(), Assignment: cloneBytes(d.bytes())})
	}
	return c
}

// RemoveMembers takes members out of a group: a leave, an expired session
// or a member that never synced. The group rebalances if others remain.
//
// Version 1 (Guard nil) removes the members whatever happened since it was
// decided. Version 2 (Guard set; LevelGuardedRemoval) carries the group
// state it was decided on, and leaves alone a group or member that has
// moved on since.
type RemoveMembers struct {
	Group     string
	MemberIDs []string
	NowMs     int64
	Guard     *RemovalGuard
}

// RemovalGuard is the group state a removal was decided on.
type RemovalGuard struct {
	// Generation is the group's generation then: in another generation the
	// whole command is a no-op. AnyGeneration for a removal that holds in
	// every generation (a member's own LeaveGroup, as in Kafka).
	Generation int32
	// AsOf is the FSM's applied index then. A member admitted again by a
	// later JoinGroup entry (Member.JoinedAt > AsOf) stays: it rejoined
	// after the decision, so it is not the member that expired.
	AsOf uint64
}

// AnyGeneration is the RemovalGuard.Generation of a removal valid in every
// generation.
const AnyGeneration int32 = -1

func (*RemoveMembers) Kind() Kind { return KindRemoveMembers }

func (c *RemoveMembers) version() uint8 {
	if c.Guard != nil {
		return 2
	}
	return 1
}

func (c *RemoveMembers) encode(e *enc) {
	e.str(c.Group)
	encodeStrings(e, c.MemberIDs)
	e.i64(c.NowMs)
	if c.Guard != nil {
		e.i32(c.Guard.Generation)
		e.u64(c.Guard.AsOf)
	}
}

func decodeRemoveMembers(d *dec, version uint8) *RemoveMembers {
	c := &RemoveMembers{Group: d.str(), MemberIDs: decodeStrings(d), NowMs: d.i64()}
	if version >= 2 {
		c.Guard = &RemovalGuard{Generation: d.i32(), AsOf: d.u64()}
	}
	return c
}

// OffsetCommit is one committed offset.
type OffsetCommit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommitOffsets stores offsets after checking member and generation.
type CommitOffsets struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	NowMs      int64
	MaxGroups  int32
	Offsets    []OffsetCommit
}

func (*CommitOffsets) Kind() Kind { return KindCommitOffsets }
func (c *CommitOffsets) encode(e *enc) {
	e.str(c.Group)
	e.str(c.MemberID)
	e.str(c.InstanceID)
	e.i32(c.Generation)
	e.i64(c.NowMs)
	e.i32(c.MaxGroups)
	encodeOffsetCommits(e, c.Offsets)
}

func decodeCommitOffsets(d *dec) *CommitOffsets {
	c := &CommitOffsets{Group: d.str(), MemberID: d.str(), InstanceID: d.str(), Generation: d.i32(), NowMs: d.i64(), MaxGroups: d.i32()}
	c.Offsets = decodeOffsetCommits(d)
	return c
}

// encodeOffsetCommits writes a list of offsets as CommitOffsets and
// TxnCommitOffsets carry them.
func encodeOffsetCommits(e *enc, offsets []OffsetCommit) {
	e.uvar(uint64(len(offsets)))
	for _, o := range offsets {
		e.str(o.Topic)
		e.i32(o.Partition)
		e.i64(o.Offset)
		e.i32(o.LeaderEpoch)
		e.str(o.Metadata)
	}
}

func decodeOffsetCommits(d *dec) []OffsetCommit {
	var out []OffsetCommit
	n := d.count(17)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, OffsetCommit{Topic: d.str(), Partition: d.i32(), Offset: d.i64(), LeaderEpoch: d.i32(), Metadata: d.str()})
	}
	return out
}

// DeleteGroups deletes empty groups and their offsets.
type DeleteGroups struct{ Groups []string }

func (*DeleteGroups) Kind() Kind      { return KindDeleteGroups }
func (c *DeleteGroups) encode(e *enc) { encodeStrings(e, c.Groups) }

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// DeleteOffsets deletes some of a group's committed offsets.
type DeleteOffsets struct {
	Group      string
	Partitions []TopicPartition
}

func (*DeleteOffsets) Kind() Kind { return KindDeleteOffsets }
func (c *DeleteOffsets) encode(e *enc) {
	e.str(c.Group)
	encodeTopicPartitions(e, c.Partitions)
}

func decodeDeleteOffsets(d *dec) *DeleteOffsets {
	c := &DeleteOffsets{Group: d.str()}
	c.Partitions = decodeTopicPartitions(d)
	return c
}

// ExpireOffsets applies offsets retention (KIP-211) as of NowMs.
type ExpireOffsets struct {
	NowMs       int64
	RetentionMs int64
}

func (*ExpireOffsets) Kind() Kind { return KindExpireOffsets }
func (c *ExpireOffsets) encode(e *enc) {
	e.i64(c.NowMs)
	e.i64(c.RetentionMs)
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
