// Package fsm is kgate's replicated state machine: topics and their partition
// logs, producer ids and idempotence state, and the cluster id.
//
// Apply is a pure function of (state, command): it reads no clock, no random
// source and no map order. Times and ids come inside commands, stamped by the
// leader. Everything a reader needs is reachable through the read methods,
// which are safe to call from any goroutine.
package fsm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/kgate/kgate/fsm/partlog"
)

// Kafka error codes that Apply returns in results. They carry Kafka's numbers
// so the gateway can pass them through.
const (
	ErrNone                      int16 = 0
	ErrUnknownTopicOrPartition   int16 = 3
	ErrTopicAlreadyExists        int16 = 36
	ErrInvalidPartitions         int16 = 37
	ErrOutOfOrderSequence        int16 = 45
	ErrInvalidProducerEpoch      int16 = 47
	ErrUnknownProducerID         int16 = 59
	ErrKafkaStorage              int16 = 56
	ErrInvalidRequest            int16 = 42
	ErrInvalidConfig             int16 = 40
	ErrClusterAlreadyInitialized int16 = -2 // not a Kafka code; never sent
)

// Options configure an FSM.
type Options struct {
	Dir          string // data directory; the FSM owns <Dir>/topics and <Dir>/fsm
	SegmentBytes int64  // segment file size before rolling
	Logger       *slog.Logger
	// References: a batch the Raft entry holds as it is served is appended
	// as a reference to the entry (partlog.Ref), not copied, once
	// SetResolver has said where entries are read: each record is then
	// written once, in the Raft log (docs/design/write-once.md).
	References bool
}

// FSM holds the replicated state.
type FSM struct {
	opts Options
	log  *slog.Logger

	mu             sync.RWMutex // guards the fields below for readers; Apply writes under it
	clusterID      string
	topics         map[string]*Topic
	nextProducerID int64
	groups         map[string]*Group
	quotas         map[string]*clientQuota                       // by QuotaEntity.Key
	scram          map[string]map[ScramMechanism]ScramCredential // user → mechanism → credential (scram.go)
	acls           map[ACL]struct{}                              // acls.go
	txns           map[string]*txn                               // by transactional id (transactions.go)
	txnByPID       map[int64]string                              // producer id → transactional id, derived from txns
	ext            map[TopicPartition]*extPartition              // transactions in partitions outside the FSM (external_txns.go)

	applied  atomic.Uint64 // index of the last applied entry
	applying uint64        // index of the entry being applied; only Apply's goroutine uses it
	// res reads the batches partitions' references name (nil: none can be
	// read, and appends copy). Set before Raft applies anything.
	res    partlog.Resolver
	level  atomic.Uint32 // the cluster's feature Level
	halted atomic.Pointer[HaltError]
	// aclVersion changes with every change of acls (local, not replicated).
	aclVersion atomic.Uint64

	// ckptMu orders checkpoint writes against Restore. Raft persists a
	// snapshot on its own goroutine, which can still be about to write that
	// snapshot's checkpoint after a Restore replaced the state; generation
	// counts the Restores, so that such a checkpoint, naming partition
	// offsets the files no longer hold, is never written.
	ckptMu     sync.Mutex
	generation uint64
}

// Topic is one topic. Name, ID and Partitions are read under the FSM lock.
type Topic struct {
	Name       string
	ID         [16]byte
	Configs    map[string]string
	Partitions []*Partition
}

// Partition is one partition of a topic.
type Partition struct {
	Index int32
	Log   *partlog.Log
	dir   string
	// producers is written only by Apply (on the FSM goroutine) under
	// prodMu, which readers outside it (Producers) take too.
	prodMu    sync.Mutex
	producers map[int64]*producerState
	partTxns  // its transactions, under prodMu
}

