package iggybackend

// Transactions over Iggy. The records of a transactional batch and the
// markers are Iggy messages (encoding.go: flags TXN and CONTROL); which
// transactions are open or aborted in a partition is replicated state in
// the FSM (fsm/external_txns.go), which the coordinator keeps up to date:
// it reads a partition's next offset before adding it to a transaction,
// and records each marker's offset when it completes one.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
)

// TxnState is the replicated transaction state the backend reads (the
// FSM).
type TxnState interface {
	TxnProducerState(pid int64) (int16, fsm.TxnState, bool)
	ExtOngoing(tp fsm.TopicPartition, pid int64) bool
	ExtLastStableOffset(tp fsm.TopicPartition, hw int64) int64
	ExtOpenTxns(tp fsm.TopicPartition) map[int64]int64
	ExtAbortedTxns(tp fsm.TopicPartition, from, to int64) []fsm.AbortedTxn
}

// caughtUpWait bounds how long a transactional batch waits for this
// node's FSM to apply the AddPartitionsToTxn the coordinator answered, and
// a marker for it to apply the end of the transaction; txnCheckEvery is
// how often they look (the FSM has no apply notification;
// cluster.Node.AwaitCaughtUp polls as often).
const (
	caughtUpWait  = 2 * time.Second
	txnCheckEvery = 5 * time.Millisecond
)

// txnVerdict tells whether a transactional batch may be written now, as
// this node's FSM has it: its producer must not be fenced (an older epoch
// than the coordinator's), and the partition must be in its transaction,
// which must still be open (not being committed or aborted). It answers
// NOT_ENOUGH_REPLICAS when the FSM may just not have caught up yet: also
// for a transaction being completed, which may be the producer's previous
// one (the first batch of the next can reach this node before it applies
// the completion).
func (b *Backend) txnVerdict(pb gateway.ProduceBatch) error {
	st := b.cfg.Txns
	if st == nil {
		return kerr.InvalidTxnState
	}
	epoch, state, ok := st.TxnProducerState(pb.ProducerID)
	switch {
	case ok && pb.ProducerEpoch < epoch:
		return kerr.InvalidProducerEpoch
	case ok && pb.ProducerEpoch == epoch && state == fsm.TxnOngoing &&
		st.ExtOngoing(fsm.TopicPartition{Topic: pb.Topic, Partition: pb.Partition}, pb.ProducerID):
		return nil
	}
	return kerr.NotEnoughReplicas
}

// checkTxnBatch decides whether a transactional batch may be queued
// (txnVerdict). Without the partition in the open transaction here, a
// read_committed fetch through this node could take the batch for a
// committed one. A node whose FSM lags the coordinator waits until it has
// applied the partition's addition, at most caughtUpWait, then answers
// NOT_ENOUGH_REPLICAS, which the producer retries. The partition's queue
// checks again right before the send (recheckTxn): the marker may be
// queued in between.
func (b *Backend) checkTxnBatch(ctx context.Context, pb gateway.ProduceBatch) error {
	err := b.txnVerdict(pb)
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		return err
	}
	// This node's FSM has not applied the AddPartitionsToTxn yet (the
	// coordinator answered once a majority had it): wait for it, checking
	// as entries are applied here.
	wctx, cancel := context.WithTimeout(ctx, caughtUpWait)
	defer cancel()
	tick := time.NewTicker(txnCheckEvery)
	defer tick.Stop()
	for errors.Is(err, kerr.NotEnoughReplicas) {
		select {
		case <-wctx.Done():
			return err
		case <-tick.C:
		}
		err = b.txnVerdict(pb)
	}
	return err
}

// recheckTxn is txnVerdict in the partition's queue, right before the
// send: a batch that passed checkTxnBatch while the transaction was open
// may meet it ending now. Markers are queued only once this node's FSM
// has the transaction ending (WriteMarker), so every batch this check lets
// through is in Iggy before the marker, and none after it. Nothing waits
// here: the batch was in the transaction, so a failure now means the
// transaction ended (INVALID_TXN_STATE) or its producer was fenced.
func (b *Backend) recheckTxn(pb gateway.ProduceBatch) error {
	if err := b.txnVerdict(pb); errors.Is(err, kerr.NotEnoughReplicas) {
		return kerr.InvalidTxnState
	} else if err != nil {
		return err
	}
	return nil
}

// LastStableOffset is the first offset of the partition's oldest open
// transaction, or its high watermark.
func (b *Backend) LastStableOffset(topic string, partition int32) (int64, error) {
	_, p, err := b.part(topic, partition)
	if err != nil {
		return -1, err
	}
	_, end, _ := p.bounds()
	if b.cfg.Txns == nil {
		return end, nil
	}
	return b.cfg.Txns.ExtLastStableOffset(fsm.TopicPartition{Topic: topic, Partition: partition}, end), nil
}

