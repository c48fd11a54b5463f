// Package coordinator is the Kafka group coordinator. It runs on the Raft
// leader only: it turns group requests into fsm commands and keeps the soft
// state that is never replicated — heartbeat deadlines, join and sync
// windows, parked JoinGroup and SyncGroup requests. Every decision it makes
// (a join window closing, a session expiring) becomes a command, so the
// replicated state is the same on every node whatever the clocks say.
package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
)

// Config holds the coordinator's limits and Kafka broker defaults.
type Config struct {
	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms; 0: the default 3 s, negative: none
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	MaxRebalanceTimeout   time.Duration // rebalance timeouts are clamped to this
	OffsetsRetention      time.Duration // offsets.retention.minutes
	RetentionCheck        time.Duration // how often expired offsets are swept
	MaxGroups             int
	MaxGroupMembers       int // per group, pending member ids included
	MaxMembers            int // in all groups
	MaxMetadataBytes      int // per member, join metadata and assignment
	Clock                 Clock
	Logger                *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.InitialRebalanceDelay == 0 { // negative: no delay
		c.InitialRebalanceDelay = 3 * time.Second
	}
	def(&c.MinSessionTimeout, 6*time.Second)
	def(&c.MaxSessionTimeout, 30*time.Minute)
	def(&c.MaxRebalanceTimeout, 5*time.Minute)
	def(&c.OffsetsRetention, 7*24*time.Hour)
	def(&c.RetentionCheck, time.Minute)
	if c.MaxGroups <= 0 {
		c.MaxGroups = 1000
	}
	if c.MaxGroupMembers <= 0 {
		c.MaxGroupMembers = 1000
	}
	if c.MaxMembers <= 0 {
		c.MaxMembers = 10000
	}
	if c.MaxMetadataBytes <= 0 {
		c.MaxMetadataBytes = 64 << 10
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Raft is what the coordinator needs of the local Raft node.
type Raft interface {
	IsLeader() bool   // leads and has applied the whole log
	RaftLeader() bool // Raft says leader, maybe still catching up
	Propose(ctx context.Context, data []byte, force bool) (any, error)
}

// Coordinator serves group requests on the leader.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	clock Clock
	raft  Raft
	fsm   *fsm.FSM

	mu     sync.Mutex
	active bool   // soft state is armed: this node serves groups
	term   uint64 // bumps on every activation change; timers of old terms do nothing
	groups map[string]*softGroup
	// pendingIDs counts the KIP-394 member ids handed out in all groups
	// (softGroup.pending): they count against MaxMembers with the FSM's
	// members, so a flood of first joins to ever new groups cannot grow
	// the soft state without bound.
	pendingIDs int

	metrics *metrics
}

// New makes a coordinator. It serves groups while Lead runs.
func New(cfg Config, raft Raft, state *fsm.FSM) *Coordinator {
	cfg.setDefaults()
	return &Coordinator{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, raft: raft, fsm: state, groups: map[string]*softGroup{}, metrics: newMetrics()}
}

// Lead serves groups for one term of leadership; the cluster's leader
// lifecycle runs it (cluster.Node.RunWhileLeader) once the node has applied
// the whole log. It re-arms every member's session from now, sweeps
// expired pending member ids, and when ctx ends answers every parked
// request NOT_COORDINATOR and stops every timer before it returns.
func (c *Coordinator) Lead(ctx context.Context) error {
	c.activate()
	defer c.deactivate()
	sweep := time.NewTicker(time.Second)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sweep.C:
			c.expirePending()
		}
	}
}

// ExpireOffsets applies offsets retention every RetentionCheck for one term
// of leadership (a leader service, like Lead).
func (c *Coordinator) ExpireOffsets(ctx context.Context) error {
	t := time.NewTicker(c.cfg.RetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.expireOffsets(ctx)
		}
	}
}

// Status is the error a group request gets before any group logic:
// NONE on the serving leader.
func (c *Coordinator) Status() int16 {
	c.mu.Lock()
	active := c.active
	c.mu.Unlock()
	switch {
	case active:
		return 0
	case c.raft.RaftLeader() || c.raft.IsLeader():
		return kerr.CoordinatorLoadInProgress.Code
	default:
		return kerr.NotCoordinator.Code
	}
}

func (c *Coordinator) activate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active {
		return
	}
	c.active = true
	c.term++
	now := c.clock.Now()
	// A fresh full session for every member, as Kafka does on loading a
	// group; rebalances in flight get a fresh window.
	for _, sum := range c.fsm.Groups() {
		g := c.fsm.Group(sum.ID)
		if g == nil || len(g.Members) == 0 {
			continue
		}
		sg := c.soft(g.ID)
		for _, m := range g.Members {
			c.touchLocked(g.ID, sg, m.ID, time.Duration(m.SessionTimeoutMs)*time.Millisecond, now)
		}
		switch g.State {
		case fsm.GroupPreparingRebalance:
			c.armJoinLocked(g.ID, sg, g, initialRebalance(g))
		case fsm.GroupCompletingRebalance:
			c.armSyncLocked(g.ID, sg, g)
		}
	}
	c.log.Info("group coordinator active", "groups", len(c.groups))
}

// initialRebalance tells whether a group found in PreparingRebalance on
// gaining leadership is in its first rebalance after being empty (no member
// holds an assignment): its KIP-134 delay starts again, as it does in Kafka
// (where an unfinished join is not stored and the members join anew),
// instead of the window closing at once on the members that happened to
// join before the failover. A rebalance that began in CompletingRebalance
// looks alike; it merely waits the delay too.
func initialRebalance(g *fsm.GroupView) bool {
	for _, m := range g.Members {
		if len(m.Assignment) > 0 {
			return false
		}
	}
	return true
}

func (c *Coordinator) deactivate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active && len(c.groups) == 0 {
		return
	}
	c.active = false
	c.term++
	for _, sg := range c.groups {
		sg.stop(kerr.NotCoordinator.Code)
	}
	c.groups = map[string]*softGroup{}
	c.pendingIDs = 0
	c.log.Info("group coordinator inactive")
}

// propose applies a group command and returns its result.
func (c *Coordinator) propose(ctx context.Context, cmd fsm.Command) (*fsm.GroupResult, int16) {
	res, err := c.raft.Propose(ctx, fsm.Encode(cmd), false)
	if errors.Is(err, cluster.ErrNotLeader) {
		return nil, kerr.NotCoordinator.Code
	}
	if errors.Is(err, fsm.ErrFeatureDisabled) {
		return nil, kerr.UnsupportedVersion.Code // a voter still runs an older kgate
	}
	if err != nil {
		c.log.Warn("group proposal failed", "kind", cmd.Kind(), "err", err)
		return nil, kerr.RequestTimedOut.Code
	}
	gr, ok := res.(*fsm.GroupResult)
	if !ok {
		return nil, kerr.UnknownServerError.Code
	}
	return gr, 0
}

func (c *Coordinator) now() time.Time { return c.clock.Now() }
