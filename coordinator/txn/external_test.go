package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
)

// fakeMarkers is a backend with partitions outside the FSM: each
// partition's next offset, and the markers written.
type fakeMarkers struct {
	mu      sync.Mutex
	next    map[fsm.TopicPartition]int64
	start   map[fsm.TopicPartition]int64
	fail    bool
	written []string
}

func (m *fakeMarkers) NextOffsets(_ context.Context, parts []fsm.TopicPartition) ([]int64, []int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	offs, codes := make([]int64, len(parts)), make([]int16, len(parts))
	for i, tp := range parts {
		o, ok := m.next[tp]
		if !ok {
			codes[i] = kerr.UnknownTopicOrPartition.Code
		}
		offs[i] = o
	}
	return offs, codes
}

func (m *fakeMarkers) WriteMarker(_ context.Context, pid int64, epoch int16, commit bool, _ int64, parts []fsm.TopicPartition) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return nil, errors.New("iggy down")
	}
	offs := make([]int64, len(parts))
	for i, tp := range parts {
		offs[i] = m.next[tp]
		m.next[tp]++
		kind := "abort"
		if commit {
			kind = "commit"
		}
		m.written = append(m.written, tp.Topic+" "+kind)
	}
	return offs, nil
}

func (m *fakeMarkers) LogStarts(_ context.Context, parts []fsm.TopicPartition) ([]int64, []int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	offs, codes := make([]int64, len(parts)), make([]int16, len(parts))
	for i, tp := range parts {
		if _, ok := m.next[tp]; !ok {
			codes[i] = kerr.UnknownTopicOrPartition.Code
		}
		offs[i] = m.start[tp]
	}
	return offs, codes
}

func (m *fakeMarkers) WriteAdminMarker(_ context.Context, pid int64, epoch int16, commit bool, _ int32, _ int64, parts []fsm.TopicPartition) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	offs := make([]int64, len(parts))
	for i, tp := range parts {
		o, ok := m.next[tp]
		if !ok {
			offs[i] = -1
			continue
		}
		offs[i] = o
		m.next[tp]++
		m.written = append(m.written, tp.Topic+" admin")
	}
	return offs, nil
}

func (m *fakeMarkers) produce(tp fsm.TopicPartition, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next[tp] += n
}

func newExternalHarness(t *testing.T) (*harness, *fakeMarkers) {
	h := newHarness(t, fsm.LatestLevel)
	m := &fakeMarkers{next: map[fsm.TopicPartition]int64{{Topic: "x", Partition: 0}: 5}}
	h.c = New(Config{MaxTimeout: time.Minute, ExpiryCheck: time.Hour, IDExpiration: time.Hour, Markers: m,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }}, h.raft, h.f)
	return h, m
}

