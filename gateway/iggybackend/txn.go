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
	TxnProducerEpoch(pid int64) (int16, bool)
	ExtOngoing(tp fsm.TopicPartition, pid int64) bool
	ExtLastStableOffset(tp fsm.TopicPartition, hw int64) int64
	ExtAbortedTxns(tp fsm.TopicPartition, from, to int64) []fsm.AbortedTxn
}

// caughtUpWait bounds how long a transactional batch waits for this
// node's FSM to apply the AddPartitionsToTxn the coordinator answered, and
// txnCheckEvery is how often it looks (the FSM has no apply notification;
// cluster.Node.AwaitCaughtUp polls as often).
const (
	caughtUpWait  = 2 * time.Second
	txnCheckEvery = 5 * time.Millisecond
)

// checkTxnBatch decides whether a transactional batch may be written: its
// producer must not be fenced (an older epoch than the coordinator's), and
// the partition must be in its open transaction here, as this node's FSM
// knows it. Without the latter, a read_committed fetch through this node
// could take the batch for a committed one. A node whose FSM lags the
// coordinator waits until it has applied the partition's addition, at most
// caughtUpWait, then answers NOT_ENOUGH_REPLICAS, which the producer
// retries.
func (b *Backend) checkTxnBatch(ctx context.Context, pb gateway.ProduceBatch) error {
	st := b.cfg.Txns
	if st == nil {
		return kerr.InvalidTxnState
	}
	tp := fsm.TopicPartition{Topic: pb.Topic, Partition: pb.Partition}
	check := func() error {
		epoch, ok := st.TxnProducerEpoch(pb.ProducerID)
		switch {
		case ok && pb.ProducerEpoch < epoch:
			return kerr.InvalidProducerEpoch
		case ok && pb.ProducerEpoch == epoch && st.ExtOngoing(tp, pb.ProducerID):
			return nil
		}
		return kerr.NotEnoughReplicas
	}
	err := check()
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
		err = check()
	}
	return err
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
		_, offsets[i], _ = p.bounds()
	}
	return offsets, codes
}

// WriteMarker appends a transaction marker to each partition, through the
// partition's send queue, and returns their offsets: -1 for a partition
// whose topic is gone.
func (b *Backend) WriteMarker(ctx context.Context, producerID int64, epoch int16, commit bool, nowMs int64, parts []fsm.TopicPartition) ([]int64, error) {
	m, err := EncodeMarker(producerID, epoch, commit, 0, nowMs)
	if err != nil {
		return nil, err
	}
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
