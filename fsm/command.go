package fsm

import (
	"fmt"
	"sort"
)

// Kind names a command type. The values are part of the Raft log format:
// never renumber them.
type Kind uint8

const (
	KindInitCluster      Kind = 1
	KindCreateTopic      Kind = 2
	KindDeleteTopic      Kind = 3
	KindCreatePartitions Kind = 4
	KindAppend           Kind = 5
	KindInitProducerID   Kind = 6
	KindTrimLog          Kind = 7
	KindAlterConfigs     Kind = 8
	// 9-16 are the group commands (group_commands.go).
	KindAlterTopicConfigs Kind = 17
	KindSetFeatureLevel   Kind = 18 // features.go
	// 40-46 are the transaction commands (transactions.go).
	KindInitTxnProducer     Kind = 40
	KindAddTxnPartitions    Kind = 41
	KindAddTxnGroup         Kind = 42
	KindTxnCommitOffsets    Kind = 43
	KindEndTxn              Kind = 44
	KindExpireTxn           Kind = 45
	KindExpireTxnIDs        Kind = 46
	KindExpireProducers     Kind = 47 // append.go
	KindWriteTxnMarkers     Kind = 48 // transactions.go
	KindAddExtTxnPartitions Kind = 49 // external_txns.go
	KindCompleteTxn         Kind = 50 // external_txns.go
	KindExtTxnMarkers       Kind = 51 // external_txns.go
	KindPruneExtAborted     Kind = 52 // external_txns.go
)

