package fsm

import (
	"fmt"
	"math"
	"sort"
)

// Transactions (KIP-98): the transaction coordinator's state lives here, and
// so do the partitions it writes markers to, so ending a transaction is one
// Raft entry: the markers in every partition, the offsets committed with
// it, and the new state, all or nothing. Kafka needs PrepareCommit and
// PrepareAbort states because its markers go to other brokers after the
// state is logged; here there is no moment between the two, so a
// transaction is Empty, Ongoing, CompleteCommit or CompleteAbort.

// Kafka error codes of the transaction APIs.
const (
	ErrInvalidTxnState              int16 = 48
	ErrInvalidProducerIDMapping     int16 = 49
	ErrConcurrentTransactions       int16 = 51
	ErrTransactionCoordinatorFenced int16 = 52
	ErrOperationNotAttempted        int16 = 55
	ErrProducerFenced               int16 = 90
	ErrTransactionalIDNotFound      int16 = 105
	ErrInvalidTransactionTimeout    int16 = 50
	noProducerEpoch                 int16 = -1
	noProducerID                    int64 = -1
	exhaustedEpoch                        = math.MaxInt16 - 1
)

// TxnState is a transaction's state, named as Kafka names it.
type TxnState uint8

const (
	TxnEmpty TxnState = iota
	TxnOngoing
	TxnCompleteCommit
	TxnCompleteAbort
	// TxnPrepareCommit and TxnPrepareAbort: the transaction has ended and
	// its markers are being written into partitions outside the FSM (the
	// Iggy backend); CompleteTxn completes it. Only transactions with such
	// partitions (LevelExternalTxns) pass through them.
	TxnPrepareCommit
	TxnPrepareAbort
)

// preparing tells whether the transaction waits for its markers.
func (t *txn) preparing() bool { return t.state == TxnPrepareCommit || t.state == TxnPrepareAbort }

func (s TxnState) String() string {
	switch s {
	case TxnEmpty:
		return "Empty"
	case TxnOngoing:
		return "Ongoing"
	case TxnCompleteCommit:
		return "CompleteCommit"
	case TxnCompleteAbort:
		return "CompleteAbort"
	case TxnPrepareCommit:
		return "PrepareCommit"
	case TxnPrepareAbort:
		return "PrepareAbort"
	}
	return fmt.Sprintf("TxnState(%d)", uint8(s))
}

// txn is one transactional id's state.
type txn struct {
	producerID, lastProducerID int64
	epoch, lastEpoch           int16
	timeoutMs                  int32
	state                      TxnState
	startMs, updateMs          int64
	partitions                 []TopicPartition // sorted, unique
	groups                     []string         // sorted, unique (AddOffsetsToTxn)
	offsets                    map[string]map[TopicPartition]Offset
}

// TxnView is a reader's copy of one transactional id's state.
type TxnView struct {
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	State           TxnState
	TimeoutMs       int32
	StartMs         int64
	UpdateMs        int64 // the leader's time of its last change, as Kafka's txnLastUpdateTimestamp
	Partitions      []TopicPartition
	Groups          []string
}

// AbortedTxn is one aborted transaction in a partition: its producer and
// the offsets of its first record and of its abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// TxnResult answers a transaction command.
type TxnResult struct {
	Code       int16
	ProducerID int64
	Epoch      int16
	Codes      []int16 // per partition or offset, in command order
}

// InitTxnProducer is InitProducerId with a transactional id. ExpectedID and
// ExpectedEpoch are the producer's current ones (KIP-360), -1 when it has
// none. The coordinator has checked TimeoutMs against its limit.
type InitTxnProducer struct {
	TransactionalID string
	TimeoutMs       int32
	NowMs           int64
	ExpectedID      int64
	ExpectedEpoch   int16
}

func (*InitTxnProducer) Kind() Kind { return KindInitTxnProducer }
func (c *InitTxnProducer) encode(e *enc) {
	e.str(c.TransactionalID)
	e.i32(c.TimeoutMs)
	e.i64(c.NowMs)
	e.i64(c.ExpectedID)
	e.i16(c.ExpectedEpoch)
}

func decodeInitTxnProducer(d *dec) *InitTxnProducer {
	return &InitTxnProducer{TransactionalID: d.str(), TimeoutMs: d.i32(), NowMs: d.i64(), ExpectedID: d.i64(), ExpectedEpoch: d.i16()}
}