// Open loads the FSM from its checkpoint in opts.Dir (or starts empty),
// bringing every partition log to exactly the checkpointed offsets.
func Open(opts Options) (*FSM, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &FSM{opts: opts, log: opts.Logger, topics: map[string]*Topic{}, nextProducerID: 1, groups: map[string]*Group{},
		quotas: map[string]*clientQuota{}, scram: map[string]map[ScramMechanism]ScramCredential{},
		acls: map[ACL]struct{}{},
		txns: map[string]*txn{}, txnByPID: map[int64]string{}, ext: map[TopicPartition]*extPartition{}}
	if err := os.MkdirAll(f.topicsDir(), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(f.checkpointPath()), 0o755); err != nil {
		return nil, err
	}
	if err := f.loadCheckpoint(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FSM) topicsDir() string      { return filepath.Join(f.opts.Dir, "topics") }
func (f *FSM) checkpointPath() string { return filepath.Join(f.opts.Dir, "fsm", "checkpoint") }

// TopicsDir is the directory holding every partition log.
func (f *FSM) TopicsDir() string { return f.topicsDir() }

func partitionDir(root string, id [16]byte, p int32) string {
	return filepath.Join(root, fmt.Sprintf("%x-%d", id, p))
}

// Applied is the index of the last applied log entry.
func (f *FSM) Applied() uint64 { return f.applied.Load() }

// Apply applies one committed log entry and returns its result: one of the
// *Result types below, a deterministic error value (ErrFeatureDisabled), or
// a *HaltError.
//
// Apply is fail-stop. An entry this binary cannot decode or apply, or an
// apply that fails on local I/O, returns a *HaltError and halts the FSM:
// the entry is not counted as applied and every later entry gets the same
// error, so this replica never goes on from a state the others do not
// share. The node must stop (cluster.Node does); after a restart with a
// binary that can apply it, replay resumes from the last checkpoint.
func (f *FSM) Apply(index uint64, data []byte) any {
	if h := f.halted.Load(); h != nil {
		return h
	}
	if index != 0 && index <= f.applied.Load() {
		// Already in the checkpointed state (replay after restart).
		return nil
	}
	cmd, version, name, err := decodeEntry(data)
	if err != nil {
		return f.halt(index, name, err)
	}
	need := commands[cmd.Kind()].since[version-1]
	var res any
	if level := f.FeatureLevel(); need > level && cmd.Kind() != KindSetFeatureLevel {
		// Admit refuses these before proposing; this is the same rule, as
		// the FSM sees it, for anything that got past it.
		res = &FeatureError{Command: name, Need: need, Cluster: level}
	} else {
		f.applying = index
		res = commands[cmd.Kind()].apply(f, cmd)
	}
	if stop, ok := res.(*stopError); ok {
		return f.halt(index, name, stop.err)
	}
	if index != 0 {
		f.applied.Store(index)
	}
	return res
}

// HaltError is an entry this replica could not apply: the node must stop.
type HaltError struct {
	Index   uint64 // Raft log index
	Command string // kind and version, as far as they could be read
	Err     error
}

func (e *HaltError) Error() string {
	return fmt.Sprintf("fsm: cannot apply Raft log entry %d (%s): %v", e.Index, e.Command, e.Err)
}

func (e *HaltError) Unwrap() error { return e.Err }

func (f *FSM) halt(index uint64, command string, err error) *HaltError {
	h := &HaltError{Index: index, Command: command, Err: err}
	f.halted.CompareAndSwap(nil, h) // the first one stands
	return f.halted.Load()
}

// Halted is the entry that halted the FSM, or nil.
func (f *FSM) Halted() *HaltError { return f.halted.Load() }

// stopError is what an apply function returns when this node cannot apply
// the command (local I/O failed, or the command needs a newer binary).
type stopError struct{ err error }

func cannotApply(err error) any { return &stopError{err: err} }

// ioFailure is cannotApply for a local I/O error while applying op.
func ioFailure(op string, err error) any { return &stopError{err: fmt.Errorf("%s: %w", op, err)} }

// CodeResult is the result of a command that only succeeds or fails.
type CodeResult struct{ Code int16 }

func (f *FSM) applyInitCluster(c *InitCluster) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clusterID != "" {
		return &CodeResult{Code: ErrClusterAlreadyInitialized}
	}
	f.clusterID = c.ClusterID
	return &CodeResult{}
}

// ClusterID is the cluster's id, or "" before the first leader set it.
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.clusterID
}