// commands is every command kind this binary can decode and apply.
//
// Adding a command kind is one row here (plus its type and apply method):
//  1. take the next unused Kind number above;
//  2. add a level in features.go (LevelX = LatestLevel+1) and make it
//     LatestLevel, unless this change already added one;
//  3. add the row: its name, since: []Level{LevelX}, a decoder and the
//     apply method.
//
// Proposals of the kind then fail with ErrFeatureDisabled (the gateway
// answers UNSUPPORTED_VERSION) until every voter runs a binary with the new
// level and the leader has raised the cluster to it.
//
// Changing an existing kind's encoding is a new version of it, never an
// edit in place: append the level that allows writing it to since (since[v-1]
// is the level for version v) and decode every version by the version
// argument. A version this binary does not know stops the node. Encode
// writes the latest version, which Admit refuses below its level; a kind
// that must still be proposed in a cluster below that level implements
// versioned, and its proposer picks the version by the cluster's level
// (RemoveMembers: v2 with a Guard, v1 without).
var commands = map[Kind]commandSpec{
	KindInitCluster: row("InitCluster", baseline,
		func(d *dec, _ uint8) *InitCluster { return &InitCluster{ClusterID: d.str()} }, (*FSM).applyInitCluster),
	KindCreateTopic: row("CreateTopic", baseline, v1(decodeCreateTopic), (*FSM).applyCreateTopic),
	KindDeleteTopic: row("DeleteTopic", baseline,
		func(d *dec, _ uint8) *DeleteTopic { return &DeleteTopic{Name: d.str()} }, (*FSM).applyDeleteTopic),
	KindCreatePartitions: row("CreatePartitions", baseline,
		func(d *dec, _ uint8) *CreatePartitions { return &CreatePartitions{Name: d.str(), Count: d.i32()} },
		(*FSM).applyCreatePartitions),
	KindAppend: row("Append", baseline, v1(decodeAppend), (*FSM).applyAppend),
	KindInitProducerID: row("InitProducerID", baseline,
		func(*dec, uint8) *InitProducerID { return &InitProducerID{} },
		func(f *FSM, _ *InitProducerID) any { return f.applyInitProducerID() }),
	KindTrimLog: row("TrimLog", baseline,
		func(d *dec, _ uint8) *TrimLog { return &TrimLog{Topic: d.str(), Partition: d.i32(), Start: d.i64()} },
		(*FSM).applyTrimLog),
	KindAlterConfigs: row("AlterConfigs", baseline,
		func(d *dec, _ uint8) *AlterConfigs {
			return &AlterConfigs{Name: d.str(), Set: decodeConfigs(d), Delete: decodeStrings(d)}
		}, (*FSM).applyAlterConfigs),
	KindAlterTopicConfigs: row("AlterTopicConfigs", baseline,
		func(d *dec, _ uint8) *AlterTopicConfigs {
			return &AlterTopicConfigs{Name: d.str(), Configs: decodeConfigs(d)}
		}, (*FSM).applyAlterTopicConfigs),
	KindJoinGroup: row("JoinGroup", baseline, v1(decodeJoinGroup), (*FSM).applyJoinGroup),
	KindCompleteJoin: row("CompleteJoin", baseline,
		func(d *dec, _ uint8) *CompleteJoin {
			return &CompleteJoin{Group: d.str(), Generation: d.i32(), NowMs: d.i64()}
		}, (*FSM).applyCompleteJoin),
	KindSyncGroup: row("SyncGroup", baseline, v1(decodeSyncGroup), (*FSM).applySyncGroup),
	KindRemoveMembers: row("RemoveMembers", []Level{LevelBaseline, LevelGuardedRemoval}, decodeRemoveMembers,
		(*FSM).applyRemoveMembers),
	KindCommitOffsets: row("CommitOffsets", baseline, v1(decodeCommitOffsets), (*FSM).applyCommitOffsets),
	KindDeleteGroups: row("DeleteGroups", baseline,
		func(d *dec, _ uint8) *DeleteGroups { return &DeleteGroups{Groups: decodeStrings(d)} },
		(*FSM).applyDeleteGroups),
	KindDeleteOffsets: row("DeleteOffsets", baseline, v1(decodeDeleteOffsets), (*FSM).applyDeleteOffsets),
	KindExpireOffsets: row("ExpireOffsets", baseline,
		func(d *dec, _ uint8) *ExpireOffsets { return &ExpireOffsets{NowMs: d.i64(), RetentionMs: d.i64()} },
		(*FSM).applyExpireOffsets),
	// Proposed only by the leader, and only once every voter supports the
	// target level (cluster's feature-level service), so it may be written
	// at the baseline level to leave it.
	KindSetFeatureLevel: row("SetFeatureLevel", baseline,
		func(d *dec, _ uint8) *SetFeatureLevel { return &SetFeatureLevel{Level: Level(d.i16())} },
		(*FSM).applySetFeatureLevel),
	KindAlterClientQuotas: row("AlterClientQuotas", []Level{LevelClientQuotas}, v1(decodeAlterClientQuotas),
		(*FSM).applyAlterClientQuotas),
	KindAlterScramCredentials: row("AlterScramCredentials", []Level{LevelScram}, v1(decodeAlterScramCredentials),
		(*FSM).applyAlterScramCredentials),
	KindCreateACLs: row("CreateACLs", []Level{LevelAcls},
		func(d *dec, _ uint8) *CreateACLs { return &CreateACLs{ACLs: decodeACLs(d)} }, (*FSM).applyCreateACLs),
	KindDeleteACLs: row("DeleteACLs", []Level{LevelAcls},
		func(d *dec, _ uint8) *DeleteACLs { return &DeleteACLs{ACLs: decodeACLs(d)} }, (*FSM).applyDeleteACLs),
	KindInitTxnProducer: row("InitTxnProducer", []Level{LevelTransactions}, v1(decodeInitTxnProducer),
		(*FSM).applyInitTxnProducer),
	KindAddTxnPartitions: row("AddTxnPartitions", []Level{LevelTransactions}, v1(decodeAddTxnPartitions),
		(*FSM).applyAddTxnPartitions),
	KindAddTxnGroup: row("AddTxnGroup", []Level{LevelTransactions},
		func(d *dec, _ uint8) *AddTxnGroup {
			return &AddTxnGroup{TxnProducer: decodeTxnProducer(d), Group: d.str()}
		},
		(*FSM).applyAddTxnGroup),
	KindTxnCommitOffsets: row("TxnCommitOffsets", []Level{LevelTransactions}, v1(decodeTxnCommitOffsets),
		(*FSM).applyTxnCommitOffsets),
	KindEndTxn: row("EndTxn", []Level{LevelTransactions},
		func(d *dec, _ uint8) *EndTxn { return &EndTxn{TxnProducer: decodeTxnProducer(d), Commit: d.bool()} },
		(*FSM).applyEndTxn),
	KindExpireTxn: row("ExpireTxn", []Level{LevelTransactions},
		func(d *dec, _ uint8) *ExpireTxn {
			return &ExpireTxn{TxnProducer: decodeTxnProducer(d), StartMs: d.i64()}
		},
		(*FSM).applyExpireTxn),
	KindExpireTxnIDs: row("ExpireTxnIDs", []Level{LevelIdleExpiry}, v1(decodeExpireTxnIDs),
		(*FSM).applyExpireTxnIDs),
	KindExpireProducers: row("ExpireProducers", []Level{LevelIdleExpiry},
		func(d *dec, _ uint8) *ExpireProducers { return &ExpireProducers{NowMs: d.i64(), ExpirationMs: d.i64()} },
		(*FSM).applyExpireProducers),
	KindWriteTxnMarkers: row("WriteTxnMarkers", []Level{LevelTxnMarkers}, v1(decodeWriteTxnMarkers),
		(*FSM).applyWriteTxnMarkers),
	KindAddExtTxnPartitions: row("AddExtTxnPartitions", []Level{LevelExternalTxns}, v1(decodeAddExtTxnPartitions),
		(*FSM).applyAddExtTxnPartitions),
	KindCompleteTxn: row("CompleteTxn", []Level{LevelExternalTxns}, v1(decodeCompleteTxn),
		(*FSM).applyCompleteTxn),
	KindExtTxnMarkers: row("ExtTxnMarkers", []Level{LevelExtTxnMarkers}, v1(decodeExtTxnMarkers),
		(*FSM).applyExtTxnMarkers),
	KindPruneExtAborted: row("PruneExtAborted", []Level{LevelPruneExtAborted}, v1(decodePruneExtAborted),
		(*FSM).applyPruneExtAborted),
}

