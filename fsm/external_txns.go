package fsm

import (
	"sort"
)

// Transactions over partitions kept outside the FSM (the Iggy backend).
// The records and markers are in Iggy; what read_committed needs of them,
// each partition's open transactions (producer → first offset) and its
// aborted ones, is here, so every node answers the same after any restart
// without reading the partitions back. Ending such a transaction takes
// three steps, as in Kafka: EndTxn moves it to PrepareCommit/PrepareAbort,
// the coordinator writes the markers into the partitions, and CompleteTxn,
// carrying the markers' offsets, completes it.

// extPartition is one external partition's transaction state.
type extPartition struct {
	partTxns
	// end is past the last marker CompleteTxn recorded here: a producer's
	// next transaction starts at or after it (its previous one's marker
	// is below it), whatever offset the coordinator read.
	end int64
}

// AddExtTxnPartitions adds external partitions to the producer's
// transaction, starting it if none is ongoing: AddPartitionsToTxn on the
// Iggy backend. The coordinator has checked the partitions exist and read
// each one's next offset (Firsts[i] for Partitions[i]) before proposing:
// the transaction's records there come at or after it.
type AddExtTxnPartitions struct {
	TxnProducer
	Partitions []TopicPartition
	Firsts     []int64
}

func (*AddExtTxnPartitions) Kind() Kind { return KindAddExtTxnPartitions }
func (c *AddExtTxnPartitions) encode(e *enc) {
	c.TxnProducer.encode(e)
	encodeTopicPartitions(e, c.Partitions)
	e.uvar(uint64(len(c.Firsts)))
	for _, o := range c.Firsts {
		e.i64(o)
	}
}

func decodeAddExtTxnPartitions(d *dec) *AddExtTxnPartitions {
	c := &AddExtTxnPartitions{TxnProducer: decodeTxnProducer(d)}
	c.Partitions = decodeTopicPartitions(d)
	n := d.count(8)
	for i := 0; i < n && d.err == nil; i++ {
		c.Firsts = append(c.Firsts, d.i64())
	}
	return c
}

// CompleteTxn completes a transaction in PrepareCommit or PrepareAbort
// once the coordinator has written its markers: Offsets[i] is the marker's
// offset in Partitions[i], -1 when the partition was deleted. A retry after
// completion answers NONE.
type CompleteTxn struct {
	TxnProducer
	Commit     bool
	Partitions []TopicPartition
	Offsets    []int64
}

func (*CompleteTxn) Kind() Kind { return KindCompleteTxn }
func (c *CompleteTxn) encode(e *enc) {
	c.TxnProducer.encode(e)
	e.bool(c.Commit)
	encodeTopicPartitions(e, c.Partitions)
	e.uvar(uint64(len(c.Offsets)))
	for _, o := range c.Offsets {
		e.i64(o)
	}
}

func decodeCompleteTxn(d *dec) *CompleteTxn {
	c := &CompleteTxn{TxnProducer: decodeTxnProducer(d), Commit: d.bool()}
	c.Partitions = decodeTopicPartitions(d)
	n := d.count(8)
	for i := 0; i < n && d.err == nil; i++ {
		c.Offsets = append(c.Offsets, d.i64())
	}
	return c
}

func (f *FSM) applyAddExtTxnPartitions(c *AddExtTxnPartitions) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(c.Firsts) != len(c.Partitions) {
		return &TxnResult{Code: ErrInvalidRequest}
	}
	t, code := f.checkProducerLocked(&c.TxnProducer)
	if code != ErrNone {
		return &TxnResult{Code: code}
	}
	if t.preparing() {
		return &TxnResult{Code: ErrConcurrentTransactions}
	}
	t.beginLocked(c.NowMs)
	for i, tp := range c.Partitions {
		t.partitions = insertSorted(t.partitions, tp, tpLess)
		p := f.ext[tp]
		if p == nil {
			p = &extPartition{partTxns: newPartTxns()}
			f.ext[tp] = p
		}
		if _, open := p.ongoing[t.producerID]; !open {
			p.ongoing[t.producerID] = max(c.Firsts[i], p.end)
		}
	}
	return &TxnResult{Codes: make([]int16, len(c.Partitions))}
}

