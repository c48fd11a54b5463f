// Package cluster runs a kgate node's Raft member: the log and stable stores,
// the transport, bootstrap, leader tracking and proposals into the FSM.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/cluster/raftlog"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/internal/worktime"
)

// Config is what a node needs to join Raft.
type Config struct {
	NodeID       int32
	DataDir      string
	RaftAddr     string // advertised address of the Raft transport (what other nodes dial)
	RaftBindAddr string // listen address of the Raft transport; "" is RaftAddr
	KafkaAddr    string // advertised Kafka address of this node
	// Listeners names this node's Kafka listeners and their advertised
	// addresses (KafkaAddr's among them), when it has named ones.
	Listeners       map[string]string
	GossipAddr      string // advertised memberlist address; "" runs without gossip
	GossipBindAddr  string // memberlist listen address; "" is GossipAddr
	AdminAddr       string // advertised in gossip for operators
	Join            []string
	BootstrapExpect int
	// DeadNodeReapAfter is how long a failed node stays a voter.
	DeadNodeReapAfter   time.Duration
	RejoinInterval      time.Duration // how often the seed list is joined again
	GossipProbeInterval time.Duration
	// GossipKeys encrypt and authenticate gossip (AES-GCM, memberlist's
	// keyring; 16, 24 or 32 bytes each): the first encrypts, every one
	// decrypts. A node without a key of the ring cannot join. Nil: clear.
	GossipKeys [][]byte
	// LinkTLS secures the Raft port with mutual TLS (link_tls.go); nil: clear.
	LinkTLS   *LinkTLS
	transport transportFunc // nil: TCP
	// wrapStore, when set, wraps the Raft store (tests make writes fail).
	wrapStore func(logStable) logStable
	// pushBareMeta poses as a release from before pushState (tests): its
	// push-pulls carry the metadata alone, and as leader it removes a
	// leaving node only once gossip says it left.
	pushBareMeta bool
	// gossipTransport, when set, makes memberlist's transport (tests cut
	// gossip with it); nil: memberlist's own UDP and TCP.
	gossipTransport func(bindAddr string, bindPort int, logger *log.Logger) (memberlist.Transport, error)
	// MaxFeatureLevel caps the feature level this node reports it
	// supports (nil: fsm.LatestLevel), which holds the cluster below the
	// levels above it: tests pose as an older binary with it.
	MaxFeatureLevel  *fsm.Level
	Fsync            bool // fsync the Raft log on every commit (power-loss safety)
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	LeaderLease      time.Duration
	SnapshotEvery    uint64 // entries between snapshots
	TrailingLogs     uint64
	LogSegmentBytes  int64 // Raft log segment file size (0: raftlog's default)
	// RewritePinnedBytes bounds what the Raft log keeps past its
	// compaction for partitions' references: over it, the partitions
	// holding the oldest entries copy the batches they name when that is
	// at most half of what it frees (rewritePinned). 0: 1 GiB.
	RewritePinnedBytes int64
	// DigestEvery, when set, has the node log a checksum of the commands
	// it applied in each window of that many Raft indexes (applyDigest).
	DigestEvery uint64
	Logger      *slog.Logger
	// OnHalt runs once if the FSM meets an entry it cannot apply or a write
	// to the Raft store fails (after the node stopped serving); kgate serve
	// exits non-zero. Tests observe it.
	OnHalt func(error)
}

// ErrNotLeader is returned by Propose on a node that is not the leader.
var ErrNotLeader = errors.New("cluster: not the leader")

// NodeInfo is how clients reach a node.
type NodeInfo struct {
	ID        int32
	KafkaAddr string
	RaftAddr  string
	// Listeners: the advertised addresses of the node's named Kafka
	// listeners; nil when it has only KafkaAddr's, unnamed.
	Listeners map[string]string
}

// ListenerAddr is where clients of the named listener reach the node: ""
// names KafkaAddr's listener. ok is false when the node has no listener of
// that name.
func (i NodeInfo) ListenerAddr(name string) (string, bool) {
	if name == "" || i.Listeners == nil {
		return i.KafkaAddr, true
	}
	addr, ok := i.Listeners[name]
	return addr, ok
}