// baseline is the since of a kind every release has: version 1 from the
// start.
var baseline = []Level{LevelBaseline}

// commandSpec is what this binary knows of one command kind.
type commandSpec struct {
	name   string
	since  []Level // since[v-1]: the feature level that allows writing version v
	decode func(d *dec, version uint8) Command
	apply  func(f *FSM, c Command) any
}

// row makes a commandSpec from typed functions.
func row[T Command](name string, since []Level, decode func(d *dec, version uint8) T, apply func(*FSM, T) any) commandSpec {
	return commandSpec{
		name:   name,
		since:  since,
		decode: func(d *dec, v uint8) Command { return decode(d, v) },
		apply:  func(f *FSM, c Command) any { return apply(f, c.(T)) },
	}
}

// v1 adapts the decoder of a kind that has only version 1.
func v1[T Command](decode func(*dec) T) func(*dec, uint8) T {
	return func(d *dec, _ uint8) T { return decode(d) }
}

func (k Kind) String() string {
	if s, ok := commands[k]; ok {
		return s.name
	}
	return fmt.Sprintf("unknown kind %d", uint8(k))
}

// Command is one replicated state change. Everything Apply needs is in the
// command: the leader stamps times, ids and validated batch facts into it.
type Command interface {
	Kind() Kind
	encode(*enc)
}

// versionedEntry opens an entry that carries its command's version:
// [versionedEntry][version][kind][body]. No kind is 0, so an entry without
// it ([kind][body], what releases before feature levels wrote, and what
// Admit proposes at the baseline level) is version 1 of its kind.
const versionedEntry = 0

// versioned is a command whose value decides the version it is written
// at: a kind with several versions, whose older ones a cluster below the
// newer one's level still needs (RemoveMembers).
type versioned interface{ version() uint8 }

// Encode returns the log entry bytes of c: at its kind's latest version, or
// at the version c asks for.
func Encode(c Command) []byte {
	e := &enc{b: make([]byte, 0, 64)}
	v := uint8(len(commands[c.Kind()].since))
	if vc, ok := c.(versioned); ok {
		v = vc.version()
	}
	encodeHeader(e, c.Kind(), v)
	c.encode(e)
	return e.b
}

func encodeHeader(e *enc, k Kind, version uint8) {
	e.u8(versionedEntry)
	e.u8(version)
	e.u8(uint8(k))
}

