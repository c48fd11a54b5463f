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
)

// Command is one replicated state change. Everything Apply needs is in the
// command: the leader stamps times, ids and validated batch facts into it.
type Command interface {
	Kind() Kind
	encode(*enc)
}

// Encode returns the log entry bytes of c.
func Encode(c Command) []byte {
	e := &enc{b: make([]byte, 0, 64)}
	e.u8(uint8(c.Kind()))
	c.encode(e)
	return e.b
}

// Decode parses a log entry. Slices in the result alias data.
func Decode(data []byte) (Command, error) {
	if len(data) == 0 {
		return nil, errShort
	}
	d := &dec{b: data[1:]}
	var c Command
	switch Kind(data[0]) {
	case KindInitCluster:
		c = &InitCluster{ClusterID: d.str()}
	case KindCreateTopic:
		c = decodeCreateTopic(d)
	case KindDeleteTopic:
		c = &DeleteTopic{Name: d.str()}
	case KindCreatePartitions:
		c = &CreatePartitions{Name: d.str(), Count: d.i32()}
	case KindAppend:
		c = decodeAppend(d)
	case KindInitProducerID:
		c = &InitProducerID{}
	case KindTrimLog:
		c = &TrimLog{Topic: d.str(), Partition: d.i32(), Start: d.i64()}
	case KindAlterConfigs:
		c = &AlterConfigs{Name: d.str(), Set: decodeConfigs(d), Delete: decodeStrings(d)}
	case KindAlterTopicConfigs:
		c = &AlterTopicConfigs{Name: d.str(), Configs: decodeConfigs(d)}
	case KindJoinGroup:
		c = decodeJoinGroup(d)
	case KindCompleteJoin:
		c = &CompleteJoin{Group: d.str(), Generation: d.i32(), NowMs: d.i64()}
	case KindSyncGroup:
		c = decodeSyncGroup(d)
	case KindRemoveMembers:
		c = &RemoveMembers{Group: d.str(), MemberIDs: decodeStrings(d), NowMs: d.i64()}
	case KindCommitOffsets:
		c = decodeCommitOffsets(d)
	case KindDeleteGroups:
		c = &DeleteGroups{Groups: decodeStrings(d)}
	case KindDeleteOffsets:
		c = decodeDeleteOffsets(d)
	case KindExpireOffsets:
		c = &ExpireOffsets{NowMs: d.i64(), RetentionMs: d.i64()}
	case KindAlterScramCredentials:
		c = decodeAlterScramCredentials(d)
	default:
		return nil, fmt.Errorf("fsm: unknown command kind %d", data[0])
	}
	if d.err != nil {
		return nil, fmt.Errorf("fsm: decode command kind %d: %w", data[0], d.err)
	}
	return c, nil
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
	e.u8(uint8(KindAppend))
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