// Node is one Raft member.
type Node struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm.FSM
	raft  *raft.Raft
	store LogStore
	disk  *failStopStore // store, halting the node when a write fails
	snaps raft.SnapshotStore
	// snapStore is snaps' store of snapshots by reference.
	snapStore *refSnapshotStore
	trans     *raftTransport
	peers     *PeerListener // forwarded Kafka requests arriving on the Raft port

	metrics *metrics
	gossip  *gossip
	// linkNames is gossip for the Raft transport's dials, which may run
	// before Start has set gossip.
	linkNames atomic.Pointer[gossip]
	// savedPeers is the peers file as membershipLoop last read or wrote
	// it, for reviveFailedServers.
	savedPeers atomic.Pointer[[]savedPeer]
	leaving    atomic.Bool // Leave was called
	// removed: while leaving, nothing more to tell the leader (it said
	// this node is no longer a voter, or it is too old to say).
	removed  atomic.Bool
	notify   chan bool
	logBytes atomic.Int64          // Raft log bytes applied since the last snapshot
	observed chan raft.Observation // leader changes, for AwaitLeader
	votes    chan raft.Observation // vote requests, for hastenElections
	leaderMu sync.Mutex
	leaderCh chan struct{} // closed at the next leader observation
	// lastLeader and departed: see noteLeader (guarded by leaderMu).
	lastLeader raft.ServerID
	departed   map[int32]time.Time
	connClosed atomic.Int64 // unix nanos an inbound Raft connection last ended
	connEnded  chan struct{}
	startIndex uint64      // the last index of the Raft log at start (see knowsCommit)
	leader     atomic.Bool // this node leads and has caught up (barrier done)
	life       *lifecycle  // starts and stops the leader services
	mu         sync.Mutex
	watchers   []chan struct{}

	stop chan struct{}
	// raftStopped is closed once Shutdown has told Raft to stop (Raft's
	// own state may read otherwise: see untilRaftShutdown).
	raftStopped chan struct{}
	wg          sync.WaitGroup
	// rpcs: Raft RPCs this node sends outside Raft (see rpc); they end
	// at the transport's timeout or when Shutdown closes the transport.
	rpcs sync.WaitGroup

	// refusedOld: nodes reconcile has logged as too old to be voters (only
	// the voter reconcile service touches it).
	refusedOld map[int32]bool
	// refusedLink: nodes reconcile has logged as failing LinkTLS (same).
	refusedLink map[int32]bool
	// promoting: non-voters reconcile follows toward promotion. It and
	// the two maps above are reconcile's, under reconcileMu (tests run a
	// reconcile of their own beside the service's).
	promoting   map[int32]*catchUp
	reconcileMu sync.Mutex
	// behindChecks counts the checks that found a non-voter behind (tests).
	behindChecks atomic.Int64

	haltOnce sync.Once
	halted   chan struct{}         // closed when the node halted (Halted)
	haltErr  atomic.Pointer[error] // why, once halted
	// diskHalted is closed when the node halted on a failed write of its
	// Raft store (storageFailed): Raft's goroutine may then be held in
	// that write until Shutdown (failStopStore.SetUint64), so nothing may
	// wait for it to answer.
	diskHaltOnce sync.Once
	diskHalted   chan struct{}

	// logClusterID is the cluster id found in the local Raft log at start,
	// for gossip until the FSM has replayed the log (see clusterID).
	logClusterID string

	// leaderlessAt is when LeaderID first found no leader since it last
	// found one or an election was won (unix nanos; 0: a leader is known).
	leaderlessAt atomic.Int64
	// leaseTimeout is Raft's leader lease: a leader steps down when a
	// majority has not answered it for this long.
	leaseTimeout time.Duration
	// cutOff: this node stopped leading with a majority no longer
	// answering it, and no leader was known since. See CutOff.
	cutOff atomic.Bool
}