func (f *FSM) applyCreateTopic(c *CreateTopic) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.topics[c.Name]; ok {
		return &CodeResult{Code: ErrTopicAlreadyExists}
	}
	if c.Partitions < 1 {
		return &CodeResult{Code: ErrInvalidPartitions}
	}
	t := &Topic{Name: c.Name, ID: c.ID, Configs: map[string]string{}}
	for _, kv := range c.Configs {
		t.Configs[kv.Key] = kv.Value
	}
	if err := f.addPartitionsLocked(t, c.Partitions); err != nil {
		return ioFailure("create topic "+c.Name, err)
	}
	f.topics[c.Name] = t
	return &CodeResult{}
}

func (f *FSM) addPartitionsLocked(t *Topic, count int32) error {
	for i := int32(len(t.Partitions)); i < count; i++ {
		dir := partitionDir(f.topicsDir(), t.ID, i)
		// A leftover directory (a crash between delete and checkpoint) is stale.
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		l, err := partlog.Open(dir, 0, 0, f.segmentBytes(t.Configs))
		if err != nil {
			return err
		}
		l.SetResolver(f.res)
		t.Partitions = append(t.Partitions, &Partition{Index: i, Log: l, dir: dir, producers: map[int64]*producerState{}, partTxns: newPartTxns()})
	}
	return nil
}

func (f *FSM) applyDeleteTopic(c *DeleteTopic) any {
	f.mu.Lock()
	t, ok := f.topics[c.Name]
	if ok {
		delete(f.topics, c.Name)
	}
	f.mu.Unlock()
	if !ok {
		return &CodeResult{Code: ErrUnknownTopicOrPartition}
	}
	for _, p := range t.Partitions {
		if err := p.Log.Remove(); err != nil {
			return ioFailure("delete topic "+c.Name, err)
		}
	}
	return &CodeResult{}
}

func (f *FSM) applyCreatePartitions(c *CreatePartitions) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[c.Name]
	if !ok {
		return &CodeResult{Code: ErrUnknownTopicOrPartition}
	}
	if c.Count <= int32(len(t.Partitions)) {
		return &CodeResult{Code: ErrInvalidPartitions}
	}
	if err := f.addPartitionsLocked(t, c.Count); err != nil {
		return ioFailure("create partitions of "+c.Name, err)
	}
	return &CodeResult{}
}

func (f *FSM) applyAlterConfigs(c *AlterConfigs) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[c.Name]
	if !ok {
		return &CodeResult{Code: ErrUnknownTopicOrPartition}
	}
	for _, kv := range c.Set {
		t.Configs[kv.Key] = kv.Value
	}
	for _, k := range c.Delete {
		delete(t.Configs, k)
	}
	f.configsChangedLocked(t)
	return &CodeResult{}
}

func (f *FSM) applyAlterTopicConfigs(c *AlterTopicConfigs) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[c.Name]
	if !ok {
		return &CodeResult{Code: ErrUnknownTopicOrPartition}
	}
	cfg := make(map[string]string, len(c.Configs))
	for _, kv := range c.Configs {
		cfg[kv.Key] = kv.Value
	}
	t.Configs = cfg
	f.configsChangedLocked(t)
	return &CodeResult{}
}

// configsChangedLocked applies the configs the FSM itself enforces to a
// live topic: segment.bytes takes effect from the next segment roll, as in
// Kafka (a restart or restore opens the logs with the same value).
func (f *FSM) configsChangedLocked(t *Topic) {
	seg := f.segmentBytes(t.Configs)
	for _, p := range t.Partitions {
		p.Log.SetSegmentBytes(seg)
	}
}

func (f *FSM) applyTrimLog(c *TrimLog) any {
	p := f.Partition(c.Topic, c.Partition)
	if p == nil {
		return &CodeResult{Code: ErrUnknownTopicOrPartition}
	}
	if err := p.Log.TrimTo(c.Start); err != nil {
		return ioFailure(fmt.Sprintf("trim %s/%d", c.Topic, c.Partition), err)
	}
	p.pruneAborted(p.Log.Start())
	return &CodeResult{}
}