// externalLocked tells whether t's transaction has partitions outside the
// FSM, whose markers the coordinator writes.
func (f *FSM) externalLocked(t *txn) bool {
	for _, tp := range t.partitions {
		if p := f.ext[tp]; p != nil {
			if _, open := p.ongoing[t.producerID]; open {
				return true
			}
		}
	}
	return false
}

func (f *FSM) applyCompleteTxn(c *CompleteTxn) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(c.Offsets) != len(c.Partitions) {
		return &TxnResult{Code: ErrInvalidRequest}
	}
	t, code := f.checkProducerLocked(&c.TxnProducer)
	if code != ErrNone {
		return &TxnResult{Code: code}
	}
	switch {
	case c.Commit && t.state == TxnCompleteCommit, !c.Commit && t.state == TxnCompleteAbort:
		return &TxnResult{} // a retry
	case c.Commit && t.state != TxnPrepareCommit, !c.Commit && t.state != TxnPrepareAbort:
		return &TxnResult{Code: ErrInvalidTxnState}
	}
	for i, tp := range c.Partitions {
		p := f.ext[tp]
		if p == nil {
			continue
		}
		marker := c.Offsets[i] // -1: the partition is gone, no marker
		p.end = max(p.end, marker+1)
		p.close(t.producerID, marker, c.Commit)
	}
	f.finishTxnLocked(t, c.Commit, c.NowMs)
	return &TxnResult{}
}

// ExtTxnMarkers records an administrator's markers (WriteTxnMarkers,
// kafka-transactions abort) that the coordinator wrote into external
// partitions: Offsets[i] is the offset of the i-th marker partition, markers
// in order and each marker's partitions in order. Only written markers are
// listed (the coordinator answers the others' codes). Each closes its
// producer's open transaction in the partition, if any, as Kafka's marker
// does; the coordinator's transaction state is not touched.
type ExtTxnMarkers struct {
	Markers []TxnMarker
	Offsets []int64
}

func (*ExtTxnMarkers) Kind() Kind { return KindExtTxnMarkers }
func (c *ExtTxnMarkers) encode(e *enc) {
	(&WriteTxnMarkers{Markers: c.Markers}).encode(e)
	e.uvar(uint64(len(c.Offsets)))
	for _, o := range c.Offsets {
		e.i64(o)
	}
}

func decodeExtTxnMarkers(d *dec) *ExtTxnMarkers {
	c := &ExtTxnMarkers{Markers: decodeWriteTxnMarkers(d).Markers}
	n := d.count(8)
	for i := 0; i < n && d.err == nil; i++ {
		c.Offsets = append(c.Offsets, d.i64())
	}
	return c
}

func (f *FSM) applyExtTxnMarkers(c *ExtTxnMarkers) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range c.Markers {
		n += len(m.Partitions)
	}
	if n != len(c.Offsets) {
		return &TxnResult{Code: ErrInvalidRequest}
	}
	i := 0
	for _, m := range c.Markers {
		for _, tp := range m.Partitions {
			off := c.Offsets[i]
			i++
			if off < 0 {
				continue
			}
			p := f.ext[tp]
			if p == nil {
				p = &extPartition{partTxns: newPartTxns()}
				f.ext[tp] = p
			}
			p.end = max(p.end, off+1)
			p.close(m.ProducerID, off, m.Commit)
		}
	}
	return &TxnResult{Codes: make([]int16, n)}
}

// PruneExtAborted forgets, in each external partition, the aborted
// transactions whose marker is below Starts[i], the log start the leader
// read from the backend for Partitions[i] (Iggy's retention removed their
// records: no read reaches them), as the embedded log prunes at TrimLog.
type PruneExtAborted struct {
	Partitions []TopicPartition
	Starts     []int64
}

func (*PruneExtAborted) Kind() Kind { return KindPruneExtAborted }
func (c *PruneExtAborted) encode(e *enc) {
	encodeTopicPartitions(e, c.Partitions)
	e.uvar(uint64(len(c.Starts)))
	for _, o := range c.Starts {
		e.i64(o)
	}
}