// Start opens the stores, starts Raft and, on a node without Raft state and
// with BootstrapExpect <= 1, bootstraps a single-voter cluster.
func Start(cfg Config, f *fsm.FSM) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{cfg: cfg, log: cfg.Logger, fsm: f, metrics: newMetrics(), notify: make(chan bool, 16), stop: make(chan struct{}), raftStopped: make(chan struct{}), halted: make(chan struct{}), diskHalted: make(chan struct{}),
		refusedOld: map[int32]bool{}, refusedLink: map[int32]bool{}, promoting: map[int32]*catchUp{}, connEnded: make(chan struct{}, 1)}
	n.life = &lifecycle{log: n.log, establish: n.establish, serving: n.setLeader, restartDelay: time.Second}
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// References: partitions may name batches in the log's entries
	// (fsm.Options.References), so compaction keeps what they name.
	store, err := openLogStore(cfg.DataDir, raftlog.Options{Fsync: cfg.Fsync, SegmentSize: cfg.LogSegmentBytes, Logger: n.log, References: true})
	if err != nil {
		return nil, fmt.Errorf("raft store: %w", err)
	}
	n.store = store
	var ls logStable = store
	if cfg.wrapStore != nil {
		ls = cfg.wrapStore(store)
	}
	n.disk = &failStopStore{logStable: ls, failed: n.storageFailed, untilShutdown: n.untilRaftShutdown}
	if err := removeUnfinishedSnapshots(dir, n.log); err != nil {
		store.Close()
		return nil, fmt.Errorf("raft snapshots: %w", err)
	}
	if err := removeStagedLinks(dir, n.log); err != nil {
		store.Close()
		return nil, fmt.Errorf("raft snapshots: %w", err)
	}
	hlog := hclogFor(n.log, "raft")
	files, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("raft snapshots: %w", err)
	}
	snaps := &refSnapshotStore{FileSnapshotStore: files, raftDir: dir, res: logRefs{store}}
	n.snapStore = snaps
	f.SetResolver(logRefs{store})
	if err := n.keepReferenced(); err != nil {
		store.Close()
		return nil, fmt.Errorf("raft log: %w", err)
	}
	n.snaps = &failStopSnapshots{SnapshotStore: snaps, failed: n.storageFailed, installed: store.NoteInstall}
	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("raft advertise address: %w", err)
	}
	bind := cfg.RaftBindAddr
	if bind == "" {
		bind = cfg.RaftAddr
	}
	var trans *raftTransport
	if cfg.transport != nil {
		trans, err = cfg.transport(bind, addr, hlog, n.noteConnClosed)
	} else {
		trans, n.peers, err = tcpTransport(bind, addr, hlog, n.noteConnClosed, cfg.LinkTLS, n.nodeAt)
	}
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("raft transport on %s (advertised as %s): %w", bind, cfg.RaftAddr, err)
	}
	n.trans = trans
	trans.snapshotIdle.Store(int64(snapshotIdleFor(n.heartbeatTimeout())))
	var disk raft.LogStore = n.disk
	trans.logs.Store(&disk)
	logs := newLogCache(n.disk, cacheEntries, cacheBytes)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.Logger = hlog
	rc.NotifyCh = n.notify
	// A proposal is queued, not handed over: with Raft's unbuffered apply
	// channel, ProposeAsync waited until the leader loop had written and
	// synced the previous batch, so a connection's produce requests
	// reached the log one fsync at a time, each alone in its batch. Queued
	// (up to MaxAppendEntries), the requests that arrive while the log is
	// being written go into the next batch together, under one fsync, and
	// the connection reads its next request meanwhile. A queued proposal
	// on a node that loses leadership is answered ErrNotLeader, as before.
	rc.BatchApplyCh = true
	// A follower that fell behind while Raft kept pipelining to it (one
	// paused or frozen: no append failed) is caught up by one append of at
	// most MaxAppendEntries (64) per new proposal or per CommitTimeout tick
	// (a random 1-2x), whichever comes first; with no new proposal, 64
	// entries each 50-100 ms: 870 entries a second, measured in one
	// process. At 10 ms: 4,060 a second; the cost is an empty append per
	// follower each 10-20 ms when idle (three idle nodes: 1.9-2.1 s of CPU
	// in 20 s instead of 1.25).
	rc.CommitTimeout = 10 * time.Millisecond
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLease > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLease
	} else {
		// The whole heartbeat timeout (Raft's upper bound): a leader
		// steps down when a majority has not answered it for this long.
		// Half of it (250 ms by default) made leaders step down with no
		// fault at all whenever their process was starved that long (a
		// loaded machine, a GC pause): an election and client retries
		// for nothing. A leader so starved that the followers' own
		// heartbeat timeout passes is replaced anyway; one cut off from
		// the others cannot commit either way, and names itself only
		// after VerifyLeader (ConfirmLeader).
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
	}
	n.leaseTimeout = rc.LeaderLeaseTimeout
	if cfg.SnapshotEvery > 0 {
		rc.SnapshotThreshold = cfg.SnapshotEvery
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}

	if err := recoverFromPeersFile(dir, rc, &raftFSM{f: f}, logs, n.disk, snaps, trans, n.log); err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	hasState, err := raft.HasExistingState(logs, n.disk, snaps)
	if err != nil {
		return nil, err
	}
	if err := emptyLogBehindSnapshot(store, snaps, n.log); err != nil {
		trans.Close()
		store.Close()
		return nil, fmt.Errorf("raft log: %w", err)
	}
	if err := n.saveTermAgain(); err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	rf := &raftFSM{f: f, m: n.metrics, logBytes: &n.logBytes, halted: n.halt, storageFailed: n.storageFailed, snaps: snaps, log: n.log,
		digest: &applyDigest{every: cfg.DigestEvery, log: n.log}}
	if !cfg.Fsync {
		rf.syncLog = store.Sync
	}
	r, err := raft.NewRaft(rc, rf, logs, n.disk, n.snaps, pipelineSafe{trans})
	if err != nil {
		trans.Close()
		store.Close()
		return nil, fmt.Errorf("raft: %w", err)
	}
	n.raft = r
	sameTermFollower := func(term uint64) bool { return r.State() == raft.Follower && r.CurrentTerm() == term }
	trans.sameTermFollower.Store(&sameTermFollower)
	stopping := (<-chan struct{})(n.stop)
	trans.stopping.Store(&stopping)
	n.startIndex = r.LastIndex()
	if f.ClusterID() == "" {
		n.logClusterID = clusterIDInLog(store)
	}
	if !hasState && cfg.BootstrapExpect <= 1 && len(cfg.Join) == 0 {
		boot := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: trans.LocalAddr(), Suffrage: raft.Voter}}}
		if err := r.BootstrapCluster(boot).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.Shutdown()
			return nil, fmt.Errorf("raft bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a new single-voter cluster", "node_id", cfg.NodeID)
	}
	n.disk.armed.Store(true)
	if cfg.GossipAddr != "" {
		if n.gossip, err = startGossip(n); err != nil {
			n.Shutdown()
			return nil, err
		}
		n.linkNames.Store(n.gossip)
		n.gossip.join(cfg.Join)
		n.wg.Add(2)
		go n.membershipLoop()
		go n.reviveFailedServers()
		n.RunWhileLeader("voter reconcile", n.reconcileVoters)
	}
	n.RunWhileLeader("feature level", n.raiseFeatureLevel)
	n.observed = make(chan raft.Observation, 16)
	n.leaderCh = make(chan struct{})
	r.RegisterObserver(raft.NewObserver(n.observed, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	n.votes = make(chan raft.Observation, 16)
	r.RegisterObserver(raft.NewObserver(n.votes, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.RequestVoteRequest)
		return ok
	}))
	n.wg.Add(5)
	go func() {
		defer n.wg.Done()
		n.life.run(n.notify, n.stop)
	}()
	go n.watchLeaders()
	go n.snapshotBySize()
	go n.hastenElections()
	go n.keepReferencedLoop()
	return n, nil
}

// keepReferenced tells the Raft log which compacted entries references
// may still name: those from the lowest index a partition or a snapshot
// refers to.
func (n *Node) keepReferenced() error {
	// The FSM first: a snapshot taken after this read is held before any
	// entry that could drop its partitions' references is applied.
	pin := n.fsm.Pin()
	if sp, err := n.snapStore.pin(); err != nil {
		return err
	} else if sp != 0 && sp < pin {
		pin = sp
	}
	return n.store.SetPin(pin)
}

// keepReferencedLoop lets the Raft log drop compacted entries as
// retention, deletions, rewrites and snapshots release them.
func (n *Node) keepReferencedLoop() {
	defer n.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // ends a rewrite when the node stops
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if err := n.keepReferenced(); err != nil {
			n.log.Warn("raft log: keeping referenced entries", "err", err)
			continue
		}
		if err := n.rewritePinned(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("raft log: copying referenced batches into their partitions", "err", err)
		}
	}
}

