package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// History is what the workload saw, and all the checker looks at: every
// produce with its acknowledgement or error, every record a reader got,
// every committed group offset an observer read back, and the final full
// read. It knows nothing of kgate.
type History struct {
	mu       sync.Mutex
	Produces []Produce
	Reads    []Read
	Commits  []CommitSample
	// Acked are the commits group members report the coordinator
	// acknowledged, in the order each member got the acknowledgements (a
	// member that reports none has none here).
	Acked []ClientCommit
	Final []Read // the final full read of every partition from its start
	// Assignments are the group members' rebalance events, each with what
	// the member held after it and its generation.
	Assignments []Assignment
	// Windows are the times a fault kept some nodes (a minority) from all
	// the others.
	Windows []Window
}

// Assignment is what a group member held after a rebalance event
// (assigned, revoked or lost): Partitions, from At until the member's next
// event, in generation Generation, the generation the member's client
// reported at the event (-1: the client does not tell; such events are
// left out of the double-owner rule).
type Assignment struct {
	Member     string
	Event      string
	Generation int32
	Partitions []int32
	At         time.Time
	// Coordinator is the node that answered the SyncGroup completing the
	// rebalance, which was sent at SyncSent (0: the client does not tell;
	// left out of the minority-rebalance rule; the campaign numbers its
	// nodes from 1).
	Coordinator int32
	SyncSent    time.Time
}

// Window is a fault that cut the nodes Minority off from every other node
// from From to To (times the cut was in place, taken inside the cut and
// heal). Nothing those nodes acknowledge or complete from then on can have
// reached a majority.
type Window struct {
	Fault    string
	Minority []int32
	From, To time.Time
}

// Produce is one record a producer sent. Value is "p<producer>-<seq>",
// unique in the whole run. Acked is false when the send ended in an error
// (the record may or may not have been written).
type Produce struct {
	Value     string
	Acked     bool
	Err       string
	Partition int32
	Offset    int64
	At        time.Time
}

// Read is one record a reader got. Reader names the reader; Epoch counts
// the reader's assignments (a group member's offsets restart at each
// assignment; an assign() reader has one epoch).
type Read struct {
	Reader    string
	Epoch     int
	Group     bool // read by a group member
	Partition int32
	Offset    int64
	Value     string
	At        time.Time
}

// CommitSample is a group's committed offset of a partition as an
// observer read it back from the cluster.
type CommitSample struct {
	Partition int32
	Offset    int64
	At        time.Time
}

// ClientCommit is an offset a group member committed, as the member
// reports it once the coordinator acknowledged it.
type ClientCommit struct {
	Member    string
	Partition int32
	Offset    int64
	At        time.Time
	// Generation is the group generation the acknowledged request
	// carried, when the member's client tells it (0: unknown).
	Generation int32
}

func (h *History) AddClientCommit(c ClientCommit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Acked = append(h.Acked, c)
}

func (h *History) AddProduce(p Produce) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Produces = append(h.Produces, p)
}

func (h *History) AddRead(r Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Reads = append(h.Reads, r)
}

func (h *History) AddCommit(c CommitSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Commits = append(h.Commits, c)
}

func (h *History) AddAssignment(a Assignment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Assignments = append(h.Assignments, a)
}

func (h *History) AddWindow(w Window) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Windows = append(h.Windows, w)
}

func (h *History) SetFinal(f []Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Final = f
}

// Anomaly is one violated property, with what shows it.
type Anomaly struct {
	Kind   string
	Detail string
}

func (a Anomaly) String() string { return a.Kind + ": " + a.Detail }

// Anomaly kinds.
const (
	Lost       = "lost"        // acknowledged, absent from the final read at its offset
	Conflict   = "conflict"    // two values at one partition offset
	Duplicate  = "duplicate"   // one value at two partition offsets
	Reordered  = "reordered"   // a producer's acknowledged records out of its send order in a partition
	ReadOrder  = "read-order"  // a reader's offsets of a partition not increasing
	CommitBack = "commit-back" // a committed group offset moved backwards
	// ClientCommitBack is a committed offset that moved backwards because
	// a member itself committed the lower offset after its commit of the
	// higher one was acknowledged (librdkafka retries a failed commit with
	// its old offsets, after a newer one): the cluster applied the commits
	// in the order it acknowledged them, as Kafka does. Reported, not the
	// cluster's fault.
	ClientCommitBack = "client-commit-back"
	// StaleCommit is a committed offset that moved backwards because a
	// member of the group's newest generation committed the lower offset
	// after another member's commit of the higher one was acknowledged
	// (a franz-go member fenced during a leader pause rejoined and
	// committed records it had read in its old generation). Kafka's
	// coordinator checks only a commit's member and generation, so it
	// accepts that commit too (gateway TestOffsetCommitByAnyCurrentMember
	// against a broker). Reported, not the cluster's fault.
	StaleCommit = "stale-commit"
	NotConsumed = "not-consumed" // an acknowledged record no group member ever read
	Phantom     = "phantom"      // a record read that no producer sent
	// DoubleOwner is a partition two members held at overlapping times
	// in the same generation.
	DoubleOwner = "double-owner"
	// MinorityRebalance is a generation first seen during a cut, completed
	// by a SyncGroup sent after the cut and answered by a node on the
	// minority side.
	MinorityRebalance = "minority-rebalance"
)

