package txn

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
)

// testRaft applies proposals straight to an FSM, through Admit as the
// real node does; leadership is switched by the test.
type testRaft struct {
	mu                 sync.Mutex
	f                  *fsm.FSM
	index              uint64
	leader, raftLeader bool
}

func (r *testRaft) IsLeader() bool   { r.mu.Lock(); defer r.mu.Unlock(); return r.leader }
func (r *testRaft) RaftLeader() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.raftLeader }

func (r *testRaft) Propose(_ context.Context, data []byte, _ bool) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader {
		return nil, cluster.ErrNotLeader
	}
	entry, err := r.f.Admit(data)
	if err != nil {
		return nil, err
	}
	r.index++
	return r.f.Apply(r.index, entry), nil
}

type harness struct {
	t    *testing.T
	raft *testRaft
	f    *fsm.FSM
	c    *Coordinator
	mu   sync.Mutex
	now  time.Time
}

func newHarness(t *testing.T, level fsm.Level) *harness {
	t.Helper()
	f, err := fsm.Open(fsm.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h := &harness{t: t, f: f, raft: &testRaft{f: f, leader: true, raftLeader: true}, now: time.UnixMilli(1_700_000_000_000)}
	h.c = New(Config{MaxTimeout: time.Minute, ExpiryCheck: 5 * time.Millisecond, IDExpiration: time.Hour, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }}, h.raft, f)
	h.raft.Propose(t.Context(), fsm.Encode(&fsm.SetFeatureLevel{Level: level}), false)
	h.raft.Propose(t.Context(), fsm.Encode(&fsm.CreateTopic{Name: "t", Partitions: 1}), false)
	return h
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now = h.now.Add(d)
}

func TestNotCoordinatorAwayFromTheLeader(t *testing.T) {
	h := newHarness(t, fsm.LatestLevel)
	h.raft.leader, h.raft.raftLeader = false, false
	if _, _, code := h.c.InitProducerID(t.Context(), "tx", 1000, -1, -1); code != kerr.NotCoordinator.Code {
		t.Fatalf("on a follower: error %d, want NOT_COORDINATOR", code)
	}
	h.raft.raftLeader = true // elected, still catching up
	if code := h.c.EndTxn(t.Context(), "tx", 1, 0, true); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("on a catching-up leader: error %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
}

func TestRequestChecks(t *testing.T) {
	h := newHarness(t, fsm.LatestLevel)
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		id      string
		timeout int32
		want    *kerr.Error
	}{
		{"empty transactional id", "", 1000, kerr.InvalidRequest},
		{"zero timeout", "tx", 0, kerr.InvalidTransactionTimeout},
		{"timeout above --max-transaction-timeout", "tx", 60_001, kerr.InvalidTransactionTimeout},
	} {
		if _, _, code := h.c.InitProducerID(ctx, tc.id, tc.timeout, -1, -1); code != tc.want.Code {
			t.Errorf("%s: error %d, want %s", tc.name, code, tc.want.Message)
		}
	}
	if _, _, code := h.c.InitProducerID(ctx, "tx", 60_000, -1, -1); code != 0 {
		t.Fatalf("timeout at the maximum: error %d", code)
	}
}

// Below LevelTransactions (a voter still runs an older kgate) a
// transactional producer gets UNSUPPORTED_VERSION.
func TestNeedsTheTransactionsLevel(t *testing.T) {
	h := newHarness(t, fsm.LevelScram)
	if _, _, code := h.c.InitProducerID(t.Context(), "tx", 1000, -1, -1); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %d, want UNSUPPORTED_VERSION", code)
	}
}

func TestExpiredTransactionAbortedAndFenced(t *testing.T) {
	h := newHarness(t, fsm.LatestLevel)
	ctx := t.Context()
	pid, epoch, code := h.c.InitProducerID(ctx, "tx", 1000, -1, -1)
	if code != 0 {
		t.Fatalf("init: %d", code)
	}
	if _, code := h.c.AddPartitions(ctx, "tx", pid, epoch, []fsm.TopicPartition{{Topic: "t", Partition: 0}}); code != 0 {
		t.Fatalf("add partitions: %d", code)
	}
	h.advance(999 * time.Millisecond)
	h.c.expire(ctx)
	if v, _ := h.f.Transaction("tx"); v.State != fsm.TxnOngoing {
		t.Fatalf("state %v before the timeout, want Ongoing", v.State)
	}
	h.advance(time.Millisecond)
	// The leader service finds and aborts it.
	svc, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.c.ExpireTransactions(svc) }()
	deadline := time.Now().Add(10 * time.Second)
	for v, _ := h.f.Transaction("tx"); v.State != fsm.TxnCompleteAbort; v, _ = h.f.Transaction("tx") {
		if time.Now().After(deadline) {
			t.Fatalf("state %v 10 s after the timeout, want CompleteAbort", v.State)
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, _ := h.f.Transaction("tx"); v.Epoch != epoch+1 {
		t.Fatalf("epoch %d after the expiry, want %d (fenced)", v.Epoch, epoch+1)
	}
	if hw := h.f.Partition("t", 0).Log.Next(); hw != 1 {
		t.Fatalf("high watermark %d, want the abort marker only", hw)
	}
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("the expired producer's commit: error %d, want PRODUCER_FENCED", code)
	}
	// The producer starts over with a new InitProducerId, at the next epoch.
	if _, e2, code := h.c.InitProducerID(ctx, "tx", 1000, -1, -1); code != 0 || e2 != epoch+2 {
		t.Fatalf("re-init: epoch %d error %d, want %d", e2, code, epoch+2)
	}
}