// rewritePinned bounds the Raft log kept for references. One partition
// kept long (a topic with a long retention) pins every later file,
// however short the rest are kept; once that passes RewritePinnedBytes,
// the partitions copy the batches they name in the kept files into their
// own (fsm.RewriteReferences) and the pin moves to the log's compaction
// point (snapshots that still name them hold it until they are replaced).
// It copies only when the copy is at most half of what is kept: where
// most of it is referenced (every topic kept alike), copying would write
// it twice to free little.
func (n *Node) rewritePinned(ctx context.Context) error {
	limit := n.cfg.RewritePinnedBytes
	if limit <= 0 {
		limit = 1 << 30
	}
	pinned := n.store.RetainedBytes()
	if pinned <= limit {
		return nil
	}
	first, err := n.store.FirstIndex()
	if err != nil {
		return err
	}
	refd := n.fsm.ReferencedBelow(first)
	if refd == 0 || refd*2 > pinned {
		return nil
	}
	written, err := n.fsm.RewriteReferences(ctx, first)
	n.metrics.rewrittenBytes.Add(float64(written))
	if err != nil {
		return err
	}
	n.log.Info("raft log: copied referenced batches into their partitions", "kept_bytes", pinned,
		"referenced_bytes", refd, "written_bytes", written, "below_index", first)
	return n.keepReferenced()
}

// emptyLogBehindSnapshot finishes an install that a crash cut short.
// hashicorp/raft empties the log (it says it has no gaps) once a snapshot
// from the leader is restored; a node stopped in between finds on disk a
// snapshot newer than its whole log. Raft then counts from the snapshot,
// and the leader's next append, right after it, would meet a log that ends
// before it, which takes no gap: the node would halt. Every entry of such
// a log is covered by the snapshot.
func emptyLogBehindSnapshot(store LogStore, snaps raft.SnapshotStore, log *slog.Logger) error {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return err
	}
	snap := list[0].Index // newest first
	first, err := store.FirstIndex()
	if err != nil {
		return err
	}
	last, err := store.LastIndex()
	if err != nil {
		return err
	}
	if last == 0 || last >= snap {
		return nil
	}
	log.Warn("raft log: it ends before the newest snapshot (an install was cut short); emptying it as the install would have",
		"first", first, "last", last, "snapshot_index", snap)
	return store.DeleteRange(first, last)
}

// saveTermAgain writes the stored current term back, as raft.NewRaft is
// about to: NewRaft panics when that write fails, and on a disk that is
// still full (a restart that only cut an unfinished write off the Raft log
// freed no block) the process died in the panic. Here the failure is an
// error that names the full disk, as a halt does.
func (n *Node) saveTermAgain() error {
	term, err := n.disk.GetUint64([]byte(keyCurrentTerm))
	if err != nil {
		return nil // none yet: a new node, whose first write is Raft's own
	}
	if err := n.disk.SetUint64([]byte(keyCurrentTerm), term); err != nil {
		n.logIfDiskFull(err)
		return &StorageError{Op: "set " + keyCurrentTerm, Err: err}
	}
	return nil
}

// minSnapshotBytes is the least log growth that triggers a snapshot by size.
const minSnapshotBytes = 256 << 20

// snapshotBySize takes a snapshot once the Raft log has grown by
// minSnapshotBytes. Raft's own trigger counts entries, and entries here are
// batches of up to megabytes: by count alone the log could hold gigabytes
// before it is compacted. A snapshot links the segment files and writes
// only metadata (snapstore.go), so taking one often costs little. Only
// while snapshots must copy the data (a data directory that cannot link)
// does the log grow by as much as the data first, so that each byte is
// copied into snapshots about once more rather than again and again.
func (n *Node) snapshotBySize() {
	defer n.wg.Done()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		grown := n.logBytes.Load()
		limit := int64(minSnapshotBytes)
		if n.snapStore.copying.Load() {
			limit = max(limit, n.fsm.DataBytes())
		}
		if grown < limit {
			continue
		}
		if err := n.raft.Snapshot().Error(); err != nil {
			n.log.Debug("snapshot by size", "err", err)
			continue
		}
		n.logBytes.Add(-grown)
		n.log.Info("snapshot taken: the log grew past its limit", "log_bytes", grown, "limit", limit)
	}
}

// watchLeaders wakes AwaitLeader callers whenever Raft names a leader.
func (n *Node) watchLeaders() {
	defer n.wg.Done()
	var last raft.ServerID
	for {
		select {
		case <-n.stop:
			return
		case o := <-n.observed:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				if lo.LeaderID != "" {
					n.leaderlessAt.Store(0) // an election was won
					n.cutOff.Store(false)
				} else if last == raft.ServerID(strconv.Itoa(int(n.cfg.NodeID))) {
					n.noteSteppedDown()
				}
				if lo.LeaderID != "" && lo.LeaderID != last {
					if last != "" {
						n.metrics.leaderChanges.Inc()
					}
					last = lo.LeaderID
				}
				n.noteLeader(lo.LeaderID)
			}
			n.leaderMu.Lock()
			close(n.leaderCh)
			n.leaderCh = make(chan struct{})
			n.leaderMu.Unlock()
		}
	}
}

// AwaitLeader returns the leader's node id, waiting while an election runs
// (bounded by ctx). Answering a client during the election with "no
// leader" sends it into retries that some clients give up on; a short wait
// gives it the new leader instead.
func (n *Node) AwaitLeader(ctx context.Context) (int32, bool) {
	recheck := time.NewTicker(100 * time.Millisecond) // contact may come back without an observation
	defer recheck.Stop()
	for {
		n.leaderMu.Lock()
		ch := n.leaderCh
		n.leaderMu.Unlock()
		if id, ok := n.LeaderID(); ok {
			return id, true
		}
		select {
		case <-ch:
		case <-recheck.C:
		case <-ctx.Done():
			return 0, false
		case <-n.stop:
			return 0, false
		}
	}
}

