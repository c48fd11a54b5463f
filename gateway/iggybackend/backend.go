// Package iggybackend is the backend that keeps records in an Apache Iggy
// server: a Kafka topic is an Iggy topic, Kafka partition p the topic's
// p-th partition, and Kafka offsets are Iggy offsets. Every kgate node
// talks to the same Iggy server, so Metadata spreads partition leadership
// over the live nodes; group state and producer ids stay in the Raft FSM.
package iggybackend

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
)

// Nodes is the live cluster membership partition leadership is spread over.
type Nodes interface {
	Self() cluster.NodeInfo
	// LiveNodes is the membership every node derives from the same gossip
	// events (see cluster.Node.LiveNodes) and a version that changes with it.
	LiveNodes() ([]cluster.NodeInfo, uint64)
}

// Config configures the backend.
type Config struct {
	Client *iggy.Client
	// Stream is the Iggy stream Kafka topics live in, created if missing.
	Stream string
	// Topics holds per-topic overrides (--iggy-topic-map).
	Topics TopicMap
	Nodes  Nodes
	// InitProducerID allocates producer ids (through Raft).
	InitProducerID func(ctx context.Context) (int64, int16, error)
	// PollInterval is how often a partition a fetch waits on is checked for
	// writes that did not come through this node; default 100 ms.
	PollInterval time.Duration
	// RefreshInterval is how often the topic list is re-read; default 1 s.
	RefreshInterval time.Duration
	// RequestTimeout bounds each Iggy call; default 5 s.
	RequestTimeout time.Duration
	// SaveEvery, when not 0, is the messages_required_to_save of topics
	// kgate creates on a current-dialect server (iggy.TopicConfig).
	SaveEvery uint32
	// MaxUncompressed bounds the decompressed size of a produced batch.
	MaxUncompressed int
	// Txns is the replicated transaction state (the FSM); nil: every
	// transactional batch is refused with INVALID_TXN_STATE.
	Txns TxnState
	Log  *slog.Logger

	// listedForTest, when set, runs in each topic refresh right after the
	// list was read.
	listedForTest func()
}

// Backend implements gateway.Backend over an Iggy server.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	client *iggy.Client
	ids    *idSource

	mu     sync.RWMutex
	topics map[string]*topic // by Kafka name
	byID   map[[16]byte]*topic
	// loads numbers loadTopic's reads (topic.loaded), so that a refresh
	// leaves alone what was read after its own list: a topic this node
	// created (or changed) while the list was on its way.
	loads atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	// ownMu guards ownSeen, the membership version noteMembership last
	// acted on.
	ownMu   sync.Mutex
	ownSeen uint64
	wg      sync.WaitGroup
	life    sync.Mutex
	closing bool
	kick    chan struct{} // asks the refresh loop for an early refresh
	// syncMu serialises refreshes; syncedFrom is when the last one that
	// ended began (SyncTopics coalesces on it).
	syncMu     sync.Mutex
	syncedFrom time.Time
	missMu     sync.Mutex
	misses     map[string]time.Time // names recently found missing in Iggy
	errs       errorLog
	now        func() time.Time
	// streamSeen is set once the stream has been found or created; lost
	// counts partitions found to have gone back (partition.wentBack).
	streamSeen atomic.Bool
	lost       atomic.Int64
	aheadSlots chan struct{} // one token per read-ahead in flight
	aheadKept  []keptAhead   // read-aheads started, oldest first; under life
}

var _ gateway.Backend = (*Backend)(nil)

// topic is the cached view of one Iggy topic.
type topic struct {
	name   string // Kafka name
	stream string // Iggy stream name
	iggy   string // Iggy topic name
	id     [16]byte
	iggyID uint32
	info   iggy.Topic
	parts  []*partition
	loaded uint64 // Backend.loads when read from Iggy
}

func (t *topic) streamID() iggy.Identifier { return iggy.NamedID(t.stream) }

// topicID addresses the topic by name: Iggy hands the numeric id of a
// deleted topic to the next one created, so a cached id may name another
// topic, while the name always names the one Kafka clients mean.
func (t *topic) topicID() iggy.Identifier { return iggy.NamedID(t.iggy) }