// With partitions outside the FSM, EndTxn is answered once the markers are
// written and the transaction complete; a failed marker write leaves it
// prepared and answers CONCURRENT_TRANSACTIONS (retriable), and a retry,
// or the leader's expiry check, completes it.
func TestExternalMarkersWrittenBeforeEndTxnAnswers(t *testing.T) {
	h, m := newExternalHarness(t)
	ctx := t.Context()
	tp := fsm.TopicPartition{Topic: "x", Partition: 0}
	pid, epoch, code := h.c.InitProducerID(ctx, "tx", 10_000, -1, -1)
	if code != 0 {
		t.Fatal(code)
	}
	if codes, code := h.c.AddPartitions(ctx, "tx", pid, epoch, []fsm.TopicPartition{tp, {Topic: "nope"}}); code != 0 ||
		codes[0] != kerr.OperationNotAttempted.Code || codes[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("add with an unknown partition: %v %d", codes, code)
	}
	if codes, code := h.c.AddPartitions(ctx, "tx", pid, epoch, []fsm.TopicPartition{tp}); code != 0 || codes[0] != 0 {
		t.Fatalf("add: %v %d", codes, code)
	}
	m.produce(tp, 3) // offsets 5..7
	if lso := h.f.ExtLastStableOffset(tp, 8); lso != 5 {
		t.Fatalf("LSO %d, want 5", lso)
	}
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, false); code != 0 {
		t.Fatalf("abort: %d", code)
	}
	if v, _ := h.f.Transaction("tx"); v.State != fsm.TxnCompleteAbort || len(m.written) != 1 {
		t.Fatalf("after EndTxn: %+v, markers %v", v, m.written)
	}
	if got := h.f.ExtAbortedTxns(tp, 0, 9); len(got) != 1 || got[0].FirstOffset != 5 || got[0].LastOffset != 8 {
		t.Fatalf("aborted %+v", got)
	}

	// The next transaction's commit fails to write its marker.
	h.c.AddPartitions(ctx, "tx", pid, epoch, []fsm.TopicPartition{tp})
	m.fail = true
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("commit with the backend down: %d, want CONCURRENT_TRANSACTIONS", code)
	}
	if v, _ := h.f.Transaction("tx"); v.State != fsm.TxnPrepareCommit {
		t.Fatalf("state %v, want PrepareCommit", v.State)
	}
	if _, _, code := h.c.InitProducerID(ctx, "tx", 10_000, pid, epoch); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init while prepared: %d", code)
	}
	m.fail = false
	h.c.expire(ctx) // the leader's check completes it
	if v, _ := h.f.Transaction("tx"); v.State != fsm.TxnCompleteCommit || len(m.written) != 2 || m.written[1] != "x commit" {
		t.Fatalf("after the expiry check: %v, markers %v", v.State, m.written)
	}
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("retried commit: %d", code)
	}
	if len(m.written) != 2 {
		t.Fatalf("a retry of a completed commit wrote markers: %v", m.written)
	}

	// A new producer fences an open transaction: aborted, its markers
	// written, before the new producer's retry succeeds.
	h.c.AddPartitions(ctx, "tx", pid, epoch, []fsm.TopicPartition{tp})
	if _, _, code := h.c.InitProducerID(ctx, "tx", 10_000, -1, -1); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init over an open transaction: %d", code)
	}
	if len(m.written) != 3 || m.written[2] != "x abort" {
		t.Fatalf("fencing markers %v", m.written)
	}
	if _, e, code := h.c.InitProducerID(ctx, "tx", 10_000, -1, -1); code != 0 || e != epoch+2 {
		t.Fatalf("init after the fencing abort: epoch %d, %d", e, code)
	}
}

// An administrator's abort (WriteTxnMarkers: kafka-transactions abort) of
// a transaction open in a partition outside the FSM: the marker is written,
// then recorded, so the partition's transaction is closed and listed as
// aborted, and the last stable offset moves past it; the coordinator's
// transaction is not touched, as in Kafka. An older epoch than the
// producer's gets INVALID_PRODUCER_EPOCH and writes nothing; an unknown
// partition UNKNOWN_TOPIC_OR_PARTITION.
func TestExternalAdminMarkers(t *testing.T) {
	h, m := newExternalHarness(t)
	ctx := t.Context()
	tp := fsm.TopicPartition{Topic: "x", Partition: 0}
	pid, epoch, code := h.c.InitProducerID(ctx, "tx", 10_000, -1, -1)
	if code != 0 {
		t.Fatal(code)
	}
	if _, code := h.c.AddPartitions(ctx, "tx", pid, epoch, []fsm.TopicPartition{tp}); code != 0 {
		t.Fatal(code)
	}
	m.produce(tp, 2) // offsets 5, 6
	codes, code := h.c.WriteMarkers(ctx, []fsm.TxnMarker{
		{ProducerID: pid, Epoch: epoch, Partitions: []fsm.TopicPartition{tp, {Topic: "nope"}}},
		{ProducerID: pid, Epoch: epoch - 1, Partitions: []fsm.TopicPartition{tp}},
	})
	if code != 0 || fmt.Sprint(codes) != fmt.Sprint([]int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidProducerEpoch.Code}) {
		t.Fatalf("admin markers: %v %d", codes, code)
	}
	if len(m.written) != 1 {
		t.Fatalf("markers written %v, want one", m.written)
	}
	if h.f.ExtOngoing(tp, pid) {
		t.Fatal("the partition's transaction is still open")
	}
	if lso := h.f.ExtLastStableOffset(tp, 8); lso != 8 {
		t.Fatalf("LSO %d, want 8", lso)
	}
	if got := h.f.ExtAbortedTxns(tp, 0, 8); len(got) != 1 || got[0].FirstOffset != 5 || got[0].LastOffset != 7 {
		t.Fatalf("aborted %+v, want 5..7", got)
	}
	if v, _ := h.f.Transaction("tx"); v.State != fsm.TxnOngoing {
		t.Fatalf("coordinator state %v, want Ongoing", v.State)
	}
}

