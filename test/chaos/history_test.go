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
		{"a record the group never consumed", func(h *History) {
			var keep []Read
			for _, r := range h.Reads {
				if !(r.Group && r.Partition == 1) {
					keep = append(keep, r)
				}
			}
			h.Reads = keep
		}, NotConsumed},
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