// splitEntry reads an entry's header.
func splitEntry(data []byte) (Kind, uint8, []byte, error) {
	switch {
	case len(data) == 0:
		return 0, 0, nil, errShort
	case data[0] != versionedEntry:
		return Kind(data[0]), 1, data[1:], nil
	case len(data) < 3:
		return 0, 0, nil, errShort
	}
	return Kind(data[2]), data[1], data[3:], nil
}

// Decode parses a log entry, either form. Slices in the result alias data.
func Decode(data []byte) (Command, error) {
	c, _, _, err := decodeEntry(data)
	return c, err
}

// decodeEntry parses a log entry and names its command (kind and version)
// for error messages.
func decodeEntry(data []byte) (Command, uint8, string, error) {
	kind, version, body, err := splitEntry(data)
	if err != nil {
		return nil, 0, "", fmt.Errorf("fsm: decode entry: %w", err)
	}
	name := fmt.Sprintf("%s v%d", kind, version)
	spec, ok := commands[kind]
	if !ok {
		return nil, version, name, fmt.Errorf("fsm: unknown command kind %d: written by a newer kgate", uint8(kind))
	}
	if version == 0 || int(version) > len(spec.since) {
		return nil, version, name, fmt.Errorf("fsm: %s version %d is not known to this binary (it reads up to %d)",
			kind, version, len(spec.since))
	}
	d := &dec{b: body, size: len(data)}
	c := spec.decode(d, version)
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes left over", len(d.b))
	}
	if d.err != nil {
		return nil, version, name, fmt.Errorf("fsm: decode %s: %w", name, d.err)
	}
	return c, version, name, nil
}

// InitCluster records the cluster id, once.
type InitCluster struct{ ClusterID string }

func (*InitCluster) Kind() Kind      { return KindInitCluster }
func (c *InitCluster) encode(e *enc) { e.str(c.ClusterID) }

// Config is one topic config entry.
type Config struct{ Key, Value string }

// encodeConfigs writes cs in canonical order: by key, then value (a decoded
// entry may repeat a key; Apply lets the last one win).
func encodeConfigs(e *enc, cs []Config) {
	sorted := append([]Config(nil), cs...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Key != sorted[j].Key {
			return sorted[i].Key < sorted[j].Key
		}
		return sorted[i].Value < sorted[j].Value
	})
	e.uvar(uint64(len(sorted)))
	for _, c := range sorted {
		e.str(c.Key)
		e.str(c.Value)
	}
}

func decodeConfigs(d *dec) []Config {
	n := d.count(2)
	out := make([]Config, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, Config{Key: d.str(), Value: d.str()})
	}
	return out
}

// encodeTopicPartitions writes a list of partitions, as every command
// naming partitions carries them.
func encodeTopicPartitions(e *enc, tps []TopicPartition) {
	e.uvar(uint64(len(tps)))
	for _, tp := range tps {
		e.str(tp.Topic)
		e.i32(tp.Partition)
	}
}

func decodeTopicPartitions(d *dec) []TopicPartition {
	var tps []TopicPartition
	n := d.count(5)
	for i := 0; i < n && d.err == nil; i++ {
		tps = append(tps, TopicPartition{Topic: d.str(), Partition: d.i32()})
	}
	return tps
}

func encodeStrings(e *enc, ss []string) {
	e.uvar(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

func decodeStrings(d *dec) []string {
	n := d.count(1)
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, d.str())
	}
	return out
}

// CreateTopic makes a topic; the leader picks its id.
type CreateTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Configs    []Config
}

func (*CreateTopic) Kind() Kind { return KindCreateTopic }
func (c *CreateTopic) encode(e *enc) {
	e.str(c.Name)
	e.b = append(e.b, c.ID[:]...)
	e.i32(c.Partitions)
	encodeConfigs(e, c.Configs)
}

func decodeCreateTopic(d *dec) *CreateTopic {
	c := &CreateTopic{Name: d.str()}
	copy(c.ID[:], d.take(16))
	c.Partitions = d.i32()
	c.Configs = decodeConfigs(d)
	return c
}

// DeleteTopic removes a topic and its data.
type DeleteTopic struct{ Name string }

func (*DeleteTopic) Kind() Kind      { return KindDeleteTopic }
func (c *DeleteTopic) encode(e *enc) { e.str(c.Name) }

// CreatePartitions grows a topic to Count partitions.
type CreatePartitions struct {
	Name  string
	Count int32
}

