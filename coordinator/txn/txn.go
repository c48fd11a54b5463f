// Package txn is kgate's Kafka transaction coordinator (KIP-98). Like the
// group coordinator it runs on the Raft leader: it checks what needs no
// state (limits, timeouts), turns every transaction request into an fsm
// command and proposes it, and, as a leader service, aborts transactions
// that outlive their timeout and removes transactional ids left idle longer
// than their expiration. All transaction state is in the FSM, so a new
// leader resumes every transaction where the old one left it.
package txn

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

// Config holds the coordinator's limits.
type Config struct {
	// MaxTimeout caps transaction.timeout.ms (Kafka's
	// transaction.max.timeout.ms, 15 minutes by default).
	MaxTimeout time.Duration
	// ExpiryCheck is how often the leader looks for expired transactions
	// (Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms)
	// and for idle transactional ids.
	ExpiryCheck time.Duration
	// IDExpiration is how long a transactional id without an ongoing
	// transaction is kept after its last use (Kafka's
	// transactional.id.expiration.ms, 7 days by default).
	IDExpiration time.Duration
	// MaxGroups bounds the groups a TxnOffsetCommit may create.
	MaxGroups int
	// Markers, when set, writes the markers of transactions whose
	// partitions are outside the FSM (the Iggy backend); nil when the FSM
	// holds the partitions (the embedded backend).
	Markers Markers
	Now     func() time.Time
	Logger  *slog.Logger
}

// Markers is a backend that keeps partitions outside the FSM and writes
// transaction markers into them.
type Markers interface {
	// NextOffsets returns each partition's next offset, read fresh from
	// the backend, and a code per partition (UNKNOWN_TOPIC_OR_PARTITION,
	// or a retriable one when it cannot be read).
	NextOffsets(ctx context.Context, parts []fsm.TopicPartition) ([]int64, []int16)
	// LogStarts returns each partition's log start offset, read from the
	// backend, and a code per partition.
	LogStarts(ctx context.Context, parts []fsm.TopicPartition) ([]int64, []int16)
	// WriteMarker appends a commit or abort marker of the producer to
	// each partition and returns each marker's offset; after every batch
	// of the transaction written there, and only while the transaction is
	// in PrepareCommit/PrepareAbort at that epoch (an error otherwise).
	WriteMarker(ctx context.Context, producerID int64, epoch int16, commit bool, nowMs int64, parts []fsm.TopicPartition) ([]int64, error)
	// WriteAdminMarker appends an administrator's marker (WriteTxnMarkers)
	// to each partition, whatever the transaction's state, and returns each
	// marker's offset: -1 for a partition that does not exist.
	WriteAdminMarker(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64,
		parts []fsm.TopicPartition) ([]int64, error)
}

// Raft is what the coordinator needs of the local Raft node.
type Raft interface {
	IsLeader() bool   // leads and has applied the whole log
	RaftLeader() bool // Raft says leader, maybe still catching up
	Propose(ctx context.Context, data []byte, force bool) (any, error)
}

// Coordinator serves the transaction APIs.
type Coordinator struct {
	cfg  Config
	log  *slog.Logger
	raft Raft
	fsm  *fsm.FSM

	// completing holds a lock per transactional id whose markers are
	// being written (complete): the producer's EndTxn, InitProducerId and
	// the expiry check may each complete the same transaction, and a
	// second writer that read the state before the first finished would
	// write its markers after the producer's next transaction began.
	completingMu sync.Mutex
	completing   map[string]*idLock
}

// idLock is one transactional id's lock and the number of its holders and
// waiters (dropped from the map at zero).
type idLock struct {
	mu   sync.Mutex
	refs int
}

// lockID takes id's completion lock and returns its release.
func (c *Coordinator) lockID(id string) func() {
	c.completingMu.Lock()
	l := c.completing[id]
	if l == nil {
		l = &idLock{}
		c.completing[id] = l
	}
	l.refs++
	c.completingMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.completingMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(c.completing, id)
		}
		c.completingMu.Unlock()
	}
}

// New makes a coordinator.
func New(cfg Config, raft Raft, state *fsm.FSM) *Coordinator {
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 15 * time.Minute
	}
	if cfg.ExpiryCheck <= 0 {
		cfg.ExpiryCheck = 10 * time.Second
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = 7 * 24 * time.Hour
	}
	if cfg.MaxGroups <= 0 {
		cfg.MaxGroups = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Coordinator{cfg: cfg, log: cfg.Logger, raft: raft, fsm: state, completing: map[string]*idLock{}}
}

