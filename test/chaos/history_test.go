package chaos

import (
	"testing"
	"time"
)

// goodHistory is a correct run: two producers, three records each over
// two partitions, read in order by a group member and an assign() reader,
// commits moving forward, and a final read holding everything.
func goodHistory() *History {
	h := &History{}
	t0 := time.Unix(1000, 0)
	acks := []Produce{
		{Value: Value("p0", 0), Acked: true, Partition: 0, Offset: 0},
		{Value: Value("p1", 0), Acked: true, Partition: 0, Offset: 1},
		{Value: Value("p0", 1), Acked: true, Partition: 1, Offset: 0},
		{Value: Value("p0", 2), Acked: true, Partition: 0, Offset: 2},
		{Value: Value("p1", 1), Acked: false, Err: "timed out"},
		{Value: Value("p1", 2), Acked: true, Partition: 1, Offset: 1},
	}
	for _, a := range acks {
		a.At = t0
		h.AddProduce(a)
	}
	final := []Read{
		{Reader: "final", Partition: 0, Offset: 0, Value: Value("p0", 0)},
		{Reader: "final", Partition: 0, Offset: 1, Value: Value("p1", 0)},
		{Reader: "final", Partition: 0, Offset: 2, Value: Value("p0", 2)},
		{Reader: "final", Partition: 1, Offset: 0, Value: Value("p0", 1)},
		{Reader: "final", Partition: 1, Offset: 1, Value: Value("p1", 2)},
	}
	h.SetFinal(final)
	for _, r := range final {
		g := r
		g.Reader, g.Group = "c0", true
		h.AddRead(g)
		a := r
		a.Reader = "assign"
		h.AddRead(a)
	}
	h.AddCommit(CommitSample{Partition: 0, Offset: 1, At: t0})
	h.AddCommit(CommitSample{Partition: 0, Offset: 3, At: t0.Add(time.Second)})
	h.AddCommit(CommitSample{Partition: 1, Offset: 2, At: t0.Add(time.Second)})

	// The group: c0 alone in generation 1; c1 joins and cooperative-sticky
	// moves partition 1 in two phases (c0 revokes it in generation 2, where
	// nobody gets it, and c1 gets it in 3). Then node 1, the coordinator,
	// is cut off from 10 s to 14 s: the majority's new coordinator, node 2,
	// forms generation 4 during the cut, and c1's generation-3 SyncGroup,
	// answered by node 1 before the cut, passes. A member the group dropped
	// still holding partition 0 of generation 4 (a zombie, fenced by the
	// generation) while c1 holds it in 5 passes too.
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, a := range []Assignment{
		{Member: "c0", Event: "assigned", Generation: 1, Partitions: []int32{0, 1}, At: at(0), Coordinator: 1, SyncSent: at(-0.1)},
		{Member: "c0", Event: "revoked", Generation: 2, Partitions: []int32{0}, At: at(2)},
		{Member: "c0", Event: "assigned", Generation: 2, Partitions: []int32{0}, At: at(2.01), Coordinator: 1, SyncSent: at(1.9)},
		{Member: "c1", Event: "assigned", Generation: 2, Partitions: nil, At: at(2.02), Coordinator: 1, SyncSent: at(1.9)},
		{Member: "c0", Event: "assigned", Generation: 3, Partitions: []int32{0}, At: at(3), Coordinator: 1, SyncSent: at(2.9)},
		{Member: "c1", Event: "assigned", Generation: 3, Partitions: []int32{1}, At: at(2.99), Coordinator: 1, SyncSent: at(2.9)},
		{Member: "c0", Event: "assigned", Generation: 4, Partitions: []int32{0}, At: at(12), Coordinator: 2, SyncSent: at(11.9)},
		{Member: "c1", Event: "assigned", Generation: 4, Partitions: []int32{1}, At: at(12), Coordinator: 2, SyncSent: at(11.9)},
		{Member: "c1", Event: "assigned", Generation: 5, Partitions: []int32{0, 1}, At: at(20), Coordinator: 2, SyncSent: at(19.9)},
		// A client that does not tell its generation: left out.
		{Member: "c2", Event: "assigned", Generation: -1, Partitions: []int32{0, 1}, At: at(20)},
	} {
		h.AddAssignment(a)
	}
	h.AddWindow(Window{Fault: "partition-leader", Minority: []int32{1}, From: at(10), To: at(14)})
	return h
}

// TestCheckerPassesACorrectHistory: a correct history has no anomaly.
func TestCheckerPassesACorrectHistory(t *testing.T) {
	if as := goodHistory().Check(true, true); len(as) != 0 {
		t.Fatalf("anomalies in a correct history: %v", as)
	}
}