// ProducerIDResult answers InitProducerID.
type ProducerIDResult struct {
	ProducerID int64
	Epoch      int16
}

func (f *FSM) applyInitProducerID() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextProducerID
	f.nextProducerID++
	return &ProducerIDResult{ProducerID: id}
}

// segmentBytes is the topic's internal.segment.bytes (Kafka 4's override,
// below segment.bytes' 1 MiB floor), else its segment.bytes, else the FSM
// default.
func (f *FSM) segmentBytes(cfg map[string]string) int64 {
	for _, key := range []string{"internal.segment.bytes", "segment.bytes"} {
		if v, err := strconv.ParseInt(cfg[key], 10, 64); err == nil && v > 0 {
			return v
		}
	}
	return f.opts.SegmentBytes
}

// Topic returns the topic called name, or nil.
func (f *FSM) Topic(name string) *TopicInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.topics[name]
	if !ok {
		return nil
	}
	return t.info()
}

// TopicInfo is a reader's copy of a topic's metadata.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Configs    map[string]string
}

func (t *Topic) info() *TopicInfo {
	cfg := make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		cfg[k] = v
	}
	return &TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions)), Configs: cfg}
}

// Topics lists all topics sorted by name.
func (f *FSM) Topics() []*TopicInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*TopicInfo, 0, len(f.topics))
	for _, t := range f.topics {
		out = append(out, t.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TopicByID returns the name of the topic with that id, or "".
func (f *FSM) TopicByID(id [16]byte) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for name, t := range f.topics {
		if t.ID == id {
			return name
		}
	}
	return ""
}

// Partition returns a partition, or nil when the topic or partition is unknown.
func (f *FSM) Partition(topic string, p int32) *Partition {
	_, part := f.topicPartition(topic, p)
	return part
}

// topicPartition returns a partition and its topic; both nil when either
// is unknown.
func (f *FSM) topicPartition(topic string, p int32) (*Topic, *Partition) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.topics[topic]
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return nil, nil
	}
	return t, t.Partitions[p]
}

// DataBytes is the size of all partition data on disk.
func (f *FSM) DataBytes() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var n int64
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			n += p.Log.Size()
		}
	}
	return n
}

// SetResolver says where the batches partitions' references name are read
// (the Raft log). Call it before Raft applies any entry: with References,
// appends write references from then on.
func (f *FSM) SetResolver(res partlog.Resolver) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res = res
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			p.Log.SetResolver(res)
		}
	}
}

// Pin is the lowest Raft index a partition's reference names or, when
// none does, the index of the next entry to apply: no reference made
// later names an entry below it, so the Raft log may forget (past Raft's
// own needs) every entry below it.
func (f *FSM) Pin() uint64 {
	pin := f.applied.Load() + 1 // first: any reference made after names a later entry
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			if r := p.Log.FirstRef(); r != 0 && r < pin {
				pin = r
			}
		}
	}
	return pin
}

// ReferencedBelow is the bytes of the batches that partitions serve
// through references to Raft entries below index: what
// RewriteReferences(index) would copy.
func (f *FSM) ReferencedBelow(index uint64) int64 {
	var n int64
	for _, l := range f.logs() {
		n += l.ReferencedBelow(index)
	}
	return n
}

// RewriteReferences copies into the partitions' own files the batches
// they serve through references to Raft entries below index, so that the
// pin can pass those entries (partlog.Log.Rewrite). It runs beside Apply.
// It returns the bytes written; a partition that fails does not stop the
// others.
func (f *FSM) RewriteReferences(ctx context.Context, index uint64) (int64, error) {
	var n int64
	var errs []error
	for _, l := range f.logs() {
		if ctx.Err() != nil {
			break
		}
		m, err := l.Rewrite(ctx, index)
		n += m
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// logs lists every partition's log.
func (f *FSM) logs() []*partlog.Log {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*partlog.Log
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			out = append(out, p.Log)
		}
	}
	return out
}

// Close closes every partition log.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.topics {
		for _, p := range t.Partitions {
			p.Log.Close()
		}
	}
	return nil
}
