package embedded

import "github.com/kgate/kgate/gateway"

var _ gateway.TransactionalBackend = (*Backend)(nil)

// LastStableOffset is the partition's last stable offset, as applied here.
func (b *Backend) LastStableOffset(topic string, p int32) (int64, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return -1, err
	}
	return part.LastStableOffset(), nil
}

// AbortedTransactions lists the partition's aborted transactions with
// records in [from, to).
func (b *Backend) AbortedTransactions(topic string, p int32, from, to int64) []gateway.AbortedTransaction {
	part := b.fsm.Partition(topic, p)
	if part == nil {
		return nil
	}
	aborted := part.AbortedTxns(from, to)
	out := make([]gateway.AbortedTransaction, len(aborted))
	for i, a := range aborted {
		out[i] = gateway.AbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
	}
	return out
}