// TxnProducer names the producer a transaction request comes from.
type TxnProducer struct {
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	NowMs           int64
}

func (p *TxnProducer) encode(e *enc) {
	e.str(p.TransactionalID)
	e.i64(p.ProducerID)
	e.i16(p.Epoch)
	e.i64(p.NowMs)
}

func decodeTxnProducer(d *dec) TxnProducer {
	return TxnProducer{TransactionalID: d.str(), ProducerID: d.i64(), Epoch: d.i16(), NowMs: d.i64()}
}

// AddTxnPartitions adds partitions to the producer's transaction, starting
// it if none is ongoing (AddPartitionsToTxn).
type AddTxnPartitions struct {
	TxnProducer
	Partitions []TopicPartition
}

func (*AddTxnPartitions) Kind() Kind { return KindAddTxnPartitions }
func (c *AddTxnPartitions) encode(e *enc) {
	c.TxnProducer.encode(e)
	encodeTopicPartitions(e, c.Partitions)
}

func decodeAddTxnPartitions(d *dec) *AddTxnPartitions {
	c := &AddTxnPartitions{TxnProducer: decodeTxnProducer(d)}
	c.Partitions = decodeTopicPartitions(d)
	return c
}

// AddTxnGroup adds a consumer group's offsets to the producer's transaction
// (AddOffsetsToTxn).
type AddTxnGroup struct {
	TxnProducer
	Group string
}

func (*AddTxnGroup) Kind() Kind { return KindAddTxnGroup }
func (c *AddTxnGroup) encode(e *enc) {
	c.TxnProducer.encode(e)
	e.str(c.Group)
}

// TxnCommitOffsets stages offsets in the transaction (TxnOffsetCommit):
// they are committed to the group when the transaction commits and dropped
// when it aborts. Generation -1 skips the member check (a producer that
// does not consume in the group), as in Kafka.
type TxnCommitOffsets struct {
	TxnProducer
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	MaxGroups  int32
	Offsets    []OffsetCommit
}

func (*TxnCommitOffsets) Kind() Kind { return KindTxnCommitOffsets }
func (c *TxnCommitOffsets) encode(e *enc) {
	c.TxnProducer.encode(e)
	e.str(c.Group)
	e.str(c.MemberID)
	e.str(c.InstanceID)
	e.i32(c.Generation)
	e.i32(c.MaxGroups)
	encodeOffsetCommits(e, c.Offsets)
}

func decodeTxnCommitOffsets(d *dec) *TxnCommitOffsets {
	c := &TxnCommitOffsets{TxnProducer: decodeTxnProducer(d), Group: d.str(), MemberID: d.str(), InstanceID: d.str(),
		Generation: d.i32(), MaxGroups: d.i32()}
	c.Offsets = decodeOffsetCommits(d)
	return c
}

// EndTxn commits or aborts the producer's transaction (EndTxn).
type EndTxn struct {
	TxnProducer
	Commit bool
}

func (*EndTxn) Kind() Kind { return KindEndTxn }
func (c *EndTxn) encode(e *enc) {
	c.TxnProducer.encode(e)
	e.bool(c.Commit)
}

// ExpireTxn aborts a transaction that outlived its timeout and fences its
// producer. The leader proposes it with its clock's time; Apply aborts
// only if, by that time, the same transaction (producer, epoch, start) is
// still ongoing and expired, so a late or repeated proposal does nothing.
type ExpireTxn struct {
	TxnProducer
	StartMs int64
}

func (*ExpireTxn) Kind() Kind { return KindExpireTxn }
func (c *ExpireTxn) encode(e *enc) {
	c.TxnProducer.encode(e)
	e.i64(c.StartMs)
}

// ExpireTxnIDs removes transactional ids that have had no transaction and
// no request for ExpirationMs (Kafka's transactional.id.expiration.ms).
// The leader proposes it with its clock's time and the ids it found idle;
// Apply removes an id only if, by NowMs, it is still without an ongoing
// transaction and was last updated at or before NowMs-ExpirationMs, so an
// id used after the leader's decision stays.
type ExpireTxnIDs struct {
	NowMs        int64
	ExpirationMs int64
	IDs          []string
}

func (*ExpireTxnIDs) Kind() Kind { return KindExpireTxnIDs }
func (c *ExpireTxnIDs) encode(e *enc) {
	e.i64(c.NowMs)
	e.i64(c.ExpirationMs)
	encodeStrings(e, c.IDs)
}

