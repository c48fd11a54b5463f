package gateway

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Backend stores records. The embedded backend keeps them in the Raft-
// replicated log; the Iggy backend in an Iggy server. Errors are *kerr.Error
// values where a Kafka code fits; anything else answers UNKNOWN_SERVER_ERROR.
type Backend interface {
	// Topics lists every topic, sorted by name.
	Topics() []TopicInfo
	// Topic returns one topic.
	Topic(name string) (TopicInfo, bool)
	// TopicName resolves a topic id.
	TopicName(id [16]byte) (string, bool)
	// PartitionLeader is the node that serves a partition's produce and
	// fetch: -1 while there is none. ok is false for an unknown partition.
	PartitionLeader(topic string, partition int32) (leader int32, ok bool)

	CreateTopic(ctx context.Context, spec TopicSpec) error
	DeleteTopic(ctx context.Context, name string) error
	CreatePartitions(ctx context.Context, name string, count int32) error
	// AlterTopicConfigs replaces a topic's dynamic configs with configs (the handler has validated keys and values).
	AlterTopicConfigs(ctx context.Context, name string, configs map[string]string) error

	// Produce starts writing batches (each already validated) and returns a
	// wait function giving one result per batch. Calls from one connection
	// are applied in call order.
	Produce(ctx context.Context, batches []ProduceBatch) func() []ProduceResult
	// Read returns whole batches starting at offset, at most maxBytes but
	// at least one batch when any exists.
	Read(ctx context.Context, topic string, partition int32, offset int64, maxBytes int) (ReadResult, error)
	// Watch returns a channel closed when the partition next changes.
	Watch(topic string, partition int32) (<-chan struct{}, error)
	// Offsets returns the log start offset and the high watermark.
	Offsets(ctx context.Context, topic string, partition int32) (start, end int64, err error)
	// OffsetForTime returns the first offset whose record timestamp is at
	// least ts, with that timestamp; (-1, -1) when there is none.
	OffsetForTime(ctx context.Context, topic string, partition int32, ts int64) (offset, timestamp int64, err error)
	// MaxTimestampOffset returns the offset and timestamp of the record with
	// the largest timestamp (ListOffsets -3).
	MaxTimestampOffset(ctx context.Context, topic string, partition int32) (offset, timestamp int64, err error)
	// InitProducerID allocates a producer id.
	InitProducerID(ctx context.Context) (id int64, epoch int16, err error)
}

// TopicSyncer is a Backend whose topic list can lag changes made through
// other nodes (the Iggy backend caches Iggy's). SyncTopics brings it up to
// date; handlers call it before listing every topic, so that a topic
// created through one node is listed by the next request to any node, as
// scripts running kafka-topics.sh expect.
type TopicSyncer interface {
	SyncTopics(ctx context.Context) error
}

// ProduceDataReleaser is a backend that keeps nothing of a ProduceBatch's
// Data once the function its Produce returned has returned (the Iggy
// backend: the records are copied into its sends). Its produce requests'
// buffers are then reused for later requests instead of allocated (and
// zeroed) afresh: a third of kgate's CPU per GB produced to Iggy.
type ProduceDataReleaser interface {
	ReleasesProduceData() bool
}

// AppendTimeBackend is a backend that can stamp batches with the time it
// appends them (message.timestamp.type=LogAppendTime): the embedded one,
// once every node runs a binary that does. Other backends keep create
// times only.
type AppendTimeBackend interface {
	AppendTimes() bool
}

// TransactionalBackend is a backend that stores transactions (the
// embedded one): it knows each partition's last stable offset and its
// aborted transactions. A backend without it has no transactions, so its
// last stable offset is the high watermark.
type TransactionalBackend interface {
	// LastStableOffset is the first offset of the partition's oldest open
	// transaction, or its high watermark when none is open.
	LastStableOffset(topic string, partition int32) (int64, error)
	// AbortedTransactions lists the aborted transactions with records in
	// [from, to), oldest first.
	AbortedTransactions(topic string, partition int32, from, to int64) []AbortedTransaction
}

// AbortedTransaction is one aborted transaction in a partition, as Fetch
// reports it.
type AbortedTransaction struct {
	ProducerID  int64
	FirstOffset int64
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Configs    map[string]string
}

// TopicSpec is a topic to create.
type TopicSpec struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// ProduceBatch is one validated batch for one partition.
type ProduceBatch struct {
	Topic           string
	Partition       int32
	Data            []byte
	LastOffsetDelta int32
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// ProduceResult is one batch's outcome.
type ProduceResult struct {
	Err            error
	BaseOffset     int64
	LogStartOffset int64
	// LogAppendTime is the time the batch was stamped with when its topic
	// keeps append times; 0 or less otherwise.
	LogAppendTime int64
}

// ReadResult is what Read found.
type ReadResult struct {
	Records        []byte
	HighWatermark  int64
	LogStartOffset int64
}

// ErrorCode maps a backend error to its Kafka code.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}
