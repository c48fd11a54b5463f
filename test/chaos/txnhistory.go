package chaos

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// TxnHistory is what the transactional workload saw, and all its checker
// looks at. Three writers share an output topic: consume-transform-produce
// members that copy each input record "in-<n>" to "out:in-<n>" inside a
// transaction that also commits the group's input offsets (exactly once:
// every input record's copy is in the output once), an atom producer
// whose transactions each write atomSize records "atom-<id>-<j>" over the
// partitions and commit or abort, and, at the end, one "end-<p>" record
// per partition that ends the final read. Like History it knows nothing of
// kgate.
type TxnHistory struct {
	mu     sync.Mutex
	Inputs []Produce // the input producer's sends (idempotent, not transactional)
	Atoms  []AtomTxn
	// Reads are the records a read_committed reader of the output topic
	// got during the run.
	Reads []Read
	// FinalIn is the whole input topic, FinalOut the output topic read
	// with read_committed up to each partition's end record.
	FinalIn, FinalOut []Read
}

// AtomTxn is one transaction of the atom producer: ID names its records,
// Commit is what it asked for at the end (a produce error turns a commit
// into an abort), Ended is whether the end was answered without error
// (otherwise the outcome is unknown: committed whole or not at all).
type AtomTxn struct {
	ID     int64
	Size   int
	Commit bool
	Ended  bool
	Err    string
}

func (h *TxnHistory) AddInput(p Produce) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Inputs = append(h.Inputs, p)
}

func (h *TxnHistory) AddAtom(a AtomTxn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Atoms = append(h.Atoms, a)
}

func (h *TxnHistory) AddRead(r Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Reads = append(h.Reads, r)
}

func (h *TxnHistory) SetFinal(in, out []Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.FinalIn, h.FinalOut = in, out
}

// Transactional anomaly kinds.
const (
	AbortedRead       = "aborted-read"       // a read_committed reader got a record of an aborted transaction
	IntermediateRead  = "intermediate-read"  // a read_committed reader got a record the final read does not hold (never committed)
	TornTxn           = "torn-txn"           // some but not all records of one transaction committed
	LostCommitted     = "lost-committed"     // a transaction whose commit was acknowledged is not in the output
	LostOutput        = "lost-output"        // an input record the group committed past has no copy in the output
	DuplicateOutput   = "duplicate-output"   // an input record's copy, or a transaction's record, in the output twice
	PhantomOutput     = "phantom-output"     // an output record of no input record or no transaction begun
	UncommittedOffset = "uncommitted-offset" // the group did not commit up to the end of the input
)

// AtomValue names record j of the atom producer's transaction id.
func AtomValue(id int64, j int) string {
	return "atom-" + strconv.FormatInt(id, 10) + "-" + strconv.Itoa(j)
}

// OutValue is the copy of input value v in the output.
func OutValue(v string) string { return "out:" + v }

// EndValue is the record that ends partition p of the output.
func EndValue(p int32) string { return "end-" + strconv.Itoa(int(p)) }

func parseAtom(v string) (id int64, j int, ok bool) {
	rest, found := strings.CutPrefix(v, "atom-")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	id, err1 := strconv.ParseInt(a, 10, 64)
	j, err2 := strconv.Atoi(b)
	return id, j, err1 == nil && err2 == nil
}

// CheckTxn judges the history. finalComplete says whether the final reads
// reached the end of both topics; groupDrained whether the group committed
// up to the end of the input (only then must every input record have its
// copy in the output).
func (h *TxnHistory) CheckTxn(finalComplete, groupDrained bool) []Anomaly {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Anomaly
	add := func(kind, format string, args ...any) {
		out = append(out, Anomaly{kind, fmt.Sprintf(format, args...)})
	}
	if !groupDrained {
		add(UncommittedOffset, "the group did not commit up to the end of the input")
	}
	atoms := map[int64]AtomTxn{}
	for _, a := range h.Atoms {
		atoms[a.ID] = a
	}
	// The input: what was written, by value, from the final read. It is an
	// idempotent producer's topic, judged as the main workload's is (lost,
	// conflicting, duplicated or reordered records).
	inputs := map[string]int{}
	for _, r := range h.FinalIn {
		inputs[r.Value]++
	}
	in := &History{Produces: h.Inputs, Final: h.FinalIn}
	out = append(out, in.Check(finalComplete, false)...)

	// The output's committed records, from the final read.
	copies := map[string]int{} // input value -> copies
	atomRecs := map[int64]map[int]int{}
	for _, r := range h.FinalOut {
		v := r.Value
		switch {
		case strings.HasPrefix(v, "out:"):
			in := strings.TrimPrefix(v, "out:")
			copies[in]++
			if inputs[in] == 0 {
				add(PhantomOutput, "%q at partition %d offset %d copies no input record", v, r.Partition, r.Offset)
			}
		case strings.HasPrefix(v, "end-"):
		default:
			id, j, ok := parseAtom(v)
			if _, begun := atoms[id]; !ok || !begun {
				add(PhantomOutput, "%q at partition %d offset %d: no transaction wrote it", v, r.Partition, r.Offset)
				continue
			}
			if atomRecs[id] == nil {
				atomRecs[id] = map[int]int{}
			}
			atomRecs[id][j]++
		}
	}
	if finalComplete {
		var ins []string
		for v := range inputs {
			ins = append(ins, v)
		}
		sort.Strings(ins)
		for _, v := range ins {
			switch n := copies[v]; {
			case n < inputs[v] && groupDrained:
				add(LostOutput, "input %q (%d in the input) has %d copies in the output", v, inputs[v], n)
			case n > inputs[v]:
				add(DuplicateOutput, "input %q (%d in the input) has %d copies in the output", v, inputs[v], n)
			}
		}
		ids := make([]int64, 0, len(atoms))
		for id := range atoms {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			a, recs := atoms[id], atomRecs[id]
			for j, n := range recs {
				if n > 1 {
					add(DuplicateOutput, "%q committed %d times", AtomValue(id, j), n)
				}
			}
			switch {
			case len(recs) > 0 && len(recs) < a.Size:
				add(TornTxn, "transaction %d: %d of its %d records committed", id, len(recs), a.Size)
			case len(recs) > 0 && a.Ended && !a.Commit:
				add(AbortedRead, "transaction %d was aborted, the final read_committed read holds it", id)
			case len(recs) == 0 && a.Ended && a.Commit:
				add(LostCommitted, "transaction %d's commit was acknowledged, its %d records are not in the output", id, a.Size)
			}
		}
	}

	// What the reader got during the run: never an aborted transaction's
	// record, never one the final read lacks, offsets increasing.
	final := map[string]bool{}
	for _, r := range h.FinalOut {
		final[r.Value] = true
	}
	last := map[int32]int64{}
	for _, r := range h.Reads {
		if l, ok := last[r.Partition]; ok && r.Offset <= l {
			add(ReadOrder, "%s read output partition %d offset %d after offset %d", r.Reader, r.Partition, r.Offset, l)
		}
		last[r.Partition] = r.Offset
		if id, _, ok := parseAtom(r.Value); ok {
			if a, begun := atoms[id]; begun && a.Ended && !a.Commit {
				add(AbortedRead, "%s got %q (partition %d offset %d) of aborted transaction %d", r.Reader, r.Value, r.Partition, r.Offset, id)
				continue
			}
		}
		if finalComplete && !final[r.Value] {
			add(IntermediateRead, "%s got %q (partition %d offset %d), which the final read_committed read does not hold", r.Reader, r.Value, r.Partition, r.Offset)
		}
	}
	return out
}