// Status is the error a transaction request gets before any transaction
// logic: NONE on the serving leader, COORDINATOR_LOAD_IN_PROGRESS while it
// catches up, NOT_COORDINATOR elsewhere (the client looks the coordinator
// up again).
func (c *Coordinator) Status() int16 {
	switch {
	case c.raft.IsLeader():
		return 0
	case c.raft.RaftLeader():
		return kerr.CoordinatorLoadInProgress.Code
	default:
		return kerr.NotCoordinator.Code
	}
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// propose applies a transaction command and returns its result.
func (c *Coordinator) propose(ctx context.Context, cmd fsm.Command) (*fsm.TxnResult, int16) {
	if code := c.Status(); code != 0 {
		return nil, code
	}
	res, err := c.raft.Propose(ctx, fsm.Encode(cmd), false)
	switch {
	case errors.Is(err, cluster.ErrNotLeader):
		return nil, kerr.NotCoordinator.Code
	case errors.Is(err, fsm.ErrFeatureDisabled):
		return nil, kerr.UnsupportedVersion.Code // a voter still runs an older kgate
	case err != nil:
		c.log.Warn("transaction proposal failed", "kind", cmd.Kind(), "err", err)
		// Retriable for every transaction API: the client asks again (a
		// command that did apply answers its retry the same way).
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	tr, ok := res.(*fsm.TxnResult)
	if !ok {
		return nil, kerr.UnknownServerError.Code
	}
	return tr, tr.Code
}

// InitProducerID gives a transactional id its producer id and a new epoch,
// fencing the previous producer. expectedID and expectedEpoch are the
// producer's current ones (KIP-360), -1 when it has none.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expectedID int64, expectedEpoch int16) (int64, int16, int16) {
	switch {
	case id == "":
		return -1, -1, kerr.InvalidRequest.Code
	case timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout:
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	r, code := c.propose(ctx, &fsm.InitTxnProducer{TransactionalID: id, TimeoutMs: timeoutMs, NowMs: c.nowMs(),
		ExpectedID: expectedID, ExpectedEpoch: expectedEpoch})
	if code == kerr.ConcurrentTransactions.Code && c.cfg.Markers != nil {
		// It fenced an ongoing transaction, or found one being completed:
		// complete it now, so the producer's retry succeeds.
		c.complete(ctx, id)
	}
	if code != 0 {
		return -1, -1, code
	}
	return r.ProducerID, r.Epoch, 0
}

// producer names the producer of a transaction request, stamped with
// the leader's time.
func (c *Coordinator) producer(id string, producerID int64, epoch int16) fsm.TxnProducer {
	return fsm.TxnProducer{TransactionalID: id, ProducerID: producerID, Epoch: epoch, NowMs: c.nowMs()}
}

// AddPartitions adds partitions to the producer's transaction; the codes
// are per partition, the single code for the whole request.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, producerID int64, epoch int16, parts []fsm.TopicPartition) ([]int16, int16) {
	if id == "" {
		return nil, kerr.InvalidRequest.Code
	}
	if c.cfg.Markers != nil {
		return c.addExternal(ctx, id, producerID, epoch, parts)
	}
	r, code := c.propose(ctx, &fsm.AddTxnPartitions{TxnProducer: c.producer(id, producerID, epoch), Partitions: parts})
	if code != 0 {
		return nil, code
	}
	return r.Codes, 0
}

// VerifyPartitions reports, per partition, whether it is in the producer's
// ongoing transaction (AddPartitionsToTxn v4+ with verify_only): NONE, or
// INVALID_TXN_STATE. It reads applied state and proposes nothing.
func (c *Coordinator) VerifyPartitions(id string, producerID int64, epoch int16, parts []fsm.TopicPartition) ([]int16, int16) {
	if code := c.Status(); code != 0 {
		return nil, code
	}
	v, ok := c.fsm.Transaction(id)
	switch {
	case !ok || v.ProducerID != producerID:
		return nil, fsm.ErrInvalidProducerIDMapping
	case v.Epoch != epoch:
		return nil, fsm.ErrProducerFenced
	}
	in := map[fsm.TopicPartition]bool{}
	if v.State == fsm.TxnOngoing {
		for _, tp := range v.Partitions {
			in[tp] = true
		}
	}
	codes := make([]int16, len(parts))
	for i, tp := range parts {
		if !in[tp] {
			codes[i] = fsm.ErrInvalidTxnState
		}
	}
	return codes, 0
}

// AddOffsets adds a group's offsets to the producer's transaction.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, producerID int64, epoch int16, group string) int16 {
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	_, code := c.propose(ctx, &fsm.AddTxnGroup{TxnProducer: c.producer(id, producerID, epoch), Group: group})
	return code
}