func decodeExpireTxnIDs(d *dec) *ExpireTxnIDs {
	return &ExpireTxnIDs{NowMs: d.i64(), ExpirationMs: d.i64(), IDs: decodeStrings(d)}
}

func epochExhausted(e int16) bool { return e >= exhaustedEpoch }

func (f *FSM) allocProducerIDLocked() int64 {
	id := f.nextProducerID
	f.nextProducerID++
	return id
}

func (f *FSM) applyInitTxnProducer(c *InitTxnProducer) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.txns[c.TransactionalID]
	if t == nil {
		t = &txn{producerID: f.allocProducerIDLocked(), lastProducerID: noProducerID, epoch: noProducerEpoch,
			lastEpoch: noProducerEpoch, timeoutMs: c.TimeoutMs, updateMs: c.NowMs}
		f.txns[c.TransactionalID] = t
		f.txnByPID[t.producerID] = c.TransactionalID
	}
	expected := c.ExpectedID != noProducerID
	// Kafka's rule: a producer that names its id and epoch is fenced unless
	// the id is the current one, or the previous one with its epoch
	// exhausted (a retry after a rotation it did not hear of).
	if expected && t.epoch != noProducerEpoch && c.ExpectedID != t.producerID &&
		!(c.ExpectedID == t.lastProducerID && epochExhausted(c.ExpectedEpoch)) {
		return &TxnResult{Code: ErrProducerFenced, ProducerID: -1, Epoch: -1}
	}
	if t.preparing() {
		// Markers still on their way, as Kafka answers in Prepare states.
		return &TxnResult{Code: ErrConcurrentTransactions, ProducerID: -1, Epoch: -1}
	}
	if t.state == TxnOngoing {
		// Fence the current producer and abort its transaction; the caller
		// retries (CONCURRENT_TRANSACTIONS) and gets the epoch after that.
		fenced := t.epoch
		if !epochExhausted(fenced) {
			fenced++
		}
		t.lastEpoch, t.epoch = t.epoch, fenced
		if res := f.endTxnLocked(t, false, c.NowMs); res != nil {
			return res
		}
		return &TxnResult{Code: ErrConcurrentTransactions, ProducerID: -1, Epoch: -1}
	}
	switch {
	case epochExhausted(t.epoch) && (!expected || c.ExpectedEpoch == t.epoch):
		delete(f.txnByPID, t.producerID)
		t.lastProducerID, t.lastEpoch = t.producerID, t.epoch
		t.producerID, t.epoch = f.allocProducerIDLocked(), 0
		f.txnByPID[t.producerID] = c.TransactionalID
	case !expected || c.ExpectedEpoch == t.epoch || t.epoch == noProducerEpoch:
		t.lastEpoch = t.epoch
		t.epoch++
	case c.ExpectedEpoch == t.lastEpoch:
		// A retry of the bump that the producer did not hear of.
	default:
		return &TxnResult{Code: ErrProducerFenced, ProducerID: -1, Epoch: -1}
	}
	t.timeoutMs, t.state, t.updateMs = c.TimeoutMs, TxnEmpty, c.NowMs
	t.partitions, t.groups, t.offsets = nil, nil, nil
	return &TxnResult{ProducerID: t.producerID, Epoch: t.epoch}
}

// checkProducerLocked is Kafka's check of the producer a transaction
// request names.
func (f *FSM) checkProducerLocked(p *TxnProducer) (*txn, int16) {
	t := f.txns[p.TransactionalID]
	switch {
	case t == nil || t.producerID != p.ProducerID:
		return nil, ErrInvalidProducerIDMapping
	case t.epoch != p.Epoch:
		return nil, ErrProducerFenced
	}
	return t, ErrNone
}

// beginLocked makes t ongoing, if it is not yet.
func (t *txn) beginLocked(now int64) {
	if t.state != TxnOngoing {
		t.state, t.startMs = TxnOngoing, now
		t.partitions, t.groups, t.offsets = nil, nil, nil
	}
	t.updateMs = now
}

