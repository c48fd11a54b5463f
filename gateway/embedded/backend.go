// Package embedded is the backend that keeps records in kgate's own log:
// every change is an fsm command proposed through the Raft node, so a
// cluster replicates data the same way it replicates group state.
package embedded

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/fsm/partlog"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/records"
)

// Backend implements gateway.Backend over the replicated FSM.
type Backend struct {
	node *cluster.Node
	fsm  *fsm.FSM
	log  *slog.Logger
	now  func() time.Time
	// retentionKick wakes RunRetention early: a config change takes effect
	// at once instead of at the next tick.
	retentionKick chan struct{}
	metrics       *metrics
}

// New makes the backend.
func New(node *cluster.Node, f *fsm.FSM, log *slog.Logger) *Backend {
	return &Backend{node: node, fsm: f, log: log, now: time.Now, retentionKick: make(chan struct{}, 1), metrics: newMetrics()}
}

var _ gateway.Backend = (*Backend)(nil)

func toInfo(t *fsm.TopicInfo) gateway.TopicInfo {
	return gateway.TopicInfo{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Configs: t.Configs}
}

// Topics lists every topic.
func (b *Backend) Topics() []gateway.TopicInfo {
	ts := b.fsm.Topics()
	out := make([]gateway.TopicInfo, len(ts))
	for i, t := range ts {
		out[i] = toInfo(t)
	}
	return out
}

// Topic returns one topic.
func (b *Backend) Topic(name string) (gateway.TopicInfo, bool) {
	t := b.fsm.Topic(name)
	if t == nil {
		return gateway.TopicInfo{}, false
	}
	return toInfo(t), true
}

// TopicName resolves a topic id.
func (b *Backend) TopicName(id [16]byte) (string, bool) {
	n := b.fsm.TopicByID(id)
	return n, n != ""
}

// PartitionLeader: the Raft leader leads every partition, once it has
// applied the whole log (before that its high watermarks could lag).
func (b *Backend) PartitionLeader(topic string, partition int32) (int32, bool) {
	if b.fsm.Partition(topic, partition) == nil {
		return -1, false
	}
	id, ok := b.node.LeaderID()
	if !ok || (id == b.node.Self().ID && !b.node.IsLeader()) {
		return -1, true
	}
	return id, true
}

// propose applies a command on the leader and maps the outcome to a code.
func (b *Backend) propose(ctx context.Context, cmd fsm.Command, notLeader *kerr.Error) (any, error) {
	res, err := b.node.Propose(ctx, fsm.Encode(cmd), false)
	if errors.Is(err, cluster.ErrNotLeader) {
		return nil, notLeader
	}
	if errors.Is(err, fsm.ErrFeatureDisabled) {
		// A voter still runs an older kgate (a rolling upgrade in progress).
		return nil, kerr.UnsupportedVersion
	}
	if err != nil {
		b.log.Warn("proposal failed", "kind", cmd.Kind(), "err", err)
		return nil, kerr.RequestTimedOut
	}
	if cr, ok := res.(*fsm.CodeResult); ok && cr.Code != 0 {
		return nil, kerr.ErrorForCode(cr.Code)
	}
	return res, nil
}

// CreateTopic creates a topic with a fresh id.
func (b *Backend) CreateTopic(ctx context.Context, spec gateway.TopicSpec) error {
	cmd := &fsm.CreateTopic{Name: spec.Name, Partitions: spec.Partitions}
	rand.Read(cmd.ID[:])
	cmd.ID[6] = cmd.ID[6]&0x0f | 0x40 // a version 4 UUID, as Kafka's are
	cmd.ID[8] = cmd.ID[8]&0x3f | 0x80
	for k, v := range spec.Configs {
		cmd.Configs = append(cmd.Configs, fsm.Config{Key: k, Value: v})
	}
	_, err := b.propose(ctx, cmd, kerr.NotController)
	return err
}

// DeleteTopic deletes a topic and its data.
func (b *Backend) DeleteTopic(ctx context.Context, name string) error {
	_, err := b.propose(ctx, &fsm.DeleteTopic{Name: name}, kerr.NotController)
	return err
}

// CreatePartitions grows a topic.
func (b *Backend) CreatePartitions(ctx context.Context, name string, count int32) error {
	_, err := b.propose(ctx, &fsm.CreatePartitions{Name: name, Count: count}, kerr.NotController)
	return err
}

