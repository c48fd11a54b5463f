package embedded

import "github.com/kgate/kgate/gateway"

var _ gateway.ProducerDescriber = (*Backend)(nil)

// Producers reports a partition's idempotent producers from the replicated
// state; the last timestamp is the leader's time of their last append.
func (b *Backend) Producers(topic string, p int32) ([]gateway.ProducerState, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return nil, err
	}
	var out []gateway.ProducerState
	for _, pi := range part.Producers() {
		out = append(out, gateway.ProducerState{ID: pi.ID, Epoch: pi.Epoch, LastSequence: pi.LastSequence, LastTimestamp: pi.LastAppendMs,
			TxnStart: pi.TxnStart})
	}
	return out, nil
}