// sameTopic reports whether two descriptions are of one Iggy topic, not of
// one deleted and another created under the name. A 0.9 server keeps a
// topic's creation time; a 0.7/0.8 server stamps it anew when it reloads
// its metadata at start-up, so there only the id is compared, and a
// re-creation is noticed when it is seen missing or its offsets go back.
func (b *Backend) sameTopic(a, c iggy.Topic) bool {
	return a.ID == c.ID && (a.CreatedAt == c.CreatedAt || b.client.Dialect() == iggy.Legacy)
}

// uuidOf is the Kafka topic id of an Iggy topic (see sameTopic). On a
// legacy server the name stands in for the creation time: Iggy gives a
// new topic the id of a deleted one, and two topics must never share a
// Kafka id.
func (b *Backend) uuidOf(stream string, info iggy.Topic) [16]byte {
	if b.client.Dialect() == iggy.Legacy {
		return topicUUID(stream+"\x00"+info.Name, info.ID, 0)
	}
	return topicUUID(stream, info.ID, info.CreatedAt)
}

// New checks the configuration; Start connects.
func New(cfg Config) (*Backend, error) {
	if cfg.Client == nil || cfg.Nodes == nil || cfg.InitProducerID == nil {
		return nil, errors.New("iggybackend: Client, Nodes and InitProducerID are required")
	}
	if cfg.Stream == "" {
		return nil, errors.New("iggybackend: a stream name is required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.MaxUncompressed <= 0 {
		cfg.MaxUncompressed = 64 << 20
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Backend{
		cfg: cfg, log: cfg.Log, client: cfg.Client, ids: newIDSource(),
		topics: map[string]*topic{}, byID: map[[16]byte]*topic{},
		ctx: ctx, cancel: cancel, now: time.Now, kick: make(chan struct{}, 1),
		misses: map[string]time.Time{}, aheadSlots: make(chan struct{}, readAheads),
	}, nil
}

// Start connects to Iggy (a wrong password or token fails here), creates
// the stream if missing, loads the topics and starts the background
// loops. An unreachable server is not fatal: the loops keep retrying and
// requests get retriable errors until it answers.
func (b *Backend) Start(ctx context.Context) error {
	err := b.client.Connect(ctx)
	if isAuthError(err) {
		return fmt.Errorf("iggy refused the credentials: %w", err)
	}
	if err != nil {
		b.log.Warn("iggy unreachable at start-up; will keep trying", "err", err)
	} else if err := b.refresh(ctx); err != nil {
		b.log.Warn("iggy topics not loaded yet", "err", err)
	}
	b.life.Lock()
	b.wg.Add(3)
	b.life.Unlock()
	go b.refreshLoop()
	go b.watchLoop()
	go b.ownershipLoop()
	return nil
}

// ownershipCheck is how often the membership version is compared.
const ownershipCheck = 20 * time.Millisecond

// ownershipLoop follows membership changes (noteMembership) between sends.
func (b *Backend) ownershipLoop() {
	defer b.wg.Done()
	t := time.NewTicker(ownershipCheck)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
			b.noteMembership()
		}
	}
}

// noteMembership marks, at every membership change, the partitions this
// node does not lead in the new view: their producer state may go stale
// while another node writes them (partition.away). When the version moved
// by more than one change since the last look, a view in between went
// unseen, so every partition is marked. Sends call it too, so none acts
// on a change before it is noted.
func (b *Backend) noteMembership() {
	nodes, version := b.cfg.Nodes.LiveNodes()
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	if version == b.ownSeen {
		return
	}
	all := version != b.ownSeen+1
	b.ownSeen = version
	self := b.cfg.Nodes.Self().ID
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, t := range b.topics {
		for _, p := range t.parts {
			if all || leaderOf(nodes, t.name, p.index) != self {
				p.away.Store(true)
			}
		}
	}
}

// LostData counts the times this node found Iggy to have lost records it
// had acknowledged: the stream gone, or a partition's next offset gone back.
func (b *Backend) LostData() int64 { return b.lost.Load() }

