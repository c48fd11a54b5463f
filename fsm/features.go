package fsm

import (
	"errors"
	"fmt"
)

// Level is the cluster-wide feature level, as Kafka's metadata.version: the
// set of command kinds and versions every voter can apply. It lives in the
// FSM, only rises, and is raised by the leader with SetFeatureLevel once
// every voter reports (in gossip) a binary that supports the new level. A
// command whose kind or version needs a higher level than the cluster's is
// refused before it is proposed (Admit), so a binary that cannot apply it
// never sees it during a rolling upgrade.
type Level uint16

const (
	// LevelBaseline is a cluster that has recorded no level: what every
	// release before feature levels wrote. Entries carry no version byte
	// (their command's version is 1) and the kinds are 1-17.
	LevelBaseline Level = 0
	// LevelVersioned: entries carry their command's version
	// ([0][version][kind][body]); SetFeatureLevel exists.
	LevelVersioned Level = 1
	// LevelClientQuotas: AlterClientQuotas (kind 19) and the quotas section
	// of snapshots.
	LevelClientQuotas Level = 2
	// LevelScram: AlterScramCredentials (kind 32) and the SCRAM section of
	// snapshots.
	LevelScram Level = 3
	// LevelGuardedRemoval: RemoveMembers version 2, which carries the
	// group state the removal was decided on and is a no-op once the group
	// has moved on; members record the entry that last admitted them
	// (Member.JoinedAt), in a snapshot section of its own.
	LevelGuardedRemoval Level = 4
	// LevelAcls: CreateACLs and DeleteACLs (kinds 33, 34) and the ACL
	// section of snapshots.
	LevelAcls Level = 5
	// LevelTransactions: the transaction commands (kinds 40-45) and the
	// transactions section of snapshots.
	LevelTransactions Level = 6
	// LevelIdleExpiry: ExpireTxnIDs (kind 46), which removes transactional
	// ids idle longer than --transactional-id-expiration, and
	// ExpireProducers (kind 47), which drops the idempotence state of
	// producers idle longer than --producer-id-expiration; a batch of a
	// producer a partition has no state of is accepted at any sequence, as
	// Kafka since 2.5 (below this level: UNKNOWN_PRODUCER_ID unless 0).
	LevelIdleExpiry Level = 7
	// LevelTxnMarkers: WriteTxnMarkers (kind 48), markers an administrator
	// writes into partitions outside the coordinator (kafka-transactions
	// abort), and the snapshot section of the coordinator epochs they leave
	// on producers.
	LevelTxnMarkers Level = 8
	// LevelExternalTxns: transactions over partitions kept outside the FSM
	// (the Iggy backend): AddExtTxnPartitions (kind 49) and CompleteTxn
	// (kind 50), the PrepareCommit and PrepareAbort states, and the
	// snapshot section of those partitions' open and aborted transactions.
	LevelExternalTxns Level = 9
	// LevelExtTxnMarkers: ExtTxnMarkers (kind 51), an administrator's
	// markers (kafka-transactions abort) written into partitions outside
	// the FSM, with their offsets.
	LevelExtTxnMarkers Level = 10
	// LevelPruneExtAborted: PruneExtAborted (kind 52), which forgets the
	// aborted transactions of partitions outside the FSM that ended below
	// the partition's log start (Iggy's retention removed their records).
	LevelPruneExtAborted Level = 11
	// LevelLogAppendTime: an Append to a topic whose
	// message.timestamp.type is LogAppendTime stamps each batch with the
	// command's time, as Kafka's broker does (below this level no topic may
	// have it, so no replica stamps).
	LevelLogAppendTime Level = 12

	// LatestLevel is the highest level this binary can apply. Raise it
	// with every new level.
	LatestLevel = LevelLogAppendTime
)

// ErrFeatureDisabled is returned for a command the cluster's feature level
// does not allow yet (a node still runs an older kgate).
var ErrFeatureDisabled = errors.New("fsm: feature not enabled at the cluster's feature level")

// FeatureError says which command needed which level.
type FeatureError struct {
	Command string
	Need    Level
	Cluster Level
}

func (e *FeatureError) Error() string {
	return fmt.Sprintf("fsm: %s needs cluster feature level %d, the cluster is at %d (a voter runs an older kgate)",
		e.Command, e.Need, e.Cluster)
}

func (e *FeatureError) Unwrap() error { return ErrFeatureDisabled }

// FeatureLevel is the cluster's feature level as applied here.
func (f *FSM) FeatureLevel() Level { return Level(f.level.Load()) }

// Admit checks that the cluster's feature level allows the command in entry
// (as Encode wrote it) and returns the bytes to propose: at the baseline
// level the form without a version byte, which every earlier release reads.
func (f *FSM) Admit(entry []byte) ([]byte, error) {
	kind, version, _, err := splitEntry(entry)
	if err != nil {
		return nil, err
	}
	spec, ok := commands[kind]
	if !ok || int(version) > len(spec.since) || version == 0 {
		return nil, fmt.Errorf("fsm: proposing unknown command %s v%d", kind, version)
	}
	level := f.FeatureLevel()
	if need := spec.since[version-1]; need > level {
		return nil, &FeatureError{Command: fmt.Sprintf("%s v%d", kind, version), Need: need, Cluster: level}
	}
	if level >= LevelVersioned || entry[0] != versionedEntry {
		return entry, nil
	}
	if version != 1 {
		return nil, fmt.Errorf("fsm: %s v%d cannot be written at the baseline level", kind, version)
	}
	return entry[2:], nil // [kind][body]
}

// SetFeatureLevel raises the cluster's feature level. The leader proposes it
// only when every voter's binary supports Level; a binary that does not
// stops rather than go on with a log it may not be able to apply.
type SetFeatureLevel struct{ Level Level }

func (*SetFeatureLevel) Kind() Kind      { return KindSetFeatureLevel }
func (c *SetFeatureLevel) encode(e *enc) { e.i16(int16(c.Level)) }

func (f *FSM) applySetFeatureLevel(c *SetFeatureLevel) any {
	if c.Level > LatestLevel {
		return cannotApply(fmt.Errorf("cluster feature level %d is above this binary's %d: upgrade this node", c.Level, LatestLevel))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Level > f.FeatureLevel() {
		f.level.Store(uint32(c.Level))
	}
	return &CodeResult{}
}