// TestCheckerFindsFaults: each purpose-built faulty history is reported
// with the anomaly it contains.
func TestCheckerFindsFaults(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(h *History)
		want  string
	}{
		{"acknowledged record missing from the final read", func(h *History) {
			h.Final = h.Final[1:]
			h.Reads = nil
		}, Lost},
		{"acknowledged at an offset that now holds another value (a deposed leader's write)", func(h *History) {
			h.AddProduce(Produce{Value: Value("p2", 0), Acked: true, Partition: 0, Offset: 1})
		}, Conflict},
		{"one value at two offsets", func(h *History) {
			h.Final = append(h.Final, Read{Reader: "final", Partition: 1, Offset: 2, Value: Value("p0", 0)})
		}, Duplicate},
		{"a producer's records out of order", func(h *History) {
			h.Produces[0].Offset, h.Produces[3].Offset = 2, 0
			h.Final[0].Value, h.Final[2].Value = Value("p0", 2), Value("p0", 0)
			h.Reads = nil
		}, Reordered},
		{"a reader going back", func(h *History) {
			h.AddRead(Read{Reader: "assign", Partition: 0, Offset: 1, Value: Value("p1", 0)})
		}, ReadOrder},
		{"a committed offset moving back", func(h *History) {
			h.AddCommit(CommitSample{Partition: 0, Offset: 2, At: time.Unix(1002, 0)})
		}, CommitBack},
		{"a committed offset moving back while the member's acknowledged commits went forward", func(h *History) {
			h.AddClientCommit(ClientCommit{Member: "c0", Partition: 0, Offset: 2})
			h.AddClientCommit(ClientCommit{Member: "c0", Partition: 0, Offset: 3})
			h.AddCommit(CommitSample{Partition: 0, Offset: 2, At: time.Unix(1002, 0)})
		}, CommitBack},
		{"a committed offset moving back after another member's acknowledged commit went back", func(h *History) {
			h.AddClientCommit(ClientCommit{Member: "c0", Partition: 0, Offset: 3})
			h.AddClientCommit(ClientCommit{Member: "c1", Partition: 0, Offset: 2})
			h.AddCommit(CommitSample{Partition: 0, Offset: 2, At: time.Unix(1002, 0)})
		}, CommitBack},
		{"a committed offset moved back by a commit of an older generation", func(h *History) {
			// Generation 5 began at 1020; c0 commits in 4 (Kafka answers
			// ILLEGAL_GENERATION).
			h.AddClientCommit(ClientCommit{Member: "c1", Partition: 0, Offset: 3, At: time.Unix(1021, 0), Generation: 5})
			h.AddClientCommit(ClientCommit{Member: "c0", Partition: 0, Offset: 2, At: time.Unix(1022, 0), Generation: 4})
			h.AddCommit(CommitSample{Partition: 0, Offset: 2, At: time.Unix(1023, 0)})
		}, CommitBack},
		{"a record the group never consumed", func(h *History) {
			var keep []Read
			for _, r := range h.Reads {
				if !(r.Group && r.Partition == 1) {
					keep = append(keep, r)
				}
			}
			h.Reads = keep
		}, NotConsumed},
		{"two members holding one partition in one generation", func(h *History) {
			h.AddAssignment(Assignment{Member: "c1", Event: "assigned", Generation: 1, Partitions: []int32{1}, At: time.Unix(1001, 0)})
		}, DoubleOwner},
		{"a partition handed over in one generation, before its owner revoked it", func(h *History) {
			// c0 keeps 1 in generation 2 (no revocation), while c1 gets
			// it in generation 2 as well.
			h.Assignments[1].Partitions = []int32{0, 1}
			h.Assignments[2].Partitions = []int32{0, 1}
			h.Assignments[3].Partitions = []int32{1}
		}, DoubleOwner},
		{"a generation formed by the cut-off coordinator", func(h *History) {
			// Generation 4 completed by node 1 during its cut.
			h.Assignments[6].Coordinator = 1
		}, MinorityRebalance},
		{"a generation completed by the cut-off coordinator after the majority's", func(h *History) {
			h.AddAssignment(Assignment{Member: "c0", Event: "assigned", Generation: 6, Partitions: []int32{0},
				At: time.Unix(1013, 0), Coordinator: 1, SyncSent: time.Unix(1012, 0)})
		}, MinorityRebalance},
		{"a record nobody sent", func(h *History) {
			h.Final = append(h.Final, Read{Reader: "final", Partition: 1, Offset: 2, Value: "ghost-1"})
		}, Phantom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := goodHistory()
			tc.spoil(h)
			got := Summary(h.Check(true, true))
			if got[tc.want] == 0 {
				t.Fatalf("no %s anomaly reported; got %v", tc.want, h.Check(true, true))
			}
		})
	}
}

// TestCheckerTellsAClientsOwnCommitBack: a committed offset that went back
// because the member's own commit of the lower offset was acknowledged
// after its commit of the higher one (librdkafka's retried commit) is
// reported as the client's, not the cluster's.
func TestCheckerTellsAClientsOwnCommitBack(t *testing.T) {
	h := goodHistory()
	h.AddClientCommit(ClientCommit{Member: "c2", Partition: 0, Offset: 3})
	h.AddClientCommit(ClientCommit{Member: "c2", Partition: 0, Offset: 2})
	h.AddCommit(CommitSample{Partition: 0, Offset: 2, At: time.Unix(1002, 0)})
	got := Summary(h.Check(true, true))
	if got[ClientCommitBack] != 1 || got[CommitBack] != 0 {
		t.Fatalf("got %v, want one %s and no %s: %v", got, ClientCommitBack, CommitBack, h.Check(true, true))
	}
}

// TestCheckerTellsAStaleCommit: a committed offset that went back because
// a member of the newest generation committed the lower offset after
// another member's commit of the higher one was acknowledged (a fenced
// member committing what it read before) is reported as the client's:
// Kafka accepts such a commit too.
func TestCheckerTellsAStaleCommit(t *testing.T) {
	h := goodHistory()
	h.AddClientCommit(ClientCommit{Member: "c1", Partition: 0, Offset: 3, At: time.Unix(1021, 0), Generation: 5})
	h.AddClientCommit(ClientCommit{Member: "c0", Partition: 0, Offset: 2, At: time.Unix(1022, 0), Generation: 5})
	h.AddCommit(CommitSample{Partition: 0, Offset: 2, At: time.Unix(1023, 0)})
	got := Summary(h.Check(true, true))
	if got[StaleCommit] != 1 || got[CommitBack] != 0 {
		t.Fatalf("got %v, want one %s and no %s: %v", got, StaleCommit, CommitBack, h.Check(true, true))
	}
}