// Dialect is the Iggy dialect in use ("" until the first connection).
func (b *Backend) Dialect() string {
	if d := b.client.Dialect(); d != 0 {
		return d.String()
	}
	return ""
}

// Close stops the background loops and waits for sends in flight.
func (b *Backend) Close() {
	b.life.Lock()
	b.closing = true
	b.life.Unlock()
	b.cancel()
	b.wg.Wait()
}

func isAuthError(err error) bool {
	return errors.Is(err, iggy.ErrInvalidCredentials) || errors.Is(err, iggy.ErrInvalidToken) ||
		errors.Is(err, iggy.ErrInvalidUsername) || errors.Is(err, iggy.ErrInvalidPassword) ||
		errors.Is(err, iggy.ErrUserInactive)
}

func (b *Backend) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.cfg.RequestTimeout)
}

// ---- topic cache ----

// kickGap spaces refreshes asked for by misses.
const kickGap = 20 * time.Millisecond

// kickRefresh asks for a topic refresh soon.
func (b *Backend) kickRefresh() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

func (b *Backend) refreshLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		case <-b.kick:
			// Misses come in bursts (a client polling Metadata for a
			// topic that does not exist): at most one early refresh per
			// kickGap.
			select {
			case <-time.After(kickGap):
			case <-b.ctx.Done():
				return
			}
		}
		if err := b.SyncTopics(b.ctx); err != nil && b.ctx.Err() == nil {
			b.log.Debug("iggy topic refresh failed", "err", err)
		}
	}
}

// SyncTopics re-reads the topic list from Iggy unless a refresh that began
// after the call has ended meanwhile (concurrent callers share one).
// A listing of every topic calls it first: the cache is otherwise up to a
// RefreshInterval behind a topic created or deleted through another node,
// and `kafka-topics.sh --create` on one node followed by `--describe`,
// which the admin client may send to any node, failed with "does not
// exist" in a CI run.
func (b *Backend) SyncTopics(ctx context.Context) error {
	asked := time.Now()
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	if b.syncedFrom.After(asked) {
		return nil
	}
	began := time.Now()
	err := b.refresh(ctx)
	// A failed refresh counts too: while Iggy is unreachable, listings
	// queued behind one attempt answer from the cache instead of each
	// waiting out a timeout of its own.
	b.syncedFrom = began
	return err
}