func (f *FSM) applyAddTxnPartitions(c *AddTxnPartitions) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, code := f.checkProducerLocked(&c.TxnProducer)
	if code != ErrNone {
		return &TxnResult{Code: code}
	}
	if t.preparing() {
		return &TxnResult{Code: ErrConcurrentTransactions}
	}
	// As Kafka: unknown partitions fail the request, the others are not
	// attempted.
	r := &TxnResult{Codes: make([]int16, len(c.Partitions))}
	unknown := false
	for i, tp := range c.Partitions {
		if tt := f.topics[tp.Topic]; tt == nil || tp.Partition < 0 || int(tp.Partition) >= len(tt.Partitions) {
			r.Codes[i], unknown = ErrUnknownTopicOrPartition, true
		}
	}
	if unknown {
		for i := range r.Codes {
			if r.Codes[i] == ErrNone {
				r.Codes[i] = ErrOperationNotAttempted
			}
		}
		return r
	}
	t.beginLocked(c.NowMs)
	for _, tp := range c.Partitions {
		t.partitions = insertSorted(t.partitions, tp, tpLess)
	}
	return r
}

func insertSorted[T comparable](s []T, v T, less func(a, b T) bool) []T {
	i := sort.Search(len(s), func(i int) bool { return !less(s[i], v) })
	if i < len(s) && s[i] == v {
		return s
	}
	s = append(s, v)
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

func (f *FSM) applyAddTxnGroup(c *AddTxnGroup) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, code := f.checkProducerLocked(&c.TxnProducer)
	if code != ErrNone {
		return &TxnResult{Code: code}
	}
	if t.preparing() {
		return &TxnResult{Code: ErrConcurrentTransactions}
	}
	t.beginLocked(c.NowMs)
	t.groups = insertSorted(t.groups, c.Group, func(a, b string) bool { return a < b })
	return &TxnResult{}
}

func (f *FSM) applyTxnCommitOffsets(c *TxnCommitOffsets) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, code := f.checkProducerLocked(&c.TxnProducer)
	if code != ErrNone {
		return &TxnResult{Code: code}
	}
	if i := sort.SearchStrings(t.groups, c.Group); t.state != TxnOngoing || i == len(t.groups) || t.groups[i] != c.Group {
		return &TxnResult{Code: ErrInvalidTxnState} // AddOffsetsToTxn did not come first
	}
	g := f.groups[c.Group]
	if c.Generation >= 0 {
		if g == nil {
			return &TxnResult{Code: ErrIllegalGeneration}
		}
		if _, code := g.checkMember(c.MemberID, c.InstanceID, c.Generation); code != ErrNone {
			return &TxnResult{Code: code}
		}
	} else if g == nil {
		if _, code := f.newGroupLocked(c.Group, c.NowMs, c.MaxGroups); code != ErrNone {
			return &TxnResult{Code: code}
		}
	}
	if t.offsets == nil {
		t.offsets = map[string]map[TopicPartition]Offset{}
	}
	staged := t.offsets[c.Group]
	if staged == nil {
		staged = map[TopicPartition]Offset{}
		t.offsets[c.Group] = staged
	}
	r := &TxnResult{Codes: make([]int16, len(c.Offsets))}
	for i, o := range c.Offsets {
		if len(o.Metadata) > MaxOffsetMetadata {
			r.Codes[i] = ErrOffsetMetadataTooLarge
			continue
		}
		staged[TopicPartition{o.Topic, o.Partition}] = Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	t.updateMs = c.NowMs
	return r
}

func (f *FSM) applyEndTxn(c *EndTxn) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, code := f.checkProducerLocked(&c.TxnProducer)
	if code != ErrNone {
		return &TxnResult{Code: code}
	}
	switch t.state {
	case TxnOngoing:
		if res := f.endTxnLocked(t, c.Commit, c.NowMs); res != nil {
			return res
		}
		return &TxnResult{}
	case TxnCompleteCommit:
		if c.Commit {
			return &TxnResult{} // a retry
		}
	case TxnCompleteAbort:
		if !c.Commit {
			return &TxnResult{}
		}
	case TxnPrepareCommit, TxnPrepareAbort:
		// A retry while the markers are written: the coordinator completes
		// the transaction before it answers. The other outcome is refused.
		if c.Commit == (t.state == TxnPrepareCommit) {
			return &TxnResult{}
		}
	}
	return &TxnResult{Code: ErrInvalidTxnState}
}

func (f *FSM) applyExpireTxn(c *ExpireTxn) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, code := f.checkProducerLocked(&c.TxnProducer)
	if code != ErrNone {
		return &TxnResult{Code: code}
	}
	if t.state != TxnOngoing || t.startMs != c.StartMs || c.NowMs-t.startMs < int64(t.timeoutMs) {
		return &TxnResult{Code: ErrInvalidTxnState}
	}
	// Fence the producer, as Kafka does on a timeout: its next request
	// fails and it must start over with InitProducerId.
	t.lastEpoch = t.epoch
	if !epochExhausted(t.epoch) {
		t.epoch++
	}
	if res := f.endTxnLocked(t, false, c.NowMs); res != nil {
		return res
	}
	return &TxnResult{}
}