// Check judges the history and returns every anomaly (none for a correct
// run). finalComplete says whether the final read reached the end of every
// partition, so that every acknowledged record must be in it; groupDrained
// whether the group committed up to the end, so that every acknowledged
// record must have been consumed by it.
func (h *History) Check(finalComplete, groupDrained bool) []Anomaly {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Anomaly
	add := func(kind, format string, args ...any) {
		out = append(out, Anomaly{kind, fmt.Sprintf(format, args...)})
	}
	type pos struct {
		p int32
		o int64
	}
	sent := map[string]bool{}
	for _, p := range h.Produces {
		sent[p.Value] = true
	}
	// One value per position, one position per value, over everything seen.
	at := map[pos]string{}
	where := map[string]pos{}
	// When each value was acknowledged: a conflict between two
	// acknowledged values names both moments, which say which leader
	// answered each.
	ackedAt := map[string]time.Time{}
	for _, p := range h.Produces {
		if p.Acked {
			ackedAt[p.Value] = p.At
		}
	}
	when := func(v string) string {
		if t, ok := ackedAt[v]; ok {
			return " (acknowledged " + t.Format("15:04:05.000") + ")"
		}
		return ""
	}
	see := func(p int32, o int64, v, source string) {
		k := pos{p, o}
		if old, ok := at[k]; ok && old != v {
			add(Conflict, "partition %d offset %d holds %q%s and %q%s (%s)", p, o, old, when(old), v, when(v), source)
			return
		}
		at[k] = v
		if old, ok := where[v]; ok && old != k {
			add(Duplicate, "%q at partition %d offset %d and partition %d offset %d (%s)", v, old.p, old.o, p, o, source)
			return
		}
		where[v] = k
	}
	for _, p := range h.Produces {
		if p.Acked {
			see(p.Partition, p.Offset, p.Value, "acknowledged")
		}
	}
	for _, r := range h.Final {
		see(r.Partition, r.Offset, r.Value, "final read")
	}
	for _, r := range h.Reads {
		see(r.Partition, r.Offset, r.Value, "read by "+r.Reader)
	}

	// Every acknowledged record is in the final read at its offset.
	final := map[pos]string{}
	for _, r := range h.Final {
		final[pos{r.Partition, r.Offset}] = r.Value
	}
	for _, p := range h.Produces {
		if p.Acked && finalComplete {
			if v, ok := final[pos{p.Partition, p.Offset}]; !ok || v != p.Value {
				add(Lost, "%q acknowledged at partition %d offset %d (%s), final read has %q", p.Value, p.Partition, p.Offset, p.At.Format("15:04:05.000"), v)
			}
		}
	}
	for _, r := range append(append([]Read(nil), h.Final...), h.Reads...) {
		if !sent[r.Value] {
			add(Phantom, "%q at partition %d offset %d (read by %s)", r.Value, r.Partition, r.Offset, r.Reader)
		}
	}

	// A producer's acknowledged records keep its send order in a partition.
	type prodPart struct {
		producer string
		p        int32
	}
	last := map[prodPart][2]int64{} // seq, offset
	byValue := append([]Produce(nil), h.Produces...)
	sort.SliceStable(byValue, func(i, j int) bool {
		pi, si := splitValue(byValue[i].Value)
		pj, sj := splitValue(byValue[j].Value)
		if pi != pj {
			return pi < pj
		}
		return si < sj
	})
	for _, p := range byValue {
		if !p.Acked {
			continue
		}
		prod, seq := splitValue(p.Value)
		k := prodPart{prod, p.Partition}
		if l, ok := last[k]; ok && p.Offset <= l[1] {
			add(Reordered, "producer %s: seq %d at partition %d offset %d%s, after seq %d at offset %d%s", prod, seq, p.Partition, p.Offset, when(p.Value),
				l[0], l[1], when(Value(prod, l[0])))
		}
		last[k] = [2]int64{seq, p.Offset}
	}

	// Each reader's offsets increase within an epoch; the final read too.
	type readerPart struct {
		reader string
		epoch  int
		p      int32
	}
	lastRead := map[readerPart]int64{}
	for _, r := range append(append([]Read(nil), h.Reads...), h.Final...) {
		k := readerPart{r.Reader, r.Epoch, r.Partition}
		if l, ok := lastRead[k]; ok && r.Offset <= l {
			add(ReadOrder, "%s (epoch %d) read partition %d offset %d after offset %d", r.Reader, r.Epoch, r.Partition, r.Offset, l)
		}
		lastRead[k] = r.Offset
	}

	// Committed offsets never move backwards, unless a member's own
	// acknowledged commits did: its commit of the higher offset (or more)
	// acknowledged, then one of the lower offset.
	clientBack := func(p int32, hi, lo int64) string {
		seenHi := map[string]bool{}
		for _, a := range h.Acked {
			if a.Partition != p {
				continue
			}
			if a.Offset >= hi {
				seenHi[a.Member] = true
			} else if a.Offset == lo && seenHi[a.Member] {
				return a.Member
			}
		}
		return ""
	}
	// Or a member of the newest generation committed the lower offset
	// after another's commit of the higher one was acknowledged.
	newestAt := func(at time.Time) int32 {
		var g int32
		for _, a := range h.Assignments {
			if !a.At.After(at) {
				g = max(g, a.Generation)
			}
		}
		return g
	}
	staleBack := func(p int32, hi, lo int64, before time.Time) (ClientCommit, ClientCommit, bool) {
		var higher *ClientCommit
		for i, a := range h.Acked {
			if a.Partition != p || a.At.After(before) {
				continue
			}
			if a.Offset >= hi {
				higher = &h.Acked[i]
			} else if a.Offset == lo && higher != nil && a.Member != higher.Member &&
				a.Generation > 0 && a.Generation >= newestAt(a.At) {
				return *higher, a, true
			}
		}
		return ClientCommit{}, ClientCommit{}, false
	}
	lastCommit := map[int32]CommitSample{}
	for _, c := range h.Commits {
		if l, ok := lastCommit[c.Partition]; ok && c.Offset < l.Offset {
			if m := clientBack(c.Partition, l.Offset, c.Offset); m != "" {
				add(ClientCommitBack, "partition %d committed %d at %s, then %d at %s: %s's commit of %d was acknowledged after its commit of %d or more", c.Partition, l.Offset, l.At.Format("15:04:05.000"), c.Offset, c.At.Format("15:04:05.000"), m, c.Offset, l.Offset)
			} else if hiAck, loAck, ok := staleBack(c.Partition, l.Offset, c.Offset, c.At); ok {
				add(StaleCommit, "partition %d committed %d at %s, then %d at %s: %s committed %d in generation %d, the newest, acknowledged at %s after %s's commit of %d at %s",
					c.Partition, l.Offset, l.At.Format("15:04:05.000"), c.Offset, c.At.Format("15:04:05.000"),
					loAck.Member, loAck.Offset, loAck.Generation, loAck.At.Format("15:04:05.000"), hiAck.Member, hiAck.Offset, hiAck.At.Format("15:04:05.000"))
			} else {
				add(CommitBack, "partition %d committed %d at %s, then %d at %s (members' acknowledged commits of it until then: %s)", c.Partition, l.Offset, l.At.Format("15:04:05.000"), c.Offset, c.At.Format("15:04:05.000"), h.ackedBefore(c.Partition, c.At, 4))
			}
		}
		lastCommit[c.Partition] = c
	}

	h.checkOwners(add)
	h.checkMinority(add)

	if groupDrained {
		consumed := map[string]bool{}
		for _, r := range h.Reads {
			if r.Group {
				consumed[r.Value] = true
			}
		}
		for _, p := range h.Produces {
			if p.Acked && !consumed[p.Value] {
				add(NotConsumed, "%q (partition %d offset %d)", p.Value, p.Partition, p.Offset)
			}
		}
	}
	return out
}