func decodePruneExtAborted(d *dec) *PruneExtAborted {
	c := &PruneExtAborted{Partitions: decodeTopicPartitions(d)}
	n := d.count(8)
	for i := 0; i < n && d.err == nil; i++ {
		c.Starts = append(c.Starts, d.i64())
	}
	return c
}

func (f *FSM) applyPruneExtAborted(c *PruneExtAborted) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(c.Starts) != len(c.Partitions) {
		return &TxnResult{Code: ErrInvalidRequest}
	}
	for i, tp := range c.Partitions {
		if p := f.ext[tp]; p != nil {
			p.prune(c.Starts[i])
		}
	}
	return &TxnResult{}
}

// ExtOldestAborted lists the external partitions that hold aborted
// transactions, with the marker offset of the oldest: what PruneExtAborted
// could forget once the log start passes it.
func (f *FSM) ExtOldestAborted() map[TopicPartition]int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[TopicPartition]int64{}
	for tp, p := range f.ext {
		for _, a := range p.aborted {
			if o, ok := out[tp]; !ok || a.LastOffset < o {
				out[tp] = a.LastOffset
			}
		}
	}
	return out
}

// ExtLastStableOffset is an external partition's last stable offset given
// its high watermark: the first offset of its oldest open transaction, or
// hw when none is open.
func (f *FSM) ExtLastStableOffset(tp TopicPartition, hw int64) int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p := f.ext[tp]; p != nil {
		return p.lso(hw)
	}
	return hw
}

// ExtOpenTxns lists an external partition's open transactions: producer
// id → the partition's next offset when the partition joined it (the
// transaction's records come at or after it).
func (f *FSM) ExtOpenTxns(tp TopicPartition) map[int64]int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[int64]int64{}
	if p := f.ext[tp]; p != nil {
		for pid, first := range p.ongoing {
			out[pid] = first
		}
	}
	return out
}

// ExtAbortedTxns lists an external partition's aborted transactions with
// records in [from, to), oldest first.
func (f *FSM) ExtAbortedTxns(tp TopicPartition, from, to int64) []AbortedTxn {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p := f.ext[tp]; p != nil {
		return p.abortedIn(from, to)
	}
	return nil
}

// TxnProducerEpoch is the current epoch of a transactional producer id.
func (f *FSM) TxnProducerEpoch(pid int64) (int16, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	id, ok := f.txnByPID[pid]
	if !ok {
		return 0, false
	}
	return f.txns[id].epoch, true
}

// TxnProducerState is a transactional producer id's current epoch and
// the state of its transaction.
func (f *FSM) TxnProducerState(pid int64) (int16, TxnState, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	id, ok := f.txnByPID[pid]
	if !ok {
		return 0, TxnEmpty, false
	}
	t := f.txns[id]
	return t.epoch, t.state, true
}

// encodeExtTxnsLocked writes the external partitions' section: by topic
// and partition, the open transactions by producer, the aborted ones and
// the end.
func (f *FSM) encodeExtTxnsLocked(e *enc) {
	tps := make([]TopicPartition, 0, len(f.ext))
	for tp := range f.ext {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tpLess(tps[i], tps[j]) })
	e.uvar(uint64(len(tps)))
	for _, tp := range tps {
		p := f.ext[tp]
		e.str(tp.Topic)
		e.i32(tp.Partition)
		e.i64(p.end)
		p.encode(e)
	}
}

func decodeExtTxns(d *dec) map[TopicPartition]*extPartition {
	out := map[TopicPartition]*extPartition{}
	n := d.count(15)
	for i := 0; i < n && d.err == nil; i++ {
		tp := TopicPartition{Topic: d.str(), Partition: d.i32()}
		end := d.i64()
		out[tp] = &extPartition{partTxns: decodePartTxns(d), end: end}
	}
	return out
}

// ExtOngoing tells whether the producer has an open transaction in the
// external partition.
func (f *FSM) ExtOngoing(tp TopicPartition, pid int64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p := f.ext[tp]; p != nil {
		_, open := p.ongoing[pid]
		return open
	}
	return false
}
