package gateway_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/coordinator/txn"
)

// A transactional id left idle past --transactional-id-expiration goes,
// as in Kafka: ListTransactions no longer lists it, DescribeTransactions
// answers TRANSACTIONAL_ID_NOT_FOUND, and a new transactional producer with
// the same id works, with a new producer id at epoch 0. An id with an
// ongoing transaction stays.
func TestIdleTransactionalIDExpires(t *testing.T) {
	const expiration = time.Hour
	// The coordinator's clock is the test's: the id is idle for an hour
	// exactly when the test says so.
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	n := startNodeOpts(t, nil, true, nodeOpts{txn: &txn.Config{MaxTimeout: 3 * time.Hour,
		ExpiryCheck: 20 * time.Millisecond, IDExpiration: expiration, Now: clock}})
	createTopic(t, n.addr, "exp", 1, nil)
	ctx := testCtx(t)
	commitOne := func(v string) {
		t.Helper()
		p := newClient(t, n.addr, kgo.TransactionalID("tx-exp"), kgo.DefaultProduceTopic("exp"))
		defer p.Close()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %s: %v", v, err)
		}
	}
	c := dialRaw(t, n.addr)
	describe := func(id string) kmsg.DescribeTransactionsResponseTransactionState {
		t.Helper()
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{id}
		return c.do(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
	}

	commitOne("first")
	before := describe("tx-exp")
	if before.ErrorCode != 0 || before.State != "CompleteCommit" {
		t.Fatalf("describe after the commit: %+v", before)
	}
	// Another id keeps a transaction open (its timeout, 2 h, is after the
	// expiration).
	open := initTxn(t, c, 4, "tx-open", 2*3600_000, -1, -1)
	if code := addPartition(c, 3, "tx-open", open.ProducerID, open.ProducerEpoch, "exp", 0); code != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", code)
	}

	adm := kadm.NewClient(newClient(t, n.addr))
	listed := func() string {
		t.Helper()
		l, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			t.Fatalf("list transactions: %v", err)
		}
		var out []string
		for _, tx := range l.Sorted() {
			out = append(out, tx.TxnID+"="+tx.State)
		}
		return fmt.Sprint(out)
	}
	if got := listed(); got != "[tx-exp=CompleteCommit tx-open=Ongoing]" {
		t.Fatalf("listed before the expiration: %s", got)
	}
	// Just before the expiration, a pass of the expiry service keeps the
	// id. The pass shows by aborting a transaction whose 1 ms timeout ends
	// with the same step of the clock; a pass removes idle ids before it
	// aborts anything.
	advance(expiration - 2*time.Millisecond)
	check := initTxn(t, c, 4, "check", 1, -1, -1)
	if code := addPartition(c, 3, "check", check.ProducerID, check.ProducerEpoch, "exp", 0); code != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", code)
	}
	advance(time.Millisecond)
	for d := describe("check"); d.State != "CompleteAbort"; d = describe("check") {
		if ctx.Err() != nil {
			t.Fatalf("the expiry service did not abort a timed-out transaction: %+v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := listed(); got != "[check=CompleteAbort tx-exp=CompleteCommit tx-open=Ongoing]" {
		t.Fatalf("listed a millisecond before the expiration: %s", got)
	}
	advance(time.Millisecond)
	for listed() != "[check=CompleteAbort tx-open=Ongoing]" {
		if ctx.Err() != nil {
			t.Fatalf("listed %s once the id was idle for the expiration, want it gone", listed())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := describe("tx-exp"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe of the expired id: %+v, want TRANSACTIONAL_ID_NOT_FOUND", d)
	}
	if d := describe("tx-open"); d.ErrorCode != 0 || d.State != "Ongoing" {
		t.Fatalf("describe of the open transaction's id: %+v", d)
	}

	commitOne("end")
	after := describe("tx-exp")
	if after.ErrorCode != 0 || after.State != "CompleteCommit" || after.ProducerID == before.ProducerID || after.ProducerEpoch != 0 {
		t.Fatalf("describe after a new producer with the expired id: %+v, want a new producer id at epoch 0 (was %d)",
			after, before.ProducerID)
	}
	if code := endTxn(c, 3, "tx-open", open.ProducerID, open.ProducerEpoch, true); code != 0 {
		t.Fatalf("commit of the open transaction: %d", code)
	}
	if got := consumeUntilEnds(t, n.addr, "exp", 1, kgo.ReadCommitted()); fmt.Sprint(got) != "[first]" {
		t.Fatalf("read_committed before the last record: %v, want [first]", got)
	}
}