// checkOwners reports a partition two members held in the same
// generation at overlapping times. A member holds what its event gave it
// until its next event. Cooperative-sticky's two-phase handoff passes: the
// old owner revokes in generation g+1 (its assignment there no longer has
// the partition) and the new owner gets it in g+2; a member cut off from
// the coordinator that still holds a partition of generation g while the
// group moved on to g+1 passes too (Kafka fences its commits by the
// generation).
func (h *History) checkOwners(add func(kind, format string, args ...any)) {
	type hold struct {
		member   string
		gen      int32
		list     []int32 // sorted
		parts    map[int32]bool
		from, to time.Time // to: zero while held to the end
	}
	byMember := map[string][]Assignment{}
	var members []string
	for _, a := range h.Assignments {
		if byMember[a.Member] == nil {
			members = append(members, a.Member)
		}
		byMember[a.Member] = append(byMember[a.Member], a)
	}
	var holds []hold
	for _, m := range members {
		as := byMember[m]
		sort.SliceStable(as, func(i, j int) bool { return as[i].At.Before(as[j].At) })
		for i, a := range as {
			if a.Generation < 0 || len(a.Partitions) == 0 {
				continue
			}
			hd := hold{member: m, gen: a.Generation, list: slices.Sorted(slices.Values(a.Partitions)), parts: map[int32]bool{}, from: a.At}
			for _, p := range a.Partitions {
				hd.parts[p] = true
			}
			if i+1 < len(as) {
				hd.to = as[i+1].At
			}
			holds = append(holds, hd)
		}
	}
	overlap := func(a, b hold) bool {
		return (a.to.IsZero() || b.from.Before(a.to)) && (b.to.IsZero() || a.from.Before(b.to))
	}
	type report struct {
		a, b string
		gen  int32
		p    int32
	}
	seen := map[report]bool{}
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if a.member == b.member || a.gen != b.gen || !overlap(a, b) {
				continue
			}
			for _, p := range a.list {
				if !b.parts[p] {
					continue
				}
				r := report{min(a.member, b.member), max(a.member, b.member), a.gen, p}
				if seen[r] {
					continue
				}
				seen[r] = true
				add(DoubleOwner, "partition %d held by %s (from %s) and %s (from %s) in generation %d", p,
					a.member, a.from.Format("15:04:05.000"), b.member, b.from.Format("15:04:05.000"), a.gen)
			}
		}
	}
}