// AlterTopicConfigs replaces a topic's dynamic configs. Retention runs again
// right after, so a lowered retention.ms or retention.bytes applies at once.
func (b *Backend) AlterTopicConfigs(ctx context.Context, name string, configs map[string]string) error {
	cmd := &fsm.AlterTopicConfigs{Name: name, Configs: make([]fsm.Config, 0, len(configs))}
	for k, v := range configs {
		cmd.Configs = append(cmd.Configs, fsm.Config{Key: k, Value: v}) // Encode sorts them
	}
	if _, err := b.propose(ctx, cmd, kerr.NotController); err != nil {
		return err
	}
	select {
	case b.retentionKick <- struct{}{}:
	default: // a pass is already due
	}
	return nil
}

// maxAppendBytes bounds the record bytes of one Append, the Raft entry a
// produce request becomes (a larger batch still goes alone). Raft's
// transport decodes an entry on a follower in 256 KiB steps, copying all it
// has read so far at each step: an entry of n bytes costs about n²/512 KiB
// of copying, 15 times the entry for 8 MiB (a request of eight 1 MiB
// batches), which was most of a follower's CPU. At 1 MiB it is 1.5 times.
// The leader still writes and syncs the entries of a request in one batch
// (see Config.BatchApplyCh in cluster), and they replicate together.
const maxAppendBytes = 1 << 20

// Produce proposes the batches of a request as Appends of at most
// maxAppendBytes, in order. Kafka writes each partition's batch on its own,
// so a request need not be one entry: the connection's requests still reach
// the log in order, each partition's batches too.
func (b *Backend) Produce(ctx context.Context, batches []gateway.ProduceBatch) func() []gateway.ProduceResult {
	out := make([]gateway.ProduceResult, len(batches))
	failAll := func(err error) func() []gateway.ProduceResult {
		failed(out, err)
		return func() []gateway.ProduceResult { return out }
	}
	if b.node.HaltErr() != nil {
		return failAll(kerr.KafkaStorageError)
	}
	if !b.node.IsLeader() {
		return failAll(kerr.NotLeaderForPartition)
	}
	now := b.now().UnixMilli()
	type proposal struct {
		first, n int // batches[first:first+n]
		fut      cluster.Future
	}
	var props []proposal
	for first := 0; first < len(batches); {
		n, size := 0, 0
		for first+n < len(batches) && (n == 0 || size+len(batches[first+n].Data) <= maxAppendBytes) {
			size += len(batches[first+n].Data)
			n++
		}
		cmd := &fsm.Append{NowMs: now, Batches: make([]fsm.Batch, n)}
		for i, pb := range batches[first : first+n] {
			cmd.Batches[i] = fsm.Batch{
				Topic: pb.Topic, Partition: pb.Partition, Data: pb.Data,
				LastOffsetDelta: pb.LastOffsetDelta, MaxTimestamp: pb.MaxTimestamp,
				ProducerID: pb.ProducerID, ProducerEpoch: pb.ProducerEpoch, BaseSequence: pb.BaseSequence,
			}
		}
		props = append(props, proposal{first: first, n: n, fut: b.node.ProposeAsync(fsm.EncodeAppend(cmd))})
		first += n
	}
	return func() []gateway.ProduceResult {
		for _, p := range props {
			b.appendResults(out[p.first:p.first+p.n], p.fut)
		}
		return out
	}
}

// failed answers every batch with err.
func failed(out []gateway.ProduceResult, err error) {
	for i := range out {
		out[i] = gateway.ProduceResult{Err: err, BaseOffset: -1, LogStartOffset: -1}
	}
}

// appendResults waits for one Append and fills in the answers of its batches.
func (b *Backend) appendResults(out []gateway.ProduceResult, fut cluster.Future) {
	res, err := fut.Result()
	if err != nil {
		switch {
		case b.node.HaltErr() != nil:
			// This node could not write the append (its disk is full)
			// and stops: as Kafka answers for a failed log dir. The
			// client retries on the new leader; the append may still
			// have been committed by the others, and an idempotent
			// producer's retry is then answered with its offsets.
			b.log.Warn("append failed: this node halted", "err", err)
			failed(out, kerr.KafkaStorageError)
		case errors.Is(err, cluster.ErrNotLeader):
			failed(out, kerr.NotLeaderForPartition)
		case errors.Is(err, fsm.ErrFeatureDisabled):
			failed(out, kerr.UnsupportedVersion)
		default:
			b.log.Warn("append failed", "err", err)
			failed(out, kerr.RequestTimedOut)
		}
		return
	}
	ar := res.(*fsm.AppendResults)
	for i, r := range ar.Results {
		out[i] = gateway.ProduceResult{BaseOffset: r.BaseOffset, LogStartOffset: r.LogStartOffset, LogAppendTime: r.LogAppendTime}
		if r.Code != 0 {
			out[i].Err = kerr.ErrorForCode(r.Code)
		}
	}
}