// CommitOffsets stages offsets in the transaction: the group sees them
// when it commits. Codes are per offset.
func (c *Coordinator) CommitOffsets(ctx context.Context, id string, producerID int64, epoch int16, group, member, instance string,
	generation int32, offsets []fsm.OffsetCommit) ([]int16, int16) {
	if code := c.Status(); code != 0 {
		return nil, code
	}
	if group == "" { // Kafka takes the empty id for plain commits only
		return nil, kerr.InvalidGroupID.Code
	}
	r, code := c.propose(ctx, &fsm.TxnCommitOffsets{TxnProducer: c.producer(id, producerID, epoch), Group: group,
		MemberID: member, InstanceID: instance, Generation: generation, MaxGroups: int32(c.cfg.MaxGroups), Offsets: offsets})
	if code != 0 {
		return nil, code
	}
	return r.Codes, 0
}

// Describe returns a transactional id's state, as applied on the leader:
// NOT_COORDINATOR elsewhere, TRANSACTIONAL_ID_NOT_FOUND for an unknown id.
func (c *Coordinator) Describe(id string) (fsm.TxnView, int16) {
	if code := c.Status(); code != 0 {
		return fsm.TxnView{}, code
	}
	if id == "" {
		return fsm.TxnView{}, kerr.InvalidRequest.Code
	}
	v, ok := c.fsm.Transaction(id)
	if !ok {
		return fsm.TxnView{}, kerr.TransactionalIDNotFound.Code
	}
	return v, 0
}

// List returns every transactional id's state on the leader, and nothing
// elsewhere: Kafka's tools ask every broker and merge the answers, and the
// leader is the one coordinator.
func (c *Coordinator) List() []fsm.TxnView {
	if c.Status() != 0 {
		return nil
	}
	return c.fsm.Transactions()
}

// Now is the coordinator's clock.
func (c *Coordinator) Now() time.Time { return c.cfg.Now() }

// PendingOffsets is the set of a group's partitions whose offsets wait in
// an ongoing transaction.
func (c *Coordinator) PendingOffsets(group string) map[fsm.TopicPartition]bool {
	return c.fsm.PendingTxnOffsets(group)
}

// EndTxn commits or aborts the producer's transaction.
func (c *Coordinator) EndTxn(ctx context.Context, id string, producerID int64, epoch int16, commit bool) int16 {
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	_, code := c.propose(ctx, &fsm.EndTxn{TxnProducer: c.producer(id, producerID, epoch), Commit: commit})
	if code == 0 && c.cfg.Markers != nil {
		// Answer once the markers are in and the transaction is complete,
		// so the producer's next transaction finds it so.
		code = c.complete(ctx, id)
	}
	return code
}

// ExpireTransactions is the leader service that aborts every transaction
// older than its timeout and fences its producer, and removes transactional
// ids idle longer than IDExpiration. The time is the leader's, carried in
// the commands; Apply aborts only a transaction that is still the same one
// and expired by that time, and removes only an id still idle by then.
func (c *Coordinator) ExpireTransactions(ctx context.Context) error {
	t := time.NewTicker(c.cfg.ExpiryCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.expire(ctx)
		}
	}
}

// expireIDsPerCommand bounds the size of one ExpireTxnIDs entry.
const expireIDsPerCommand = 500

func (c *Coordinator) expire(ctx context.Context) {
	now := c.nowMs()
	idExpiration := c.cfg.IDExpiration.Milliseconds()
	var idle, prepared []string
	var timedOut []fsm.TxnView
	for _, v := range c.fsm.Transactions() {
		switch {
		case v.State == fsm.TxnPrepareCommit || v.State == fsm.TxnPrepareAbort:
			prepared = append(prepared, v.TransactionalID)
		case v.State != fsm.TxnOngoing:
			// Kafka's rule: Empty, CompleteCommit or CompleteAbort, last
			// updated at or before now minus the expiration.
			if v.UpdateMs <= now-idExpiration {
				idle = append(idle, v.TransactionalID)
			}
		case now-v.StartMs >= int64(v.TimeoutMs):
			timedOut = append(timedOut, v)
		}
	}
	// Idle ids first: a transaction this pass aborts is not idle, and once
	// an abort of this pass shows, so does every removal.
	c.expireIDs(ctx, now, idExpiration, idle)
	for _, v := range timedOut {
		if ctx.Err() != nil {
			return
		}
		cmd := &fsm.ExpireTxn{TxnProducer: fsm.TxnProducer{TransactionalID: v.TransactionalID, ProducerID: v.ProducerID,
			Epoch: v.Epoch, NowMs: now}, StartMs: v.StartMs}
		if _, code := c.propose(ctx, cmd); code == 0 {
			c.log.Info("aborted an expired transaction", "transactional_id", v.TransactionalID,
				"producer_id", v.ProducerID, "timeout_ms", v.TimeoutMs)
			if c.cfg.Markers != nil {
				c.complete(ctx, v.TransactionalID)
			}
		}
	}
	// Transactions a previous leader prepared and did not complete (it
	// failed while writing their markers), or whose completion failed.
	for _, id := range prepared {
		if ctx.Err() != nil {
			return
		}
		c.complete(ctx, id)
	}
	c.pruneExternal(ctx)
}

