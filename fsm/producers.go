package fsm

import "sort"

// ProducerInfo is one idempotent producer's state in a partition, as
// Kafka's DescribeProducers reports it.
type ProducerInfo struct {
	ID           int64
	Epoch        int16
	LastSequence int32 // of its last batch; -1 if it has none in this epoch
	LastAppendMs int64 // the leader's time stamped into its last append
	TxnStart     int64 // first offset of its open transaction here; -1 when none
	// CoordinatorEpoch is that of the last WriteTxnMarkers marker for it
	// here; -1 when none.
	CoordinatorEpoch int32
}

// Producers lists the partition's idempotent producers by id.
func (p *Partition) Producers() []ProducerInfo {
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	out := make([]ProducerInfo, 0, len(p.producers))
	for id, ps := range p.producers {
		pi := ProducerInfo{ID: id, Epoch: ps.epoch, LastSequence: -1, LastAppendMs: ps.lastTs, TxnStart: -1, CoordinatorEpoch: -1}
		if ps.hasCoordEpoch {
			pi.CoordinatorEpoch = ps.coordEpoch
		}
		if first, ok := p.ongoing[id]; ok {
			pi.TxnStart = first
		}
		if n := len(ps.recent); n > 0 {
			pi.LastSequence = ps.recent[n-1].lastSeq
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