// recoverFromPeersFile is the manual way out of a lost majority: an
// operator writes raft/peers.json (hashicorp/raft's format: a list of
// {"id", "address", "non_voter"}) naming the surviving nodes, and the node
// rewrites its Raft configuration to exactly that before starting.
func recoverFromPeersFile(dir string, rc *raft.Config, fsm raft.FSM, logs raft.LogStore, stable raft.StableStore,
	snaps raft.SnapshotStore, trans raft.Transport, log *slog.Logger) error {
	path := filepath.Join(dir, "peers.json")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return fmt.Errorf("recovery file %s: %w", path, err)
	}
	if err := raft.RecoverCluster(rc, fsm, logs, stable, snaps, trans, conf); err != nil {
		return fmt.Errorf("recover cluster from %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	log.Warn("Raft configuration recovered from peers.json; removed the file", "voters", len(conf.Servers))
	return nil
}

// transportFunc makes the Raft transport: by default TCP with watched
// inbound Raft connections (tcpTransport); tests use one whose network
// they can cut (Config.transport).
type transportFunc func(bind string, advertise net.Addr, log hclog.Logger, connClosed func()) (*raftTransport, error)

// clusterID is the FSM's cluster id or, until a restarted node has replayed
// its log (which waits for a leader), the one its Raft log records. Gossip
// presents and checks it from the start, so a node with another cluster's
// data is refused before the leader could add it as a voter.
func (n *Node) clusterID() string {
	if id := n.fsm.ClusterID(); id != "" {
		return id
	}
	return n.logClusterID
}

// clusterIDInLog returns the id of the first InitCluster command among the
// first entries of the log, or "". A log without a snapshot starts at index
// 1 and the first leader proposes InitCluster right after its election; a
// node with a snapshot has the id in its FSM already.
func clusterIDInLog(logs raft.LogStore) string {
	first, err := logs.FirstIndex()
	if err != nil || first == 0 {
		return ""
	}
	last, err := logs.LastIndex()
	if err != nil {
		return ""
	}
	for i := first; i <= last && i < first+64; i++ {
		var l raft.Log
		if logs.GetLog(i, &l) != nil || l.Type != raft.LogCommand {
			continue
		}
		if c, err := fsm.Decode(l.Data); err == nil {
			if ic, ok := c.(*fsm.InitCluster); ok {
				return ic.ClusterID
			}
		}
	}
	return ""
}

// hasRaftState reports whether this node has ever been part of a cluster.
func (n *Node) hasRaftState() bool { return n.raft.LastIndex() > 0 }

// establish readies a term of leadership: Barrier, so the FSM has applied
// every entry earlier terms committed, then the cluster id on a new
// cluster. It gives up (false) once leadership is lost.
func (n *Node) establish(ctx context.Context) bool {
	for ctx.Err() == nil {
		err := n.await(ctx, n.raft.Barrier(30*time.Second))
		if err == nil {
			break
		}
		n.log.Warn("barrier after election failed", "err", err)
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
			return false
		}
	}
	if ctx.Err() != nil {
		return false
	}
	if n.fsm.ClusterID() == "" {
		var b [16]byte
		rand.Read(b[:])
		if _, err := n.Propose(ctx, fsm.Encode(&fsm.InitCluster{ClusterID: hex.EncodeToString(b[:])}), true); err != nil {
			n.log.Warn("init cluster id", "err", err)
		}
	}
	if n.raft.State() != raft.Leader {
		return false // lost meanwhile; NotifyCh ends the term
	}
	n.log.Info("serving as leader", "node_id", n.cfg.NodeID, "cluster_id", n.fsm.ClusterID())
	return true
}

// await waits for a Raft future, or until ctx ends or the node stops:
// Raft leaves a future it had queued unanswered once it shuts down, and
// Shutdown waits for the leader services that wait on it. The waiting
// goroutine then outlives the call, blocked on a future of a Raft that is
// gone.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	defer worktime.Wait(ctx)()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stop:
		return raft.ErrRaftShutdown
	}
}

func (n *Node) setLeader(v bool) {
	if n.leader.Swap(v) == v {
		return
	}
	n.mu.Lock()
	ws := n.watchers
	n.watchers = nil
	n.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
}

// IsLeader reports whether this node leads and has applied the whole log.
func (n *Node) IsLeader() bool { return n.leader.Load() && n.HaltErr() == nil }

// RaftLeader reports whether Raft considers this node the leader, which may
// be before IsLeader (the FSM still catching up).
func (n *Node) RaftLeader() bool { return n.raft.State() == raft.Leader }

// LeaderChanged returns a channel closed at the next change of IsLeader.
func (n *Node) LeaderChanged() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := make(chan struct{})
	n.watchers = append(n.watchers, ch)
	return ch
}

// WaitLeader blocks until this node is the serving leader or ctx ends.
func (n *Node) WaitLeader(ctx context.Context) error {
	defer worktime.Wait(ctx)()
	for {
		ch := n.LeaderChanged()
		if n.IsLeader() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// LeaderID returns the current leader's node id, if one is known. A
// follower that is not in contact with its leader (see inContact) reports
// none: pointing clients at a leader that has just died would send
// them into connection-refused retries instead of a clean, retriable
// COORDINATOR_NOT_AVAILABLE / LEADER_NOT_AVAILABLE while the election runs.
func (n *Node) LeaderID() (int32, bool) {
	id, ok := n.leaderID()
	if ok {
		n.leaderlessAt.Store(0)
	} else {
		n.leaderlessAt.CompareAndSwap(0, time.Now().UnixNano())
	}
	return id, ok
}

// LeaderlessFor is how long this node has known no leader (0 while it
// knows one). An election ends within a few election timeouts; a node
// that stays leaderless much longer is most likely cut off from the
// majority, which has a leader it cannot name.
func (n *Node) LeaderlessFor() time.Duration {
	if _, ok := n.LeaderID(); ok {
		return 0
	}
	at := n.leaderlessAt.Load()
	if at == 0 {
		return 0
	}
	return time.Since(time.Unix(0, at))
}

func (n *Node) leaderID() (int32, bool) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return 0, false
	}
	v, err := strconv.Atoi(string(id))
	if err != nil {
		return 0, false
	}
	if int32(v) == n.lostLeader() {
		return 0, false
	}
	return int32(v), true
}