// pruneExtPerCommand bounds the partitions of one PruneExtAborted entry.
const pruneExtPerCommand = 500

// pruneExternal forgets the aborted transactions of partitions outside the
// FSM whose records the backend no longer holds (below the log start), so
// that the lists do not grow without end; the embedded log prunes its own
// when it trims. Checked with the expiry check.
func (c *Coordinator) pruneExternal(ctx context.Context) {
	if c.cfg.Markers == nil || c.fsm.FeatureLevel() < fsm.LevelPruneExtAborted {
		return
	}
	oldest := c.fsm.ExtOldestAborted()
	if len(oldest) == 0 {
		return
	}
	parts := make([]fsm.TopicPartition, 0, len(oldest))
	for tp := range oldest {
		parts = append(parts, tp)
	}
	starts, codes := c.cfg.Markers.LogStarts(ctx, parts)
	cmd := &fsm.PruneExtAborted{}
	for i, tp := range parts {
		if codes[i] == 0 && starts[i] > oldest[tp] {
			cmd.Partitions = append(cmd.Partitions, tp)
			cmd.Starts = append(cmd.Starts, starts[i])
		}
	}
	for len(cmd.Partitions) > 0 && ctx.Err() == nil {
		n := min(len(cmd.Partitions), pruneExtPerCommand)
		part := &fsm.PruneExtAborted{Partitions: cmd.Partitions[:n], Starts: cmd.Starts[:n]}
		cmd.Partitions, cmd.Starts = cmd.Partitions[n:], cmd.Starts[n:]
		if _, code := c.propose(ctx, part); code != 0 {
			return // again at the next check
		}
	}
}

// addExternal is AddPartitions over partitions outside the FSM: each
// partition's next offset is read first and goes into the command, a
// bound below the transaction's first record there.
func (c *Coordinator) addExternal(ctx context.Context, id string, producerID int64, epoch int16, parts []fsm.TopicPartition) ([]int16, int16) {
	if code := c.Status(); code != 0 {
		return nil, code
	}
	firsts, codes := c.cfg.Markers.NextOffsets(ctx, parts)
	failed := false
	for _, code := range codes {
		failed = failed || code != 0
	}
	if failed {
		// As Kafka: one failing partition fails the request, the others
		// are not attempted.
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = kerr.OperationNotAttempted.Code
			}
		}
		return codes, 0
	}
	r, code := c.propose(ctx, &fsm.AddExtTxnPartitions{TxnProducer: c.producer(id, producerID, epoch), Partitions: parts, Firsts: firsts})
	if code != 0 {
		return nil, code
	}
	return r.Codes, 0
}

// complete writes the markers of a transaction in PrepareCommit or
// PrepareAbort and completes it, one completion of an id at a time. Markers
// written twice (a retry after a failed write, a new leader finishing a
// predecessor's work) are harmless while the transaction is still being
// completed: a marker for a producer with no open transaction in the
// partition changes nothing for readers. Once it is complete, no marker is
// written for it any more (Markers answers an error): one could land
// inside the producer's next transaction. It answers NONE when the
// transaction is complete, or a retriable code.
func (c *Coordinator) complete(ctx context.Context, id string) int16 {
	defer c.lockID(id)()
	v, ok := c.fsm.Transaction(id)
	if !ok {
		return kerr.TransactionalIDNotFound.Code
	}
	if v.State != fsm.TxnPrepareCommit && v.State != fsm.TxnPrepareAbort {
		return 0
	}
	commit := v.State == fsm.TxnPrepareCommit
	now := c.nowMs()
	offsets, err := c.cfg.Markers.WriteMarker(ctx, v.ProducerID, v.Epoch, commit, now, v.Partitions)
	if err != nil {
		c.log.Warn("cannot write transaction markers; retried", "transactional_id", id, "producer_id", v.ProducerID,
			"commit", commit, "err", err)
		// Retriable: the producer retries EndTxn, and the expiry check
		// completes prepared transactions too.
		return kerr.ConcurrentTransactions.Code
	}
	_, code := c.propose(ctx, &fsm.CompleteTxn{TxnProducer: fsm.TxnProducer{TransactionalID: id, ProducerID: v.ProducerID,
		Epoch: v.Epoch, NowMs: now}, Commit: commit, Partitions: v.Partitions, Offsets: offsets})
	return code
}

