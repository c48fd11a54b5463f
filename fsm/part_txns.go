package fsm

import "sort"

// partTxns is one partition's transactions, in the embedded log or outside
// the FSM (external_txns.go) alike: the open ones by producer and the
// aborted ones, which give its last stable offset and what Fetch reports
// as aborted.
type partTxns struct {
	ongoing map[int64]int64 // producer id → first offset of its open transaction here
	aborted []AbortedTxn    // by marker offset
}

func newPartTxns() partTxns { return partTxns{ongoing: map[int64]int64{}} }

// lso is the last stable offset given the high watermark hw: the first
// offset of the oldest open transaction, or hw when none is open.
func (pt *partTxns) lso(hw int64) int64 {
	for _, first := range pt.ongoing {
		hw = min(hw, first)
	}
	return hw
}

// abortedIn lists the aborted transactions with records in [from, to),
// oldest first.
func (pt *partTxns) abortedIn(from, to int64) []AbortedTxn {
	var out []AbortedTxn
	for _, a := range pt.aborted {
		if a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// close ends the producer's open transaction at its marker's offset; an
// abort is remembered unless no marker was written (marker < 0).
func (pt *partTxns) close(producerID, marker int64, commit bool) {
	first, open := pt.ongoing[producerID]
	if !open {
		return
	}
	delete(pt.ongoing, producerID)
	if !commit && marker >= 0 {
		pt.aborted = append(pt.aborted, AbortedTxn{ProducerID: producerID, FirstOffset: first, LastOffset: marker})
	}
}

// prune forgets the aborted transactions that ended (their marker) below
// start, the partition's log start: no read can reach their records.
func (pt *partTxns) prune(start int64) {
	n := 0
	for _, a := range pt.aborted {
		if a.LastOffset >= start {
			pt.aborted[n] = a
			n++
		}
	}
	clear(pt.aborted[n:])
	pt.aborted = pt.aborted[:n]
}

// encode writes the open transactions by producer id, then the aborted
// ones, as the snapshot sections of both kinds of partition hold them.
func (pt *partTxns) encode(e *enc) {
	pids := make([]int64, 0, len(pt.ongoing))
	for pid := range pt.ongoing {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	e.uvar(uint64(len(pids)))
	for _, pid := range pids {
		e.i64(pid)
		e.i64(pt.ongoing[pid])
	}
	e.uvar(uint64(len(pt.aborted)))
	for _, a := range pt.aborted {
		e.i64(a.ProducerID)
		e.i64(a.FirstOffset)
		e.i64(a.LastOffset)
	}
}

func decodePartTxns(d *dec) partTxns {
	pt := newPartTxns()
	no := d.count(16)
	for j := 0; j < no && d.err == nil; j++ {
		pid := d.i64()
		pt.ongoing[pid] = d.i64()
	}
	na := d.count(24)
	for j := 0; j < na && d.err == nil; j++ {
		pt.aborted = append(pt.aborted, AbortedTxn{ProducerID: d.i64(), FirstOffset: d.i64(), LastOffset: d.i64()})
	}
	return pt
}

// tpLess orders partitions by topic, then partition.
func tpLess(a, b TopicPartition) bool {
	return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
}
