// Package fsm is kgate's replicated state machine: topics and their partition
// logs, producer ids and idempotence state, and the cluster id.
//
// Apply is a pure function of (state, command): it reads no clock, no random
// source and no map order. Times and ids come inside commands, stamped by the
// leader. Everything a reader needs is reachable through the read methods,
// which are safe to call from any goroutine.
package fsm

import (
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
	scram          map[string]map[ScramMechanism]ScramCredential // user → mechanism → credential (scram.go)

	applied atomic.Uint64 // index of the last applied entry
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
	// producers is touched only by Apply and Snapshot, both on the FSM goroutine.
	producers map[int64]*producerState
}

// Open loads the FSM from its checkpoint in opts.Dir (or starts empty),
// bringing every partition log to exactly the checkpointed offsets.
func Open(opts Options) (*FSM, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &FSM{opts: opts, log: opts.Logger, topics: map[string]*Topic{}, nextProducerID: 1, groups: map[string]*Group{}, scram: map[string]map[ScramMechanism]ScramCredential{}}
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

func partitionDir(root string, id [16]byte, p int32) string {
	return filepath.Join(root, fmt.Sprintf("%x-%d", id, p))
}

// Applied is the index of the last applied log entry.
func (f *FSM) Applied() uint64 { return f.applied.Load() }

// Apply applies one committed log entry and returns its result: one of the
// *Result types below, or an error for an undecodable entry.
func (f *FSM) Apply(index uint64, data []byte) any {
	if index != 0 && index <= f.applied.Load() {
		// Already in the checkpointed state (replay after restart).
		return nil
	}
	defer func() {
		if index != 0 {
			f.applied.Store(index)
		}
	}()
	cmd, err := Decode(data)
	if err != nil {
		f.log.Error("undecodable log entry", "index", index, "err", err)
		return err
	}
	switch c := cmd.(type) {
	case *InitCluster:
		return f.applyInitCluster(c)
	case *CreateTopic:
		return f.applyCreateTopic(c)
	case *DeleteTopic:
		return f.applyDeleteTopic(c)
	case *CreatePartitions:
		return f.applyCreatePartitions(c)
	case *AlterConfigs:
		return f.applyAlterConfigs(c)
	case *AlterTopicConfigs:
		return f.applyAlterTopicConfigs(c)
	case *Append:
		return f.applyAppend(c)
	case *InitProducerID:
		return f.applyInitProducerID()
	case *TrimLog:
		return f.applyTrimLog(c)
	case *JoinGroup:
		return f.applyJoinGroup(c)
	case *CompleteJoin:
		return f.applyCompleteJoin(c)
	case *SyncGroup:
		return f.applySyncGroup(c)
	case *RemoveMembers:
		return f.applyRemoveMembers(c)
	case *CommitOffsets:
		return f.applyCommitOffsets(c)
	case *DeleteGroups:
		return f.applyDeleteGroups(c)
	case *DeleteOffsets:
		return f.applyDeleteOffsets(c)
	case *ExpireOffsets:
		return f.applyExpireOffsets(c)
	case *AlterScramCredentials:
		return f.applyAlterScramCredentials(c)
	}
	return fmt.Errorf("fsm: no apply for %T", cmd)
}

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
		f.log.Error("create topic storage", "topic", c.Name, "err", err)
		return &CodeResult{Code: ErrKafkaStorage}
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
		t.Partitions = append(t.Partitions, &Partition{Index: i, Log: l, dir: dir, producers: map[int64]*producerState{}})
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
			f.log.Warn("delete topic files", "topic", c.Name, "err", err)
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
		f.log.Error("create partitions storage", "topic", c.Name, "err", err)
		return &CodeResult{Code: ErrKafkaStorage}
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
		f.log.Error("trim log", "topic", c.Topic, "partition", c.Partition, "err", err)
		return &CodeResult{Code: ErrKafkaStorage}
	}
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

// segmentBytes is the topic's segment.bytes, or the FSM default.
func (f *FSM) segmentBytes(cfg map[string]string) int64 {
	if v, err := strconv.ParseInt(cfg["segment.bytes"], 10, 64); err == nil && v > 0 {
		return v
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
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.topics[topic]
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	return t.Partitions[p]
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