// A transactional id without an ongoing transaction, unused for
// IDExpiration, is removed by the leader service: it is no longer
// described or listed, and a producer that uses it again starts with a new
// producer id at epoch 0. An ongoing transaction keeps its id.
func TestIdleTransactionalIDsExpire(t *testing.T) {
	h := newHarness(t, fsm.LatestLevel)
	ctx := t.Context()
	tps := []fsm.TopicPartition{{Topic: "t", Partition: 0}}
	pid, epoch, code := h.c.InitProducerID(ctx, "idle", 60_000, -1, -1)
	if code != 0 {
		t.Fatalf("init: %d", code)
	}
	h.c.AddPartitions(ctx, "idle", pid, epoch, tps)
	if code := h.c.EndTxn(ctx, "idle", pid, epoch, true); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	h.advance(30 * time.Minute)
	if _, _, code := h.c.InitProducerID(ctx, "recent", 60_000, -1, -1); code != 0 {
		t.Fatalf("init: %d", code)
	}
	h.advance(30*time.Minute - time.Millisecond)
	h.c.expire(ctx)
	if _, code := h.c.Describe("idle"); code != 0 {
		t.Fatalf("an id idle for less than the expiration: describe error %d", code)
	}
	h.advance(time.Millisecond)
	// The leader service finds it.
	svc, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.c.ExpireTransactions(svc) }()
	deadline := time.Now().Add(10 * time.Second)
	for _, code := h.c.Describe("idle"); code == 0; _, code = h.c.Describe("idle") {
		if time.Now().After(deadline) {
			t.Fatal("the idle id is still there 10 s after its expiration")
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, code := h.c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe of the expired id: error %d, want TRANSACTIONAL_ID_NOT_FOUND", code)
	}
	var listed []string
	for _, v := range h.c.List() {
		listed = append(listed, v.TransactionalID)
	}
	if len(listed) != 1 || listed[0] != "recent" {
		t.Fatalf("listed %v, want [recent]", listed)
	}
	if code := h.c.EndTxn(ctx, "idle", pid, epoch, true); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("the expired producer's EndTxn: error %d, want INVALID_PRODUCER_ID_MAPPING", code)
	}
	pid2, epoch2, code := h.c.InitProducerID(ctx, "idle", 60_000, -1, -1)
	if code != 0 || pid2 == pid || epoch2 != 0 {
		t.Fatalf("init after expiry: producer %d epoch %d error %d, want a new producer id at epoch 0", pid2, epoch2, code)
	}
	// An ongoing transaction keeps its id however long it runs (its
	// timeout aborts it first; the id then waits its expiration again).
	if _, code := h.c.AddPartitions(ctx, "idle", pid2, epoch2, tps); code != 0 {
		t.Fatalf("add partitions: %d", code)
	}
	h.advance(2 * time.Hour)
	h.c.expire(ctx)
	v, code := h.c.Describe("idle")
	if code != 0 || v.State != fsm.TxnCompleteAbort {
		t.Fatalf("a timed-out transaction's id: %+v error %d, want it aborted and kept", v, code)
	}
	h.advance(time.Hour)
	h.c.expire(ctx)
	if _, code := h.c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("an hour after the abort: describe error %d, want TRANSACTIONAL_ID_NOT_FOUND", code)
	}
}

// Below LevelIdleExpiry (a voter still runs an older kgate) ids are kept
// and everything else works.
func TestIdleIDsKeptBelowTheirLevel(t *testing.T) {
	h := newHarness(t, fsm.LevelTransactions)
	ctx := t.Context()
	if _, _, code := h.c.InitProducerID(ctx, "tx", 1000, -1, -1); code != 0 {
		t.Fatalf("init: %d", code)
	}
	h.advance(2 * time.Hour)
	h.c.expire(ctx)
	if _, code := h.c.Describe("tx"); code != 0 {
		t.Fatalf("describe below LevelIdleExpiry: error %d, want the id kept", code)
	}
}

// WriteMarkers is written by the serving leader only, with its time, and
// needs LevelTxnMarkers.
func TestWriteMarkers(t *testing.T) {
	h := newHarness(t, fsm.LatestLevel)
	markers := []fsm.TxnMarker{{ProducerID: 9, Partitions: []fsm.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}}}
	codes, code := h.c.WriteMarkers(t.Context(), markers)
	if code != 0 || len(codes) != 2 || codes[0] != 0 || codes[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("on the leader: %v, %d", codes, code)
	}
	p := h.f.Partition("t", 0)
	if hw := p.Log.Next(); hw != 1 {
		t.Fatalf("high watermark %d, want the marker", hw)
	}
	data, err := p.Log.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(data); err != nil || b.MaxTimestamp != h.now.UnixMilli() || b.ProducerID != 9 {
		t.Fatalf("marker batch %+v (%v), want producer 9 at the leader's time %d", b, err, h.now.UnixMilli())
	}
	h.raft.leader = false // elected, still catching up
	if _, code := h.c.WriteMarkers(t.Context(), markers); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("on a catching-up leader: error %d", code)
	}
	h.raft.raftLeader = false
	if _, code := h.c.WriteMarkers(t.Context(), markers); code != kerr.NotCoordinator.Code {
		t.Fatalf("on a follower: error %d", code)
	}
	low := newHarness(t, fsm.LevelIdleExpiry)
	if _, code := low.c.WriteMarkers(t.Context(), markers); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("below LevelTxnMarkers: error %d, want UNSUPPORTED_VERSION", code)
	}
}