// checkMinority reports a generation first seen during a cut whose
// SyncGroup, sent after the cut, a node of the cut-off minority answered:
// the minority completed a rebalance, which it cannot have replicated to a
// majority. (Its half for writes, a record a minority acknowledged, needs
// the node that acknowledged each record, which franz-go does not tell;
// such a record cannot have reached a majority, so the final read misses
// it or holds another value at its offset: lost or conflict.)
func (h *History) checkMinority(add func(kind, format string, args ...any)) {
	in := func(w Window, node int32) bool {
		for _, n := range w.Minority {
			if n == node {
				return true
			}
		}
		return false
	}
	// The first event of each generation, over every member.
	first := map[int32]Assignment{}
	for _, a := range h.Assignments {
		if a.Generation < 0 || a.Event != "assigned" {
			continue
		}
		if f, ok := first[a.Generation]; !ok || a.At.Before(f.At) {
			first[a.Generation] = a
		}
	}
	gens := make([]int32, 0, len(first))
	for g := range first {
		gens = append(gens, g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	for _, g := range gens {
		f := first[g]
		for _, w := range h.Windows {
			if f.At.Before(w.From) || f.At.After(w.To) {
				continue
			}
			// Any member that saw the generation through a minority node
			// with a SyncGroup sent after the cut.
			for _, a := range h.Assignments {
				if a.Generation == g && a.Event == "assigned" && a.Coordinator != 0 && in(w, a.Coordinator) && !a.SyncSent.Before(w.From) && !a.At.After(w.To) {
					add(MinorityRebalance, "generation %d first seen at %s; %s's SyncGroup sent at %s was answered by node %d, cut off with %v by %s from %s to %s",
						g, f.At.Format("15:04:05.000"), a.Member, a.SyncSent.Format("15:04:05.000"), a.Coordinator, w.Minority, w.Fault,
						w.From.Format("15:04:05.000"), w.To.Format("15:04:05.000"))
					break
				}
			}
		}
	}
}

// Value names a producer's seq-th record.
func Value(producer string, seq int64) string { return producer + "-" + strconv.FormatInt(seq, 10) }

func splitValue(v string) (string, int64) {
	i := strings.LastIndexByte(v, '-')
	if i < 0 {
		return v, -1
	}
	n, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil {
		return v, -1
	}
	return v[:i], n
}

// Summary counts anomalies by kind, for a report.
func Summary(as []Anomaly) map[string]int {
	m := map[string]int{}
	for _, a := range as {
		m[a.Kind]++
	}
	return m
}

// ackedBefore lists the last n acknowledged member commits of partition p
// before at, for a report.
func (h *History) ackedBefore(p int32, at time.Time, n int) string {
	var out []string
	for _, a := range h.Acked {
		if a.Partition == p && !a.At.After(at) {
			out = append(out, fmt.Sprintf("%s %d at %s", a.Member, a.Offset, a.At.Format("15:04:05.000")))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out[max(0, len(out)-n):], ", ")
}