// kafkaName accepts the names Kafka clients accept.
var kafkaName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// refresh re-reads the topics of the stream (creating it if missing) and
// of every mapped topic elsewhere, keeping cached partitions.
func (b *Backend) refresh(ctx context.Context) error {
	ctx, cancel := b.callCtx(ctx)
	defer cancel()
	listed := b.loads.Load()
	stream := iggy.NamedID(b.cfg.Stream)
	_, list, found, err := b.client.GetStream(ctx, stream)
	if err != nil {
		return err
	}
	if b.cfg.listedForTest != nil {
		b.cfg.listedForTest()
	}
	if !found {
		if b.streamSeen.Load() {
			b.mu.RLock()
			n := len(b.topics)
			b.mu.RUnlock()
			b.lost.Add(1)
			b.log.Error("iggy stream is gone: the Iggy server lost its data (restarted on an empty data directory?) "+
				"or the stream was deleted; its topics are dropped and their records are not served again", "stream", b.cfg.Stream, "topics", n)
		}
		if _, err := b.client.CreateStream(ctx, b.cfg.Stream); err != nil && !errors.Is(err, iggy.ErrStreamAlreadyExists) {
			return fmt.Errorf("create stream %q: %w", b.cfg.Stream, err)
		}
		b.log.Info("created iggy stream", "stream", b.cfg.Stream)
		list = nil
	}
	b.streamSeen.Store(true)
	type seen struct {
		stream string
		info   iggy.Topic
	}
	want := map[string]seen{} // by Kafka name
	for _, it := range list {
		name, ok := b.cfg.Topics.kafkaName(b.cfg.Stream, it.Name)
		if !ok {
			continue
		}
		if !kafkaName.MatchString(name) {
			continue
		}
		want[name] = seen{b.cfg.Stream, it}
	}
	for kname, o := range b.cfg.Topics.Topics {
		s := o.streamOr(b.cfg.Stream)
		if s == b.cfg.Stream {
			continue
		}
		td, found, err := b.client.GetTopic(ctx, iggy.NamedID(s), iggy.NamedID(o.topicOr(kname)))
		if err != nil && !errors.Is(err, iggy.ErrStreamNotFound) && !errors.Is(err, iggy.ErrTopicNotFound) {
			return err
		}
		if found {
			want[kname] = seen{s, td.Topic}
		}
	}

	b.mu.RLock()
	var stale []string
	for name, s := range want {
		t := b.topics[name]
		if t == nil || !b.sameTopic(t.info, s.info) || int(s.info.PartitionsCount) != len(t.parts) {
			stale = append(stale, name)
		}
	}
	b.mu.RUnlock()

	for _, name := range stale {
		s := want[name]
		if _, err := b.loadTopic(ctx, name, s.stream, s.info.Name); err != nil {
			return err
		}
	}
	b.mu.Lock()
	for name, t := range b.topics {
		// A topic read after the list (created here meanwhile) is not
		// gone: the list is older than it.
		if _, ok := want[name]; !ok && t.loaded <= listed {
			b.dropLocked(name)
		}
	}
	// Settings (expiry) may change without a partition change.
	for name, s := range want {
		if t := b.topics[name]; t != nil && t.iggyID == s.info.ID && t.loaded <= listed {
			t.info.MessageExpiry, t.info.MaxTopicSize, t.info.Compression = s.info.MessageExpiry, s.info.MaxTopicSize, s.info.Compression
		}
	}
	b.mu.Unlock()
	return nil
}

func (b *Backend) dropLocked(name string) {
	t := b.topics[name]
	if t == nil {
		return
	}
	delete(b.topics, name)
	if b.byID[t.id] == t {
		delete(b.byID, t.id)
	}
	for _, p := range t.parts {
		p.wake()
	}
}

// loadTopic reads one topic with its partitions and merges it into the
// cache, keeping the state of partitions that still exist.
func (b *Backend) loadTopic(ctx context.Context, kname, stream, iname string) (*topic, error) {
	td, found, err := b.client.GetTopic(ctx, iggy.NamedID(stream), iggy.NamedID(iname))
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !found {
		b.dropLocked(kname)
		return nil, nil
	}
	old := b.topics[kname]
	if old != nil && !b.sameTopic(old.info, td.Topic) {
		b.dropLocked(kname) // deleted and re-created: a new topic
		old = nil
	}
	t := &topic{name: kname, stream: stream, iggy: iname, iggyID: td.ID, info: td.Topic, loaded: b.loads.Add(1)}
	t.id = b.uuidOf(stream, td.Topic)
	ids := make([]uint32, len(td.Partitions))
	for i, p := range td.Partitions {
		ids[i] = p.ID
	}
	slices.Sort(ids)
	byID := map[uint32]iggy.PartitionInfo{}
	for _, p := range td.Partitions {
		byID[p.ID] = p
	}
	t.parts = make([]*partition, len(ids))
	for i, id := range ids {
		if old != nil && i < len(old.parts) && old.parts[i].iggyID == id {
			t.parts[i] = old.parts[i]
			t.parts[i].topic = t
		} else {
			t.parts[i] = newPartition(b, t, int32(i), id)
		}
		t.parts[i].observe(byID[id], b.now())
	}
	b.topics[kname] = t
	b.byID[t.id] = t
	return t, nil
}

// topicUUID derives the Kafka topic id from the Iggy topic's identity, so
// every node reports the same id and a re-created topic gets a new one.
func topicUUID(stream string, id uint32, createdAt uint64) [16]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d", stream, id, createdAt)
	var out [16]byte
	copy(out[:], h.Sum(nil))
	out[6] = out[6]&0x0f | 0x40
	out[8] = out[8]&0x3f | 0x80
	return out
}