func (n *Node) heartbeatTimeout() time.Duration {
	if n.cfg.HeartbeatTimeout > 0 {
		return n.cfg.HeartbeatTimeout
	}
	return time.Second
}

// maxLevel is the highest feature level this node reports it supports.
func (n *Node) maxLevel() fsm.Level {
	if n.cfg.MaxFeatureLevel != nil {
		return *n.cfg.MaxFeatureLevel
	}
	return fsm.LatestLevel
}

// Self describes this node.
func (n *Node) Self() NodeInfo {
	return NodeInfo{ID: n.cfg.NodeID, KafkaAddr: n.cfg.KafkaAddr, RaftAddr: n.cfg.RaftAddr, Listeners: n.cfg.Listeners}
}

// ClusterID is the replicated cluster id ("" until the first leader set it).
func (n *Node) ClusterID() string { return n.fsm.ClusterID() }

// Brokers lists the nodes clients may use, as Kafka's Metadata lists every
// broker its controller has not fenced: this node, every node gossip sees
// alive (or merely suspected) and the leader in contact, by node id; then,
// last, the voters that look gone but have not been for fenceAfter (see
// unfenced).
func (n *Node) Brokers() []NodeInfo {
	out := []NodeInfo{n.Self()}
	if n.gossip == nil {
		return out
	}
	lost := n.lostLeader()
	// The leader this node is in Raft contact with is listed even while
	// gossip still holds it failed (a leader elected just after a
	// partition healed, before gossip called it alive again): clients
	// must be able to reach the coordinator.
	leader, inContact := n.leaderID()
	members := n.gossip.snapshot()
	isVoter := map[int32]bool{}
	for _, v := range n.Voters() {
		isVoter[v.ID] = true
	}
	var unfenced []NodeInfo
	for _, m := range members {
		if m.meta.ID == n.cfg.NodeID {
			continue
		}
		switch {
		case m.meta.ID == lost || n.departedHidden(m) || !alive(m.state) && (!inContact || m.meta.ID != leader):
			if n.unfenced(m, isVoter) {
				unfenced = append(unfenced, m.info())
			}
		default:
			out = append(out, m.info())
		}
	}
	sortNodes(out)
	sortNodes(unfenced)
	out = append(out, unfenced...)
	return atLeastAMajority(out, members, isVoter, lost)
}

// info is the member as a NodeInfo.
func (m member) info() NodeInfo {
	return NodeInfo{ID: m.meta.ID, KafkaAddr: m.meta.KafkaAddr, RaftAddr: m.meta.RaftAddr, Listeners: m.meta.Listeners}
}

// fenceAfter is how long a voter that gossip holds failed stays among the
// brokers. Kafka lists a broker until its controller fences it, 9 s
// (broker.session.timeout.ms) after its last heartbeat; gossip calls a
// silent node failed about 2 s after its last word, so a voter leaves
// about as long after it went silent as a Kafka broker does.
const fenceAfter = 7 * time.Second

// unfenced reports whether gossip member m, which looks gone (failed, or a
// leader that lost contact or was replaced), stays listed: a voter that
// did not leave, until gossip has held it failed for fenceAfter. A client
// takes each Metadata answer as its whole broker list and keeps it until
// its next refresh, which nothing may bring about for minutes (the Java
// client's metadata.max.age.ms): an answer given while a node was cut off
// that left that node out strands the client once the nodes it does know
// go (seed 1796468115103236564, faults 4-6 of the fault campaign: a Java
// member that knew only a departed node and the next cut-off leader). A
// dead node listed costs a client a refused connection, as with Kafka.
func (n *Node) unfenced(m member, isVoter map[int32]bool) bool {
	if !isVoter[m.meta.ID] || m.meta.Leaving || m.state == memberlist.StateLeft || m.meta.KafkaAddr == "" {
		return false
	}
	return alive(m.state) || time.Since(m.since) < fenceAfter
}

// majority is how many of that many voters make a quorum.
func majority(voters int) int { return voters/2 + 1 }

// atLeastAMajority adds to brokers, while they are fewer than a majority
// of the Raft voters (isVoter), the voters among members (gossip's) that gossip
// holds failed (the lost leader last). Clients replace their broker list with each Metadata answer (the
// Java client until its next refresh, minutes away; franz-go until an
// error sends it back to its seeds): an answer naming this node alone,
// as a node gossip has cut off from the others gives, strands a client
// once this node goes, with nothing but seeds that may have left long
// ago. Kafka lists every broker until its controller fences it.
func atLeastAMajority(brokers []NodeInfo, members []member, isVoter map[int32]bool, lost int32) []NodeInfo {
	need := majority(len(isVoter))
	if len(brokers) >= need {
		return brokers
	}
	listed := map[int32]bool{}
	for _, b := range brokers {
		listed[b.ID] = true
	}
	for _, pass := range []bool{false, true} { // the lost leader only in the second pass
		for _, m := range members {
			if len(brokers) >= need {
				return brokers
			}
			if !isVoter[m.meta.ID] || listed[m.meta.ID] || (m.meta.ID == lost) != pass || m.meta.KafkaAddr == "" {
				continue
			}
			listed[m.meta.ID] = true
			brokers = append(brokers, m.info())
		}
	}
	return brokers
}