// applyExpireTxnIDs answers a code per id: NONE when removed,
// TRANSACTIONAL_ID_NOT_FOUND when already gone, INVALID_TXN_STATE when it
// has an ongoing transaction or was used after the cutoff.
func (f *FSM) applyExpireTxnIDs(c *ExpireTxnIDs) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	cutoff := c.NowMs - c.ExpirationMs
	r := &TxnResult{Codes: make([]int16, len(c.IDs))}
	for i, id := range c.IDs {
		t := f.txns[id]
		switch {
		case t == nil:
			r.Codes[i] = ErrTransactionalIDNotFound
		case t.state == TxnOngoing || t.preparing() || c.ExpirationMs < 0 || t.updateMs > cutoff:
			r.Codes[i] = ErrInvalidTxnState
		default:
			// Its producer ids go with it: a later InitProducerId for the id
			// gets a new one, at epoch 0, and a request with an old one
			// INVALID_PRODUCER_ID_MAPPING.
			delete(f.txnByPID, t.producerID)
			delete(f.txns, id)
		}
	}
	return r
}

// endTxnLocked writes a marker (with t's current epoch) into every
// partition of the transaction, commits its staged offsets when it
// commits, and completes it. It returns a stop error on local I/O failure.
func (f *FSM) endTxnLocked(t *txn, commit bool, now int64) any {
	if f.externalLocked(t) {
		// Its markers go into partitions outside the FSM: the coordinator
		// writes them, then completes it (CompleteTxn).
		t.state, t.updateMs = TxnPrepareAbort, now
		if commit {
			t.state = TxnPrepareCommit
		}
		return nil
	}
	marker := markerBatch(t.producerID, t.epoch, commit, now, 0)
	for _, tp := range t.partitions {
		tt := f.topics[tp.Topic]
		if tt == nil || int(tp.Partition) >= len(tt.Partitions) {
			continue // deleted since
		}
		if err := tt.Partitions[tp.Partition].writeMarker(marker, t.producerID, t.epoch, commit, now); err != nil {
			return ioFailure(fmt.Sprintf("transaction marker in %s/%d", tp.Topic, tp.Partition), err)
		}
	}
	f.finishTxnLocked(t, commit, now)
	return nil
}