func (b *Backend) lookup(name string) *topic {
	b.mu.RLock()
	t := b.topics[name]
	b.mu.RUnlock()
	if t == nil {
		t = b.lookupMiss(name)
	}
	return t
}

// missTTL is how long a name found missing in Iggy is not asked for again.
const missTTL = 250 * time.Millisecond

// lookupMiss asks Iggy for a topic the cache does not have: another node
// or an Iggy client may have just created it, and a client sent to this
// node by Metadata must not be told it does not exist. Misses are
// remembered briefly, so a client polling for a missing topic costs one
// Iggy request per missTTL.
func (b *Backend) lookupMiss(name string) *topic {
	if !kafkaName.MatchString(name) {
		return nil
	}
	b.missMu.Lock()
	if at, ok := b.misses[name]; ok && time.Since(at) < missTTL {
		b.missMu.Unlock()
		return nil
	}
	if len(b.misses) > 10000 {
		clear(b.misses)
	}
	b.misses[name] = time.Now()
	b.missMu.Unlock()
	stream, iname := b.cfg.Topics.where(b.cfg.Stream, name)
	if k, ok := b.cfg.Topics.kafkaName(stream, iname); !ok || k != name {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, min(b.cfg.RequestTimeout, time.Second))
	defer cancel()
	t, err := b.loadTopic(ctx, name, stream, iname)
	if err != nil || t == nil {
		return nil
	}
	b.missMu.Lock()
	delete(b.misses, name)
	b.missMu.Unlock()
	return t
}

func (b *Backend) part(name string, p int32) (*topic, *partition, error) {
	t := b.lookup(name)
	if t == nil || p < 0 || int(p) >= len(t.parts) {
		return nil, nil, errUnknownPartition
	}
	return t, t.parts[p], nil
}

// Topics lists every topic, sorted by name.
func (b *Backend) Topics() []gateway.TopicInfo {
	b.mu.RLock()
	out := make([]gateway.TopicInfo, 0, len(b.topics))
	for _, t := range b.topics {
		out = append(out, t.infoLocked())
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (t *topic) infoLocked() gateway.TopicInfo {
	cfg := map[string]string{}
	if e := t.info.MessageExpiry; e != 0 && e != math.MaxUint64 {
		cfg["retention.ms"] = strconv.FormatUint(e/1000, 10)
	}
	return gateway.TopicInfo{Name: t.name, ID: t.id, Partitions: int32(len(t.parts)), Configs: cfg}
}

// Topic returns one topic.
func (b *Backend) Topic(name string) (gateway.TopicInfo, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t := b.topics[name]
	if t == nil {
		b.mu.RUnlock()
		t = b.lookupMiss(name)
		b.mu.RLock()
		if t == nil {
			return gateway.TopicInfo{}, false
		}
	}
	return t.infoLocked(), true
}

// TopicName resolves a topic id.
func (b *Backend) TopicName(id [16]byte) (string, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t := b.byID[id]
	if t == nil {
		return "", false
	}
	return t.name, true
}

// PartitionLeader picks, by rendezvous hashing, one of the live nodes: each
// node computes the same answer from the same membership, and a node
// joining or leaving moves only the partitions it gains or loses.
func (b *Backend) PartitionLeader(name string, p int32) (int32, bool) {
	if _, _, err := b.part(name, p); err != nil {
		return -1, false
	}
	nodes, _ := b.cfg.Nodes.LiveNodes()
	return leaderOf(nodes, name, p), true
}

func leaderOf(nodes []cluster.NodeInfo, name string, p int32) int32 {
	best, bestScore := int32(-1), uint64(0)
	for _, n := range nodes {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%d\x00%d", name, p, n.ID)
		s := mix(h.Sum64())
		if best < 0 || s > bestScore || s == bestScore && n.ID < best {
			best, bestScore = n.ID, s
		}
	}
	return best
}

// mix is a 64-bit finaliser (splitmix64): FNV alone spreads short keys
// that differ in one digit poorly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// InitProducerID allocates a producer id through the FSM.
func (b *Backend) InitProducerID(ctx context.Context) (int64, int16, error) {
	return b.cfg.InitProducerID(ctx)
}