// LiveNodes lists this node and every node gossip sees alive, by node id,
// with a version that changes whenever that set changes. Unlike Brokers it
// leaves nothing out for failover's sake (a lost or replaced leader stays
// until gossip says it is gone): every node derives it from the same gossip
// events, so work spread over it, such as the Iggy backend's partition
// leaders, is agreed on by all nodes but for the moments an event takes to
// spread.
func (n *Node) LiveNodes() ([]NodeInfo, uint64) {
	out := []NodeInfo{n.Self()}
	if n.gossip == nil {
		return out, 0
	}
	live, version := n.gossip.live()
	for _, m := range live {
		if m.meta.ID != n.cfg.NodeID {
			out = append(out, m.info())
		}
	}
	sortNodes(out)
	return out, version
}

// lostLeader is the id of the leader this follower is not in contact with
// (see inContact), or -1. Raft notices a dead leader within a second,
// gossip only after its suspicion timeout; until then Metadata would keep
// listing the dead node and clients would keep dialling it.
func (n *Node) lostLeader() int32 {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return -1
	}
	v, err := strconv.Atoi(string(id))
	if err != nil || int32(v) == n.cfg.NodeID || n.inContact() {
		return -1
	}
	return int32(v)
}

// Future is a proposal in flight.
type Future struct {
	f       raft.ApplyFuture
	err     error // refused before it was proposed
	began   time.Time
	latency prometheus.Histogram
}

// Result waits for the proposal to be applied and returns the FSM's result.
func (f Future) Result() (any, error) {
	if f.err != nil {
		return nil, f.err
	}
	err := f.f.Error()
	if f.latency != nil && err == nil {
		f.latency.Observe(time.Since(f.began).Seconds())
	}
	if err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return nil, err
	}
	resp := f.f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// ProposeAsync enqueues a command. Calls from one goroutine are applied in
// call order, which keeps a connection's pipelined produces in sequence.
func (n *Node) ProposeAsync(data []byte) Future {
	entry, err := n.admit(data)
	if err != nil {
		return Future{err: err}
	}
	return Future{f: n.raft.Apply(entry, 10*time.Second), began: time.Now(), latency: n.metrics.applyDuration}
}

// admit refuses a proposal on a halted node and one the cluster's feature
// level does not allow yet (fsm.ErrFeatureDisabled), and returns the entry
// to propose.
func (n *Node) admit(data []byte) ([]byte, error) {
	if h := n.HaltErr(); h != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotLeader, h)
	}
	return n.fsm.Admit(data)
}