// finishTxnLocked commits the transaction's staged offsets when it
// commits, and completes it.
func (f *FSM) finishTxnLocked(t *txn, commit bool, now int64) {
	if commit {
		groups := make([]string, 0, len(t.offsets))
		for g := range t.offsets {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, id := range groups {
			g := f.groups[id]
			if g == nil {
				continue // deleted since
			}
			for tp, o := range t.offsets[id] {
				o.CommitMs = now
				g.Offsets[tp] = o
			}
		}
		t.state = TxnCompleteCommit
	} else {
		t.state = TxnCompleteAbort
	}
	t.partitions, t.groups, t.offsets, t.updateMs = nil, nil, nil, now
}

// writeMarker appends a marker and closes the producer's transaction in
// this partition: the last stable offset moves past it, and an abort is
// indexed so read_committed fetches can drop its records.
func (p *Partition) writeMarker(marker []byte, producerID int64, epoch int16, commit bool, now int64) error {
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	return p.writeMarkerLocked(marker, producerID, epoch, commit, now)
}

func (p *Partition) writeMarkerLocked(marker []byte, producerID int64, epoch int16, commit bool, now int64) error {
	base, err := p.Log.Append(marker, 0, now)
	if err != nil {
		return err
	}
	p.close(producerID, base, commit)
	if ps := p.producers[producerID]; ps != nil && epoch > ps.epoch {
		// A fencing marker: the old epoch's batches are refused from now.
		ps.epoch, ps.recent, ps.lastTs = epoch, ps.recent[:0], now
	}
	return nil
}

// checkTxnBatchLocked decides whether a transactional batch may be
// written: its producer's transaction must be ongoing, at its epoch, with
// this partition added (Kafka's KIP-890 verification). Callers hold f.mu.
func (f *FSM) checkTxnBatchLocked(b *Batch) int16 {
	id, ok := f.txnByPID[b.ProducerID]
	if !ok {
		return ErrInvalidTxnState
	}
	t := f.txns[id]
	switch {
	case b.ProducerEpoch < t.epoch:
		return ErrInvalidProducerEpoch
	case b.ProducerEpoch > t.epoch || t.state != TxnOngoing:
		return ErrInvalidTxnState
	}
	tp := TopicPartition{Topic: b.Topic, Partition: b.Partition}
	i := sort.Search(len(t.partitions), func(i int) bool {
		q := t.partitions[i]
		return q.Topic > tp.Topic || q.Topic == tp.Topic && q.Partition >= tp.Partition
	})
	if i == len(t.partitions) || t.partitions[i] != tp {
		return ErrInvalidTxnState
	}
	return ErrNone
}

// LastStableOffset is the partition's last stable offset: the first offset
// of its oldest open transaction, or the high watermark when none is open.
func (p *Partition) LastStableOffset() int64 {
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	return p.lso(p.Log.Next())
}

// AbortedTxns lists the aborted transactions that have records in
// [from, to), oldest first, as Fetch reports them.
func (p *Partition) AbortedTxns(from, to int64) []AbortedTxn {
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	return p.abortedIn(from, to)
}

// pruneAborted forgets aborted transactions that ended before the log
// start offset.
func (p *Partition) pruneAborted(start int64) {
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	p.prune(start)
}

// PendingTxnOffsets is the set of a group's partitions with offsets staged
// in an ongoing transaction (OffsetFetch with require_stable answers them
// UNSTABLE_OFFSET_COMMIT).
func (f *FSM) PendingTxnOffsets(group string) map[TopicPartition]bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out map[TopicPartition]bool
	for _, t := range f.txns {
		if t.state != TxnOngoing && !t.preparing() { // prepared: offsets still staged
			continue
		}
		for tp := range t.offsets[group] {
			if out == nil {
				out = map[TopicPartition]bool{}
			}
			out[tp] = true
		}
	}
	return out
}

// Transactions lists every transactional id's state, sorted by id.
func (f *FSM) Transactions() []TxnView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]TxnView, 0, len(f.txns))
	for id, t := range f.txns {
		out = append(out, t.view(id))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}

// Transaction returns one transactional id's state.
func (f *FSM) Transaction(id string) (TxnView, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.txns[id]
	if !ok {
		return TxnView{}, false
	}
	return t.view(id), true
}

func (t *txn) view(id string) TxnView {
	return TxnView{TransactionalID: id, ProducerID: t.producerID, Epoch: t.epoch, State: t.state, TimeoutMs: t.timeoutMs,
		StartMs: t.startMs, UpdateMs: t.updateMs, Partitions: append([]TopicPartition(nil), t.partitions...), Groups: append([]string(nil), t.groups...)}
}