func (b *Backend) partition(topic string, p int32) (*fsm.Partition, error) {
	part := b.fsm.Partition(topic, p)
	if part == nil {
		return nil, kerr.UnknownTopicOrPartition
	}
	return part, nil
}

// AppendTimes: LogAppendTime topics once the cluster's feature level has
// every replica stamp their batches alike.
func (b *Backend) AppendTimes() bool { return b.fsm.FeatureLevel() >= fsm.LevelLogAppendTime }

// Read returns batches from offset.
func (b *Backend) Read(ctx context.Context, topic string, p int32, offset int64, maxBytes int) (gateway.ReadResult, error) {
	return b.ReadInto(ctx, topic, p, offset, maxBytes, nil)
}

// ReadInto is Read into a buffer alloc returns (gateway.ReaderInto).
func (b *Backend) ReadInto(_ context.Context, topic string, p int32, offset int64, maxBytes int, alloc func(int) []byte) (gateway.ReadResult, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return gateway.ReadResult{HighWatermark: -1, LogStartOffset: -1}, err
	}
	data, err := part.Log.ReadWith(offset, maxBytes, alloc)
	start, next := part.Log.Bounds()
	res := gateway.ReadResult{Records: data, HighWatermark: next, LogStartOffset: start}
	if errors.Is(err, partlog.ErrOffsetOutOfRange) {
		return res, kerr.OffsetOutOfRange
	}
	if err != nil {
		b.log.Error("read", "topic", topic, "partition", p, "err", err)
		return res, kerr.KafkaStorageError
	}
	return res, nil
}

// Watch returns a channel closed by the partition's next append.
func (b *Backend) Watch(topic string, p int32) (<-chan struct{}, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return nil, err
	}
	return part.Log.Wait(), nil
}

// Offsets returns the log start offset and high watermark.
func (b *Backend) Offsets(_ context.Context, topic string, p int32) (int64, int64, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return -1, -1, err
	}
	start, next := part.Log.Bounds()
	return start, next, nil
}

// PartitionStorage reports a partition's bytes on disk and its segments.
func (b *Backend) PartitionStorage(topic string, p int32) (int64, int, bool) {
	part := b.fsm.Partition(topic, p)
	if part == nil {
		return 0, 0, false
	}
	return part.Log.Size(), len(part.Log.Segments()), true
}

// OffsetForTime finds the first record at or after ts.
func (b *Backend) OffsetForTime(_ context.Context, topic string, p int32, ts int64) (int64, int64, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return -1, -1, err
	}
	batch, err := part.Log.FindTimestamp(ts)
	if err != nil {
		return -1, -1, kerr.KafkaStorageError
	}
	if batch == nil {
		return -1, -1, nil
	}
	start := part.Log.Start()
	_, recs, err := records.Records(batch, 64<<20)
	if err != nil {
		return -1, -1, kerr.KafkaStorageError
	}
	for _, r := range recs {
		if r.Offset >= start && r.Timestamp >= ts {
			return r.Offset, r.Timestamp, nil
		}
	}
	return -1, -1, nil
}

// MaxTimestampOffset finds the record with the largest timestamp.
func (b *Backend) MaxTimestampOffset(ctx context.Context, topic string, p int32) (int64, int64, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return -1, -1, err
	}
	maxTs := int64(-1)
	for _, s := range part.Log.Segments() {
		maxTs = max(maxTs, s.MaxTs)
	}
	if maxTs < 0 {
		return -1, -1, nil
	}
	return b.OffsetForTime(ctx, topic, p, maxTs)
}

// InitProducerID allocates a producer id through the FSM.
//
// Only the leader can hand ids out. Clients send an idempotent producer's
// InitProducerId to any broker; a follower answers with a plain retriable
// code so the client retries (on another broker). NOT_COORDINATOR would make
// the Java producer look up a transaction coordinator for a null
// transactional id.
func (b *Backend) InitProducerID(ctx context.Context) (int64, int16, error) {
	res, err := b.propose(ctx, &fsm.InitProducerID{}, kerr.CoordinatorLoadInProgress)
	if err != nil {
		return -1, -1, err
	}
	r := res.(*fsm.ProducerIDResult)
	return r.ProducerID, r.Epoch, nil
}
