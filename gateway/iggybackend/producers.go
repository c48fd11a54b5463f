package iggybackend

import (
	"sort"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
)

var _ gateway.ProducerDescriber = (*Backend)(nil)

// Producers reports a partition's idempotent producers as DescribeProducers
// shows them. The sequences are what this node knows as the partition's
// writer (the node leading it, where producers send): their last sequence
// and the time their last batch was written (or Iggy's append time of it,
// when learned from the partition's tail). The open transactions are the
// replicated state every node has: a producer with one there is listed on
// every node, with its start, which is the partition's next offset when the
// partition joined the transaction (its records come at or after it).
// The coordinator epoch is -1: kgate's coordinator has none.
func (b *Backend) Producers(topic string, partition int32) ([]gateway.ProducerState, error) {
	_, p, err := b.part(topic, partition)
	if err != nil {
		return nil, err
	}
	open := map[int64]int64{}
	if b.cfg.Txns != nil {
		open = b.cfg.Txns.ExtOpenTxns(fsm.TopicPartition{Topic: topic, Partition: partition})
	}
	out := []gateway.ProducerState{}
	p.prodMu.Lock()
	for id, ps := range p.producers {
		st := gateway.ProducerState{ID: id, Epoch: ps.epoch, LastSequence: ps.lastSeq, LastTimestamp: ps.lastTs,
			TxnStart: -1, CoordinatorEpoch: -1}
		if first, ok := open[id]; ok {
			st.TxnStart = first
			delete(open, id)
		}
		out = append(out, st)
	}
	p.prodMu.Unlock()
	for id, first := range open {
		epoch, _, _ := b.cfg.Txns.TxnProducerState(id)
		out = append(out, gateway.ProducerState{ID: id, Epoch: epoch, LastSequence: -1, LastTimestamp: -1,
			TxnStart: first, CoordinatorEpoch: -1})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