// encodeTxnsLocked writes the transactions section of a snapshot.
func (f *FSM) encodeTxnsLocked(e *enc) {
	ids := make([]string, 0, len(f.txns))
	for id := range f.txns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	e.uvar(uint64(len(ids)))
	for _, id := range ids {
		t := f.txns[id]
		e.str(id)
		e.i64(t.producerID)
		e.i64(t.lastProducerID)
		e.i16(t.epoch)
		e.i16(t.lastEpoch)
		e.i32(t.timeoutMs)
		e.u8(uint8(t.state))
		e.i64(t.startMs)
		e.i64(t.updateMs)
		e.uvar(uint64(len(t.partitions)))
		for _, tp := range t.partitions {
			e.str(tp.Topic)
			e.i32(tp.Partition)
		}
		encodeStrings(e, t.groups)
		groups := make([]string, 0, len(t.offsets))
		for g := range t.offsets {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		e.uvar(uint64(len(groups)))
		for _, g := range groups {
			e.str(g)
			tps := make([]TopicPartition, 0, len(t.offsets[g]))
			for tp := range t.offsets[g] {
				tps = append(tps, tp)
			}
			sort.Slice(tps, func(i, j int) bool {
				return tps[i].Topic < tps[j].Topic || tps[i].Topic == tps[j].Topic && tps[i].Partition < tps[j].Partition
			})
			e.uvar(uint64(len(tps)))
			for _, tp := range tps {
				o := t.offsets[g][tp]
				e.str(tp.Topic)
				e.i32(tp.Partition)
				e.i64(o.Offset)
				e.i32(o.LeaderEpoch)
				e.str(o.Metadata)
			}
		}
	}
	// Then every partition's open and aborted transactions.
	type part struct {
		topic string
		p     *Partition
	}
	var parts []part
	for _, t := range f.sortedTopicsLocked() {
		for _, p := range t.Partitions {
			if len(p.ongoing) > 0 || len(p.aborted) > 0 {
				parts = append(parts, part{t.Name, p})
			}
		}
	}
	e.uvar(uint64(len(parts)))
	for _, pt := range parts {
		p := pt.p
		e.str(pt.topic)
		e.i32(p.Index)
		p.encode(e)
	}
}

// txnMeta is the decoded transactions section.
type txnMeta struct {
	txns  map[string]*txn
	parts map[TopicPartition]*partTxns
}

func decodeTxns(d *dec) *txnMeta {
	m := &txnMeta{txns: map[string]*txn{}, parts: map[TopicPartition]*partTxns{}}
	n := d.count(40)
	for i := 0; i < n && d.err == nil; i++ {
		id := d.str()
		t := &txn{producerID: d.i64(), lastProducerID: d.i64(), epoch: d.i16(), lastEpoch: d.i16(), timeoutMs: d.i32(),
			state: TxnState(d.u8()), startMs: d.i64(), updateMs: d.i64()}
		np := d.count(5)
		for j := 0; j < np && d.err == nil; j++ {
			t.partitions = append(t.partitions, TopicPartition{Topic: d.str(), Partition: d.i32()})
		}
		if gs := decodeStrings(d); len(gs) > 0 {
			t.groups = gs
		}
		ng := d.count(2)
		for j := 0; j < ng && d.err == nil; j++ {
			g := d.str()
			if t.offsets == nil {
				t.offsets = map[string]map[TopicPartition]Offset{}
			}
			staged := map[TopicPartition]Offset{}
			no := d.count(18)
			for k := 0; k < no && d.err == nil; k++ {
				tp := TopicPartition{Topic: d.str(), Partition: d.i32()}
				staged[tp] = Offset{Offset: d.i64(), LeaderEpoch: d.i32(), Metadata: d.str()}
			}
			t.offsets[g] = staged
		}
		m.txns[id] = t
	}
	np := d.count(7)
	for i := 0; i < np && d.err == nil; i++ {
		tp := TopicPartition{Topic: d.str(), Partition: d.i32()}
		pt := decodePartTxns(d)
		m.parts[tp] = &pt
	}
	return m
}

// TxnMarker is one marker of a WriteTxnMarkers command: the producer, its
// epoch, commit or abort, and the partitions to write it into.
type TxnMarker struct {
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32 // in the marker record, and kept per producer to fence older ones
	Partitions       []TopicPartition
}

// WriteTxnMarkers writes transaction markers into partitions on an
// administrator's request (Kafka's WriteTxnMarkers, which kafka-transactions
// abort sends to the partition leader), outside the coordinator: the
// transactional id's state is not touched, as in Kafka, where the
// coordinator's own markers go through the same API. NowMs is the leader's
// time, the markers' timestamp.
type WriteTxnMarkers struct {
	NowMs   int64
	Markers []TxnMarker
}

func (*WriteTxnMarkers) Kind() Kind { return KindWriteTxnMarkers }
func (c *WriteTxnMarkers) encode(e *enc) {
	e.i64(c.NowMs)
	e.uvar(uint64(len(c.Markers)))
	for _, m := range c.Markers {
		e.i64(m.ProducerID)
		e.i16(m.Epoch)
		e.bool(m.Commit)
		e.i32(m.CoordinatorEpoch)
		encodeTopicPartitions(e, m.Partitions)
	}
}

func decodeWriteTxnMarkers(d *dec) *WriteTxnMarkers {
	c := &WriteTxnMarkers{NowMs: d.i64()}
	n := d.count(16)
	for i := 0; i < n && d.err == nil; i++ {
		m := TxnMarker{ProducerID: d.i64(), Epoch: d.i16(), Commit: d.bool(), CoordinatorEpoch: d.i32()}
		m.Partitions = decodeTopicPartitions(d)
		c.Markers = append(c.Markers, m)
	}
	return c
}

// applyWriteTxnMarkers answers a code per partition, markers in order and
// each marker's partitions in order, as Kafka's broker does: NONE when the
// marker is written (also for a producer with no open transaction there, or
// none known at all), UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH
// when the partition has seen a newer epoch of the producer, or
// TRANSACTION_COORDINATOR_FENCED when an earlier marker for it here carried
// a newer coordinator epoch.
func (f *FSM) applyWriteTxnMarkers(c *WriteTxnMarkers) any {
	r := &TxnResult{}
	for _, m := range c.Markers {
		marker := markerBatch(m.ProducerID, m.Epoch, m.Commit, c.NowMs, m.CoordinatorEpoch)
		for _, tp := range m.Partitions {
			p := f.Partition(tp.Topic, tp.Partition)
			if p == nil {
				r.Codes = append(r.Codes, ErrUnknownTopicOrPartition)
				continue
			}
			code, err := p.writeMarkerChecked(marker, &m, c.NowMs)
			if err != nil {
				return ioFailure(fmt.Sprintf("transaction marker in %s/%d", tp.Topic, tp.Partition), err)
			}
			r.Codes = append(r.Codes, code)
		}
	}
	return r
}

// writeMarkerChecked writes an administrator's marker unless the partition
// has seen a newer epoch of the producer, or a newer coordinator epoch in an
// earlier such marker (Kafka's ProducerAppendInfo checks of a marker, in
// that order), and keeps its coordinator epoch and time. A producer the
// partition has no state of gets some, at the marker's epoch, as in Kafka:
// DescribeProducers lists it, and its older epochs are refused.
func (p *Partition) writeMarkerChecked(marker []byte, m *TxnMarker, now int64) (int16, error) {
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	ps := p.producers[m.ProducerID]
	switch {
	case ps != nil && m.Epoch < ps.epoch:
		return ErrInvalidProducerEpoch, nil
	case ps != nil && ps.hasCoordEpoch && m.CoordinatorEpoch < ps.coordEpoch:
		return ErrTransactionCoordinatorFenced, nil
	}
	if err := p.writeMarkerLocked(marker, m.ProducerID, m.Epoch, m.Commit, now); err != nil {
		return ErrNone, err
	}
	if ps == nil {
		p.evictProducers(now)
		ps = &producerState{epoch: m.Epoch}
		p.producers[m.ProducerID] = ps
	}
	// As Kafka's marker append: its time is the producer's last. Only here,
	// not for the coordinator's own markers, which releases before this
	// level apply without it.
	ps.coordEpoch, ps.hasCoordEpoch, ps.lastTs = m.CoordinatorEpoch, true, now
	return ErrNone, nil
}

// encodeCoordEpochsLocked writes the coordinator epochs WriteTxnMarkers
// left on producers: every partition's, by topic, partition and producer.
func (f *FSM) encodeCoordEpochsLocked(e *enc) {
	type entry struct {
		topic     string
		partition int32
		pid       int64
		epoch     int32
	}
	var out []entry
	for _, t := range f.sortedTopicsLocked() {
		for _, p := range t.Partitions {
			p.prodMu.Lock()
			var pids []int64
			for pid, ps := range p.producers {
				if ps.hasCoordEpoch {
					pids = append(pids, pid)
				}
			}
			sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
			for _, pid := range pids {
				out = append(out, entry{t.Name, p.Index, pid, p.producers[pid].coordEpoch})
			}
			p.prodMu.Unlock()
		}
	}
	e.uvar(uint64(len(out)))
	for _, x := range out {
		e.str(x.topic)
		e.i32(x.partition)
		e.i64(x.pid)
		e.i32(x.epoch)
	}
}

// decodeCoordEpochs puts the coordinator epochs back on the producers the
// snapshot's partitions already hold.
func decodeCoordEpochs(d *dec, topics []metaTopic) {
	byName := make(map[string]*metaTopic, len(topics))
	for i := range topics {
		byName[topics[i].name] = &topics[i]
	}
	n := d.count(17)
	for i := 0; i < n && d.err == nil; i++ {
		topic, partition, pid, epoch := d.str(), d.i32(), d.i64(), d.i32()
		if d.err != nil {
			return
		}
		t := byName[topic]
		if t == nil || partition < 0 || int(partition) >= len(t.parts) || t.parts[partition].producers[pid] == nil {
			d.err = fmt.Errorf("coordinator epoch of producer %d in %s/%d, which has no state of it", pid, topic, partition)
			return
		}
		ps := t.parts[partition].producers[pid]
		ps.coordEpoch, ps.hasCoordEpoch = epoch, true
	}
}