// expireIDs proposes the removal of idle transactional ids, in commands of
// a bounded size.
func (c *Coordinator) expireIDs(ctx context.Context, now, idExpiration int64, idle []string) {
	// Below LevelIdleExpiry (a voter runs an older kgate) ids are kept.
	if len(idle) == 0 || c.fsm.FeatureLevel() < fsm.LevelIdleExpiry {
		return
	}
	for len(idle) > 0 && ctx.Err() == nil {
		batch := idle[:min(len(idle), expireIDsPerCommand)]
		idle = idle[len(batch):]
		r, code := c.propose(ctx, &fsm.ExpireTxnIDs{NowMs: now, ExpirationMs: idExpiration, IDs: batch})
		if code != 0 {
			return // proposed again at the next check
		}
		removed := 0
		for _, code := range r.Codes {
			if code == 0 {
				removed++
			}
		}
		if removed > 0 {
			c.log.Info("removed idle transactional ids", "count", removed,
				"expiration", c.cfg.IDExpiration.String())
		}
	}
}

// WriteMarkers writes transaction markers into partitions on an
// administrator's request (WriteTxnMarkers): on the embedded backend the
// Raft leader leads every partition, so it is the one that proposes them.
// The codes are per partition, markers in order; the single code is for the
// whole request (NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS off the
// serving leader, UNSUPPORTED_VERSION below the feature level).
func (c *Coordinator) WriteMarkers(ctx context.Context, markers []fsm.TxnMarker) ([]int16, int16) {
	if c.cfg.Markers != nil {
		return c.writeExtMarkers(ctx, markers)
	}
	r, code := c.propose(ctx, &fsm.WriteTxnMarkers{NowMs: c.nowMs(), Markers: markers})
	if code != 0 {
		return nil, code
	}
	return r.Codes, 0
}

// writeExtMarkers is WriteMarkers over partitions outside the FSM (the Iggy
// backend): each marker is written into its partitions first (through
// their leaders' queues), then one ExtTxnMarkers entry records the written
// ones, closing their producers' open transactions there. The answers are
// Kafka's: NONE when written (also with no transaction open there),
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for an epoch older
// than the producer's current one (nothing written); a write that fails
// gets a retriable code and is not recorded.
func (c *Coordinator) writeExtMarkers(ctx context.Context, markers []fsm.TxnMarker) ([]int16, int16) {
	if code := c.Status(); code != 0 {
		return nil, code
	}
	if c.fsm.FeatureLevel() < fsm.LevelExtTxnMarkers {
		return nil, kerr.UnsupportedVersion.Code
	}
	now := c.nowMs()
	var codes []int16
	var written []fsm.TxnMarker
	var offsets []int64
	for _, m := range markers {
		fill := func(code int16) {
			for range m.Partitions {
				codes = append(codes, code)
			}
		}
		if e, _, ok := c.fsm.TxnProducerState(m.ProducerID); ok && m.Epoch < e {
			fill(kerr.InvalidProducerEpoch.Code)
			continue
		}
		offs, err := c.cfg.Markers.WriteAdminMarker(ctx, m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch, now, m.Partitions)
		if err != nil {
			c.log.Warn("cannot write an administrator's transaction markers", "producer_id", m.ProducerID, "err", err)
			fill(kerr.KafkaStorageError.Code)
			continue
		}
		w := fsm.TxnMarker{ProducerID: m.ProducerID, Epoch: m.Epoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
		for i, tp := range m.Partitions {
			if offs[i] < 0 {
				codes = append(codes, kerr.UnknownTopicOrPartition.Code)
				continue
			}
			codes = append(codes, 0)
			w.Partitions = append(w.Partitions, tp)
			offsets = append(offsets, offs[i])
		}
		if len(w.Partitions) > 0 {
			written = append(written, w)
		}
	}
	if len(written) > 0 {
		if _, code := c.propose(ctx, &fsm.ExtTxnMarkers{Markers: written, Offsets: offsets}); code != 0 {
			return nil, code
		}
	}
	return codes, 0
}