// Propose applies a command and waits for its result. Unless force is set,
// it refuses on a node that is not the serving leader.
func (n *Node) Propose(ctx context.Context, data []byte, force bool) (any, error) {
	if !force && !n.IsLeader() {
		return nil, ErrNotLeader
	}
	entry, err := n.admit(data)
	if err != nil {
		return nil, err
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	fut := Future{f: n.raft.Apply(entry, timeout), began: time.Now(), latency: n.metrics.applyDuration}
	// Waiting ends with the node too (see await); the outcome is then
	// unknown to the caller, as after a timeout.
	if err := n.await(context.Background(), fut.f); errors.Is(err, raft.ErrRaftShutdown) {
		return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return fut.Result()
}

// StepDown hands leadership to an up-to-date follower if this node leads,
// so that a planned stop costs clients no election.
func (n *Node) StepDown() {
	if n.raft.State() == raft.Leader {
		n.transferLeadership()
	}
}

// halt stops this node from serving: its FSM met an entry it cannot apply
// (fsm.HaltError), so its state is no longer the cluster's. Called on
// Raft's FSM goroutine, so the slow part runs elsewhere: a leader hands
// leadership over, then Config.OnHalt runs (the process exits there).
func (n *Node) halt(h *fsm.HaltError) {
	n.haltWith(h, func() {
		n.log.Error("stopping: this node cannot apply the replicated log and refuses to serve",
			"index", h.Index, "command", h.Command, "err", h.Err)
	})
}

// storageFailed halts the node on a failed write to its Raft store (see
// failStopStore). Called on Raft's goroutines.
func (n *Node) storageFailed(e *StorageError) {
	n.diskHaltOnce.Do(func() { close(n.diskHalted) })
	n.haltWith(e, func() {
		n.log.Error("stopping: this node cannot write to its data directory and refuses to serve", "err", e)
	})
}

// haltWith stops the node for err once; logged runs first, then a line
// naming the disk when it is full, as that is the operator's to fix.
func (n *Node) haltWith(err error, logged func()) {
	n.haltOnce.Do(func() {
		logged()
		n.logIfDiskFull(err)
		n.haltErr.Store(&err)
		close(n.halted)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if n.raft != nil && n.raft.State() == raft.Leader {
				n.transferLeadership()
			}
			if n.cfg.OnHalt != nil {
				n.cfg.OnHalt(err)
			}
		}()
	})
}

// logIfDiskFull names the full disk when err comes from one: the
// operator's to fix.
func (n *Node) logIfDiskFull(err error) {
	if DiskFull(err) {
		n.log.Error("the disk of the data directory is full: free space on it, then restart kgate; "+
			"the node resumes from its last checkpoint and catches up from the others",
			"data_dir", n.cfg.DataDir)
	}
}

// untilRaftShutdown blocks until Shutdown has told Raft to stop. It does
// not poll Raft's state for Shutdown: Raft's goroutine may have set it
// back (appendEntries sets Follower before it saves the new term, and an
// RPC handled as Shutdown began overwrote Shutdown), and then this waited
// forever on the very goroutine Raft's shutdown waits for (seen: a test's
// Shutdown of a node whose disk was full hung for ten minutes).
func (n *Node) untilRaftShutdown() {
	<-n.raftStopped
}

// Halted is closed once this node has stopped applying the log or writing
// its Raft store (see HaltErr); it then answers no request as leader and
// is not ready.
func (n *Node) Halted() <-chan struct{} { return n.halted }

// HaltErr is why the node halted (a *fsm.HaltError or a *StorageError),
// or nil.
func (n *Node) HaltErr() error {
	if p := n.haltErr.Load(); p != nil {
		return *p
	}
	if h := n.fsm.Halted(); h != nil {
		return h
	}
	return nil
}

// Shutdown stops Raft and closes the stores.
func (n *Node) Shutdown() error {
	select {
	case <-n.stop:
		return nil
	default:
	}
	close(n.stop)
	if n.raft.State() == raft.Leader {
		n.transferLeadership()
	}
	stopping := n.raft.Shutdown()
	close(n.raftStopped)
	err := stopping.Error()
	n.wg.Wait()
	n.setLeader(false)
	if n.gossip != nil {
		n.gossip.shutdown(false)
	}
	n.trans.Close()
	n.rpcs.Wait()
	n.store.Close()
	return err
}

// raftFSM adapts fsm.FSM to raft.FSM.
type raftFSM struct {
	f        *fsm.FSM
	m        *metrics
	logBytes *atomic.Int64        // bytes applied since the last snapshot, when counted
	halted   func(*fsm.HaltError) // called on the first entry the FSM cannot apply
	// storageFailed is called when a snapshot cannot be persisted.
	storageFailed func(*StorageError)
	// snaps, when set, keeps snapshots by reference to hard links of the
	// segment files (snapstore.go); without it they are written in full.
	snaps  *refSnapshotStore
	log    *slog.Logger
	digest *applyDigest // nil: none
	// syncLog flushes the Raft log before a checkpoint names references
	// to its entries (nil: every entry is synced as written, --fsync).
	syncLog func() error
}

func (a *raftFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	a.digest.add(l)
	if a.logBytes != nil {
		a.logBytes.Add(int64(len(l.Data)))
	}
	skipped := l.Index <= a.f.Applied()
	res := a.f.Apply(l.Index, l.Data)
	a.digest.outcome(res, skipped)
	if h, ok := res.(*fsm.HaltError); ok && a.halted != nil {
		a.halted(h)
	}
	return res
}

func (a *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := a.f.Snapshot()
	if err != nil {
		return nil, err
	}
	rs := &raftSnapshot{f: a.f, s: s, m: a.m, failed: a.storageFailed, pin: s.FirstRef(), unhold: func() {}}
	if rs.pin != 0 {
		rs.syncLog = a.syncLog
	}
	if a.snaps != nil {
		// The entries its references name stay until Raft releases it,
		// and then while it is on disk (refSnapshotStore.pin).
		rs.unhold = a.snaps.hold(rs.pin)
		// Linked here, on the FSM goroutine: the next applied entry may
		// delete a segment file (retention, topic deletion).
		links, err := linkFiles(a.snaps.raftDir, s.Files())
		if err != nil {
			// A data directory spread over file systems cannot link:
			// the snapshot copies the data instead, as it always could.
			a.log.Warn("snapshot: cannot link the segment files; copying them into the snapshot", "err", err)
		} else {
			rs.links, rs.store = links, a.snaps
		}
		a.snaps.copying.Store(err != nil)
	}
	return rs, nil
}

func (a *raftFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	a.digest.restart()
	err := a.f.Restore(r)
	if h, ok := err.(*fsm.HaltError); ok && a.halted != nil {
		a.halted(h) // a restore that failed halfway (see fsm.Restore)
	}
	return err
}

type raftSnapshot struct {
	f      *fsm.FSM
	s      *fsm.Snapshot
	m      *metrics
	failed func(*StorageError) // nil: failures are only returned
	links  *snapshotLinks      // nil: the snapshot is written in full
	store  *refSnapshotStore
	pin    uint64 // the lowest Raft index its references name (0: none)
	unhold func()
	// syncLog, when set, flushes the Raft log before the checkpoint.
	syncLog func() error
}

func (s *raftSnapshot) Persist(sink raft.SnapshotSink) error {
	ownSnapshot(sink)
	began := time.Now()
	counted := &countingSink{SnapshotSink: sink}
	var err error
	if s.syncLog != nil {
		err = s.syncLog()
	}
	switch {
	case err != nil:
	case s.links != nil:
		err = s.s.Checkpoint(s.f)
		if err == nil {
			err = s.s.SyncData()
		}
		if err == nil {
			_, err = s.links.persist(s.store.sinkDir(sink), s.s.Index, s.pin, s.s.Meta(), counted)
		}
	default:
		err = s.s.Persist(s.f, counted)
	}
	// A snapshot a Restore replaced after it was taken is not a disk
	// failure: it is dropped and counted apart.
	superseded := errors.Is(err, fsm.ErrSnapshotSuperseded)
	if err != nil {
		sink.Cancel()
		if s.failed != nil && !superseded {
			// Persist fails only on local I/O (syncing partition logs,
			// the checkpoint, reading batches): the data directory fails.
			s.failed(&StorageError{Op: "persist snapshot", Err: err})
		}
	} else {
		err = sink.Close()
	}
	if s.m != nil {
		switch {
		case superseded:
			s.m.snapshots.WithLabelValues("superseded").Inc()
		case err != nil:
			s.m.snapshots.WithLabelValues("error").Inc()
		default:
			s.m.snapshots.WithLabelValues("ok").Inc()
			s.m.snapshotDuration.Observe(time.Since(began).Seconds())
			s.m.snapshotBytes.Set(float64(counted.n))
		}
	}
	return err
}

func (s *raftSnapshot) Release() {
	s.s.Release()
	if s.links != nil {
		s.links.release()
	}
	s.unhold()
}