// Below LevelExtTxnMarkers an administrator's markers on Iggy are refused
// (UNSUPPORTED_VERSION) and nothing is written.
func TestExternalAdminMarkersNeedTheirLevel(t *testing.T) {
	h := newHarness(t, fsm.LevelExternalTxns)
	m := &fakeMarkers{next: map[fsm.TopicPartition]int64{{Topic: "x", Partition: 0}: 5}}
	h.c = New(Config{MaxTimeout: time.Minute, ExpiryCheck: time.Hour, Markers: m, Logger: slog.New(slog.DiscardHandler)}, h.raft, h.f)
	_, code := h.c.WriteMarkers(t.Context(), []fsm.TxnMarker{{ProducerID: 1, Partitions: []fsm.TopicPartition{{Topic: "x"}}}})
	if code != kerr.UnsupportedVersion.Code || len(m.written) != 0 {
		t.Fatalf("below the level: %d, markers %v", code, m.written)
	}
}

// The leader's check forgets the aborted transactions of a partition
// outside the FSM whose markers are below the partition's log start (Iggy's
// retention removed them), and only those; below LevelPruneExtAborted it
// keeps them.
func TestExternalAbortedPrunedBelowTheLogStart(t *testing.T) {
	for _, level := range []fsm.Level{fsm.LevelExtTxnMarkers, fsm.LatestLevel} {
		h := newHarness(t, level)
		tp := fsm.TopicPartition{Topic: "x", Partition: 0}
		m := &fakeMarkers{next: map[fsm.TopicPartition]int64{tp: 0}, start: map[fsm.TopicPartition]int64{}}
		h.c = New(Config{MaxTimeout: time.Minute, ExpiryCheck: time.Hour, IDExpiration: time.Hour, Markers: m,
			Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }}, h.raft, h.f)
		ctx := t.Context()
		pid, epoch, code := h.c.InitProducerID(ctx, "tx", 10_000, -1, -1)
		if code != 0 {
			t.Fatal(code)
		}
		for range 3 { // aborted transactions of 2 records and a marker: markers at 2, 5, 8
			h.c.AddPartitions(ctx, "tx", pid, epoch, []fsm.TopicPartition{tp})
			m.produce(tp, 2)
			if code := h.c.EndTxn(ctx, "tx", pid, epoch, false); code != 0 {
				t.Fatalf("abort: %d", code)
			}
		}
		if got := h.f.ExtAbortedTxns(tp, 0, 9); len(got) != 3 {
			t.Fatalf("aborted %+v, want 3", got)
		}
		m.start[tp] = 6 // retention removed offsets 0-5
		h.c.expire(ctx)
		got := h.f.ExtAbortedTxns(tp, 0, 9)
		want := 1
		if level < fsm.LevelPruneExtAborted {
			want = 3
		}
		if len(got) != want || got[len(got)-1].LastOffset != 8 {
			t.Fatalf("level %d: aborted after the check %+v, want the last %d", level, got, want)
		}
	}
}