// AbortedTransactions lists the aborted transactions with records in
// [from, to).
func (b *Backend) AbortedTransactions(topic string, partition int32, from, to int64) []gateway.AbortedTransaction {
	if b.cfg.Txns == nil {
		return nil
	}
	var out []gateway.AbortedTransaction
	for _, a := range b.cfg.Txns.ExtAbortedTxns(fsm.TopicPartition{Topic: topic, Partition: partition}, from, to) {
		out = append(out, gateway.AbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	return out
}

// NextOffsets reads each partition's next offset from Iggy (the
// coordinator's bound below a transaction's first record there).
func (b *Backend) NextOffsets(ctx context.Context, parts []fsm.TopicPartition) ([]int64, []int16) {
	return b.freshBounds(ctx, parts, false)
}

// LogStarts reads each partition's log start offset from Iggy (below it,
// the coordinator forgets aborted transactions).
func (b *Backend) LogStarts(ctx context.Context, parts []fsm.TopicPartition) ([]int64, []int16) {
	return b.freshBounds(ctx, parts, true)
}

// freshBounds re-reads the partitions' bounds from Iggy and returns each
// one's next offset, or log start.
func (b *Backend) freshBounds(ctx context.Context, parts []fsm.TopicPartition, start bool) ([]int64, []int16) {
	offsets := make([]int64, len(parts))
	codes := make([]int16, len(parts))
	fresh := map[*topic]error{}
	for i, tp := range parts {
		t, p, err := b.part(tp.Topic, tp.Partition)
		if err == nil {
			ferr, done := fresh[t]
			if !done {
				ferr = b.refreshBounds(ctx, t)
				fresh[t] = ferr
			}
			err = ferr
			if err != nil {
				b.noteError("offsets", tp.Topic, tp.Partition, err)
				err = kafkaError(err)
			}
		}
		if err != nil {
			codes[i] = gateway.ErrorCode(err)
			continue
		}
		if start {
			offsets[i], _, _ = p.bounds()
		} else {
			_, offsets[i], _ = p.bounds()
		}
	}
	return offsets, codes
}

// ErrTxnNotEnding is WriteMarker's answer when this node's FSM does not
// have the transaction in PrepareCommit/PrepareAbort (at the marker's
// epoch) within caughtUpWait: it is complete already, or has moved on.
var ErrTxnNotEnding = errors.New("the transaction is not being completed")

// awaitEnding waits, at most caughtUpWait, until this node's FSM has the
// producer's transaction out of Ongoing at the marker's epoch, and tells
// whether it is then being completed as the marker says.
func (b *Backend) awaitEnding(ctx context.Context, producerID int64, epoch int16, commit bool) error {
	st := b.cfg.Txns
	if st == nil {
		return ErrTxnNotEnding
	}
	want := fsm.TxnPrepareAbort
	if commit {
		want = fsm.TxnPrepareCommit
	}
	wctx, cancel := context.WithTimeout(ctx, caughtUpWait)
	defer cancel()
	tick := time.NewTicker(txnCheckEvery)
	defer tick.Stop()
	for {
		e, state, ok := st.TxnProducerState(producerID)
		switch {
		case ok && e == epoch && state == want:
			return nil
		case ok && (e > epoch || e == epoch && state != fsm.TxnOngoing):
			return ErrTxnNotEnding
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return ErrTxnNotEnding
		case <-tick.C:
		}
	}
}

// WriteMarker appends a transaction marker to each partition, through the
// partition's send queue, and returns their offsets: -1 for a partition
// whose topic is gone. It queues the markers only once this node's FSM has
// the transaction ending (awaitEnding), so that the queue's check
// (recheckTxn) refuses every batch of the transaction queued after them;
// the batches it let through are ahead in the queue, and so in Iggy.
// ErrTxnNotEnding when the transaction is not (or no longer) being
// completed: a marker then could land inside the producer's next
// transaction.
func (b *Backend) WriteMarker(ctx context.Context, producerID int64, epoch int16, commit bool, nowMs int64, parts []fsm.TopicPartition) ([]int64, error) {
	m, err := EncodeMarker(producerID, epoch, commit, 0, nowMs)
	if err != nil {
		return nil, err
	}
	if err := b.awaitEnding(ctx, producerID, epoch, commit); err != nil {
		return nil, err
	}
	return b.writeMarkers(ctx, m, parts)
}

// WriteAdminMarker appends an administrator's marker (WriteTxnMarkers,
// kafka-transactions abort) to each partition through its send queue,
// whatever the state of the producer's transaction, and returns their
// offsets: -1 for a partition whose topic is gone.
func (b *Backend) WriteAdminMarker(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64,
	parts []fsm.TopicPartition) ([]int64, error) {
	m, err := EncodeMarker(producerID, epoch, commit, coordinatorEpoch, nowMs)
	if err != nil {
		return nil, err
	}
	return b.writeMarkers(ctx, m, parts)
}

// writeMarkers queues the marker message m in each partition and waits
// for its offsets.
func (b *Backend) writeMarkers(ctx context.Context, m iggy.Message, parts []fsm.TopicPartition) ([]int64, error) {
	items := make([]*sendItem, len(parts))
	for i, tp := range parts {
		it := &sendItem{batch: gateway.ProduceBatch{Topic: tp.Topic, Partition: tp.Partition, ProducerID: -1},
			msgs: []iggy.Message{m}, control: true, done: make(chan struct{}), size: len(m.Payload) + 64}
		items[i] = it
		_, p, perr := b.part(tp.Topic, tp.Partition)
		if perr != nil {
			it.finish(perr)
			continue
		}
		if !b.enqueue(p, it) {
			it.finish(kerr.KafkaStorageError)
		}
	}
	offsets := make([]int64, len(parts))
	for i, it := range items {
		select {
		case <-it.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if errors.Is(it.res.Err, kerr.UnknownTopicOrPartition) {
			// Deleted since (as the embedded backend skips a deleted
			// topic): no marker, and nothing left to read there.
			offsets[i] = -1
			continue
		}
		if it.res.Err != nil {
			return nil, fmt.Errorf("marker in %s/%d: %w", parts[i].Topic, parts[i].Partition, it.res.Err)
		}
		if it.res.BaseOffset < 0 {
			return nil, fmt.Errorf("marker in %s/%d: iggy gave no offset", parts[i].Topic, parts[i].Partition)
		}
		offsets[i] = it.res.BaseOffset
	}
	return offsets, nil
}