func (*CreatePartitions) Kind() Kind { return KindCreatePartitions }
func (c *CreatePartitions) encode(e *enc) {
	e.str(c.Name)
	e.i32(c.Count)
}

// AlterConfigs sets and deletes topic config keys. The gateway proposes
// AlterTopicConfigs instead; this kind stays decodable and applicable.
type AlterConfigs struct {
	Name   string
	Set    []Config
	Delete []string
}

func (*AlterConfigs) Kind() Kind { return KindAlterConfigs }
func (c *AlterConfigs) encode(e *enc) {
	e.str(c.Name)
	encodeConfigs(e, c.Set)
	encodeStrings(e, c.Delete)
}

// AlterTopicConfigs replaces all of a topic's configs with Configs (Kafka's
// AlterConfigs; IncrementalAlterConfigs is resolved to the full set by the
// leader). The handler has validated keys and values. Configs are encoded
// sorted (encodeConfigs), so the same set always gives the same entry.
type AlterTopicConfigs struct {
	Name    string
	Configs []Config
}

func (*AlterTopicConfigs) Kind() Kind { return KindAlterTopicConfigs }
func (c *AlterTopicConfigs) encode(e *enc) {
	e.str(c.Name)
	encodeConfigs(e, c.Configs)
}

// Batch is one validated record batch with the header facts Apply needs.
type Batch struct {
	Topic           string
	Partition       int32
	Data            []byte // the whole batch as the client sent it
	LastOffsetDelta int32
	MaxTimestamp    int64
	ProducerID      int64 // -1 when not idempotent
	ProducerEpoch   int16
	BaseSequence    int32
	// DataPos is where Data starts in the Raft entry's bytes, set by
	// Decode and not encoded: the entry's location in the Raft log plus
	// DataPos is where the batch is on disk.
	DataPos int
}

// Append writes batches, at most one per partition, as one Raft entry.
type Append struct {
	NowMs   int64
	Batches []Batch
}

func (*Append) Kind() Kind { return KindAppend }
func (c *Append) encode(e *enc) {
	e.i64(c.NowMs)
	e.uvar(uint64(len(c.Batches)))
	for i := range c.Batches {
		b := &c.Batches[i]
		e.str(b.Topic)
		e.i32(b.Partition)
		e.i32(b.LastOffsetDelta)
		e.i64(b.MaxTimestamp)
		e.i64(b.ProducerID)
		e.i16(b.ProducerEpoch)
		e.i32(b.BaseSequence)
		e.bytes(b.Data)
	}
}

// EncodedSize estimates the encoded size, to presize the buffer.
func (c *Append) EncodedSize() int {
	n := 16
	for i := range c.Batches {
		n += 40 + len(c.Batches[i].Topic) + len(c.Batches[i].Data)
	}
	return n
}

// EncodeAppend encodes an Append into one presized buffer (hot path).
func EncodeAppend(c *Append) []byte {
	e := &enc{b: make([]byte, 0, c.EncodedSize())}
	encodeHeader(e, KindAppend, 1)
	c.encode(e)
	return e.b
}

func decodeAppend(d *dec) *Append {
	c := &Append{NowMs: d.i64()}
	n := d.count(30)
	c.Batches = make([]Batch, n)
	for i := range c.Batches {
		b := &c.Batches[i]
		b.Topic = d.str()
		b.Partition = d.i32()
		b.LastOffsetDelta = d.i32()
		b.MaxTimestamp = d.i64()
		b.ProducerID = d.i64()
		b.ProducerEpoch = d.i16()
		b.BaseSequence = d.i32()
		b.Data = d.bytes()
		b.DataPos = d.pos() - len(b.Data)
	}
	return c
}

// InitProducerID hands out the next producer id.
type InitProducerID struct{}

func (*InitProducerID) Kind() Kind    { return KindInitProducerID }
func (*InitProducerID) encode(e *enc) {}

// TrimLog moves a partition's log start offset forward (retention).
type TrimLog struct {
	Topic     string
	Partition int32
	Start     int64
}

func (*TrimLog) Kind() Kind { return KindTrimLog }
func (c *TrimLog) encode(e *enc) {
	e.str(c.Topic)
	e.i32(c.Partition)
	e.i64(c.Start)
}
