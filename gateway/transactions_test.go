package gateway_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/records"
)

// consumeUntilEnds reads topic from the start at the given isolation level
// until every partition has shown a record with value "end", and returns
// the other values, sorted.
func consumeUntilEnds(t *testing.T, addr, topic string, partitions int, level kgo.IsolationLevel) []string {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(t)
	ends := map[int32]bool{}
	var got []string
	for len(ends) < partitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records, %d of %d partitions ended: %v", len(got), len(ends), partitions, ctx.Err())
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				ends[r.Partition] = true
				return
			}
			got = append(got, string(r.Value))
		})
	}
	sort.Strings(got)
	return got
}

func TestTransactionalProducerCommitAndAbort(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "txn", 2, nil)
	p := newClient(t, n.addr, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testCtx(t)
	var committed, all []string
	for i := 0; i < 8; i++ {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 4; j++ {
			v := fmt.Sprintf("%d-%d", i, j)
			if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(j % 2)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			all = append(all, v)
			if i%2 == 0 {
				committed = append(committed, v)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(i%2 == 0)); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < 2; part++ {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("end"), Partition: part}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	sort.Strings(committed)
	sort.Strings(all)
	if got := consumeUntilEnds(t, n.addr, "txn", 2, kgo.ReadCommitted()); fmt.Sprint(got) != fmt.Sprint(committed) {
		t.Fatalf("read_committed saw %v\nwant %v", got, committed)
	}
	if got := consumeUntilEnds(t, n.addr, "txn", 2, kgo.ReadUncommitted()); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("read_uncommitted saw %v\nwant %v", got, all)
	}
}

// A second producer with the same transactional id fences the first: the
// zombie's commit fails and its open transaction is aborted.
func TestTransactionalZombieFenced(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "zombie", 1, nil)
	ctx := testCtx(t)
	zombie := newClient(t, n.addr, kgo.TransactionalID("tx-z"), kgo.DefaultProduceTopic("zombie"))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := newClient(t, n.addr, kgo.TransactionalID("tx-z"), kgo.DefaultProduceTopic("zombie"))
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ProduceSync(ctx, kgo.StringRecord("fresh")).FirstErr(); err != nil {
		t.Fatalf("the new producer's produce: %v", err)
	}
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
	if err := fresh.ProduceSync(ctx, kgo.StringRecord("end")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consumeUntilEnds(t, n.addr, "zombie", 1, kgo.ReadCommitted()); fmt.Sprint(got) != "[fresh]" {
		t.Fatalf("read_committed saw %v, want [fresh]", got)
	}
}

func initTxn(t *testing.T, c *rawConn, version int16, id string, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(version)
	req.TransactionalID = kmsg.StringPtr(id)
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return c.do(req).(*kmsg.InitProducerIDResponse)
}

func endTxn(c *rawConn, version int16, id string, pid int64, epoch int16, commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(version)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return c.do(req).(*kmsg.EndTxnResponse).ErrorCode
}

func addPartition(c *rawConn, version int16, id string, pid int64, epoch int16, topic string, p int32) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(version)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{p}
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.AddPartitionsToTxnResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// Error codes per version, as Kafka gives them: PRODUCER_FENCED from the
// versions of KIP-588, INVALID_PRODUCER_EPOCH before.
func TestTransactionErrorsPerVersion(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "errs", 1, nil)
	c := dialRaw(t, n.addr)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorType, fc.CoordinatorKey = 1, "tx-e"
	if r := c.do(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 || r.NodeID != 1 {
		t.Fatalf("FindCoordinator TRANSACTION: error %d node %d", r.ErrorCode, r.NodeID)
	}
	if r := initTxn(t, c, 4, "tx-e", 2*60*1000, -1, -1); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout above the maximum: error %d", r.ErrorCode)
	}
	first := initTxn(t, c, 4, "tx-e", 10000, -1, -1)
	if first.ErrorCode != 0 || first.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: %+v", first)
	}
	if code := endTxn(c, 3, "tx-e", first.ProducerID, 0, true); code != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn with no transaction: error %d, want INVALID_TXN_STATE", code)
	}
	second := initTxn(t, c, 4, "tx-e", 10000, -1, -1)
	if second.ErrorCode != 0 || second.ProducerID != first.ProducerID || second.ProducerEpoch != 1 {
		t.Fatalf("second InitProducerId: %+v", second)
	}
	for _, tc := range []struct {
		name string
		got  int16
		want *kerr.Error
	}{
		{"EndTxn v1", endTxn(c, 1, "tx-e", first.ProducerID, 0, true), kerr.InvalidProducerEpoch},
		{"EndTxn v3", endTxn(c, 3, "tx-e", first.ProducerID, 0, true), kerr.ProducerFenced},
		{"AddPartitionsToTxn v1", addPartition(c, 1, "tx-e", first.ProducerID, 0, "errs", 0), kerr.InvalidProducerEpoch},
		{"AddPartitionsToTxn v3", addPartition(c, 3, "tx-e", first.ProducerID, 0, "errs", 0), kerr.ProducerFenced},
		{"AddPartitionsToTxn unknown producer id", addPartition(c, 3, "tx-e", first.ProducerID+1, 1, "errs", 0), kerr.InvalidProducerIDMapping},
		{"AddPartitionsToTxn unknown topic", addPartition(c, 3, "tx-e", first.ProducerID, 1, "nope", 0), kerr.UnknownTopicOrPartition},
		{"InitProducerId v3 with another producer id", initTxn(t, c, 3, "tx-e", 10000, first.ProducerID+7, 0).ErrorCode, kerr.InvalidProducerEpoch},
		{"InitProducerId v4 with another producer id", initTxn(t, c, 4, "tx-e", 10000, first.ProducerID+7, 0).ErrorCode, kerr.ProducerFenced},
	} {
		if tc.got != tc.want.Code {
			t.Errorf("%s: error %d, want %s (%d)", tc.name, tc.got, tc.want.Message, tc.want.Code)
		}
	}

	// The batched form (v4): verify_only checks without adding.
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(4)
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "tx-e", second.ProducerID, second.ProducerEpoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "errs", []int32{0}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	verify := func() int16 {
		return c.do(req).(*kmsg.AddPartitionsToTxnResponse).Transactions[0].Topics[0].Partitions[0].ErrorCode
	}
	if code := verify(); code != kerr.InvalidTxnState.Code {
		t.Fatalf("verify before adding: error %d, want INVALID_TXN_STATE", code)
	}
	req.Transactions[0].VerifyOnly = false
	if code := verify(); code != 0 {
		t.Fatalf("batched add: error %d", code)
	}
	req.Transactions[0].VerifyOnly = true
	if code := verify(); code != 0 {
		t.Fatalf("verify after adding: error %d", code)
	}
}

func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, prefix string, n int) []byte {
	return build(t, records.Builder{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: true}, valueRecords(prefix, n))
}

func produceTxn(t *testing.T, c *rawConn, id, topic string, batch []byte) int16 {
	t.Helper()
	req := produceReq(9, -1, topic, 0, batch)
	req.TransactionID = kmsg.StringPtr(id)
	return c.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// read_committed stops at the last stable offset and lists aborted
// transactions; ListOffsets answers the LSO to read_committed.
func TestReadCommittedStopsAtLastStableOffset(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "lso", 1, nil)
	c := dialRaw(t, n.addr)
	ip := initTxn(t, c, 4, "tx-l", 10000, -1, -1)
	pid, epoch := ip.ProducerID, ip.ProducerEpoch
	if code := produceTxn(t, c, "tx-l", "lso", txnBatch(t, pid, epoch, 0, "early", 2)); code != kerr.InvalidTxnState.Code {
		t.Fatalf("transactional batch before AddPartitionsToTxn: error %d, want INVALID_TXN_STATE", code)
	}
	if code := addPartition(c, 3, "tx-l", pid, epoch, "lso", 0); code != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", code)
	}
	if code := produceTxn(t, c, "tx-l", "lso", txnBatch(t, pid, epoch, 0, "a", 2)); code != 0 {
		t.Fatalf("produce: %d", code)
	}
	fetch := func(level int8) kmsg.FetchResponseTopicPartition {
		req := fetchReq("lso", 0, 0, 0, 0, 1<<20)
		req.IsolationLevel = level
		return fetchPartition(t, c.do(req).(*kmsg.FetchResponse))
	}
	listLatest := func(level int8) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(8)
		req.ReplicaID, req.IsolationLevel = -1, level
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lso"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
	}
	if p := fetch(1); p.HighWatermark != 2 || p.LastStableOffset != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("read_committed with an open transaction: HW %d LSO %d %d bytes", p.HighWatermark, p.LastStableOffset, len(p.RecordBatches))
	}
	if p := fetch(0); p.LastStableOffset != 0 || len(decodeBatches(t, p.RecordBatches)) != 2 {
		t.Fatalf("read_uncommitted with an open transaction: LSO %d", p.LastStableOffset)
	}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = "lso", []int32{0}
	dp.Topics = append(dp.Topics, dpt)
	if ps := c.do(dp).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ActiveProducers; len(ps) != 1 || ps[0].CurrentTxnStartOffset != 0 {
		t.Fatalf("DescribeProducers with an open transaction from 0: %+v", ps)
	}
	listAt := func(level int8, ts int64) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(8)
		req.ReplicaID, req.IsolationLevel = -1, level
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lso"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
	}
	if rc, ru := listAt(1, 0), listAt(0, 0); rc != -1 || ru != 0 {
		t.Fatalf("ListOffsets by timestamp 0: read_committed %d read_uncommitted %d, want -1 and 0", rc, ru)
	}
	if rc, ru := listLatest(1), listLatest(0); rc != 0 || ru != 2 {
		t.Fatalf("ListOffsets latest: read_committed %d read_uncommitted %d, want 0 and 2", rc, ru)
	}
	if code := endTxn(c, 3, "tx-l", pid, epoch, false); code != 0 {
		t.Fatalf("abort: %d", code)
	}
	p := fetch(1)
	if p.HighWatermark != 3 || p.LastStableOffset != 3 {
		t.Fatalf("after abort: HW %d LSO %d, want 3 3", p.HighWatermark, p.LastStableOffset)
	}
	if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != pid || p.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted transactions %+v, want producer %d from 0", p.AbortedTransactions, pid)
	}
	if rc := listLatest(1); rc != 3 {
		t.Fatalf("ListOffsets read_committed after abort: %d", rc)
	}
	// Fetching from after the aborted transaction lists nothing.
	req := fetchReq("lso", 0, 3, 0, 0, 1<<20)
	req.IsolationLevel = 1
	if p := fetchPartition(t, c.do(req).(*kmsg.FetchResponse)); len(p.AbortedTransactions) != 0 {
		t.Fatalf("aborted transactions from offset 3: %+v", p.AbortedTransactions)
	}
}

// TxnOffsetCommit's offsets are visible to OffsetFetch only once the
// transaction commits.
func TestTxnOffsetCommitVisibleOnCommit(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "offs", 1, nil)
	c := dialRaw(t, n.addr)
	ip := initTxn(t, c, 4, "tx-o", 10000, -1, -1)
	pid, epoch := ip.ProducerID, ip.ProducerEpoch
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.SetVersion(3)
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx-o", pid, epoch, "g-o"
	if r := c.do(ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %d", r.ErrorCode)
	}
	oc := kmsg.NewPtrTxnOffsetCommitRequest()
	oc.SetVersion(3)
	oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch, oc.Generation = "tx-o", "g-o", pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "offs"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset, rp.LeaderEpoch = 17, -1
	rt.Partitions = append(rt.Partitions, rp)
	oc.Topics = append(oc.Topics, rt)
	if r := c.do(oc).(*kmsg.TxnOffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	committed := func(stable bool) (int64, int16) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(7)
		req.Group, req.RequireStable = "g-o", stable
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "offs", []int32{0}
		req.Topics = append(req.Topics, ft)
		p := c.do(req).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	if off, code := committed(false); off != -1 || code != 0 {
		t.Fatalf("offset %d (error %d) visible before the commit", off, code)
	}
	if _, code := committed(true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable before the commit: error %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
	if code := endTxn(c, 3, "tx-o", pid, epoch, true); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	for _, stable := range []bool{false, true} {
		if off, code := committed(stable); off != 17 || code != 0 {
			t.Fatalf("offset after commit %d (error %d, require_stable %v), want 17", off, code, stable)
		}
	}
}

// Consume-transform-produce with franz-go's GroupTransactSession: every
// input record appears exactly once in the output, read committed, though
// every other transaction is aborted and its input consumed again.
func TestGroupTransactSessionExactlyOnce(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "ctp-in", 2, nil)
	createTopic(t, n.addr, "ctp-out", 2, nil)
	ctx := testCtx(t)
	const total = 60
	in := newClient(t, n.addr, kgo.DefaultProduceTopic("ctp-in"))
	for i := 0; i < total; i++ {
		if err := in.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("in-%03d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(n.addr), kgo.TransactionalID("ctp-tx"),
		kgo.ConsumerGroup("ctp"), kgo.ConsumeTopics("ctp-in"), kgo.DefaultProduceTopic("ctp-out"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	moved, aborted := 0, 0
	for txn := 0; moved < total; txn++ {
		fs := sess.PollRecords(ctx, 7)
		if ctx.Err() != nil {
			t.Fatalf("moved %d of %d records: %v", moved, total, ctx.Err())
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			out := &kgo.Record{Value: []byte("out-" + string(r.Value)[3:]), Partition: r.Partition}
			if err := sess.ProduceSync(ctx, out).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
			}
			n++
		})
		commit := txn%2 == 0 || n == 0
		committed, err := sess.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			moved += n
		} else {
			aborted += n
		}
	}
	if aborted == 0 {
		t.Fatal("no transaction with records was aborted")
	}
	if err := sess.Begin(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if err := sess.ProduceSync(ctx, &kgo.Record{Value: []byte("end"), Partition: p}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sess.End(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < total; i++ {
		want = append(want, fmt.Sprintf("out-%03d", i))
	}
	if got := consumeUntilEnds(t, n.addr, "ctp-out", 2, kgo.ReadCommitted()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("output read committed (%d records, %d aborted on the way):\n%v\nwant\n%v", len(got), aborted, got, want)
	}
}

// DescribeTransactions and ListTransactions, as kafka-transactions uses them.
func TestDescribeAndListTransactions(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "dl", 2, nil)
	c := dialRaw(t, n.addr)
	ip := initTxn(t, c, 4, "tx-d", 10000, -1, -1)
	for p := int32(1); p >= 0; p-- {
		if code := addPartition(c, 3, "tx-d", ip.ProducerID, ip.ProducerEpoch, "dl", p); code != 0 {
			t.Fatalf("AddPartitionsToTxn: %d", code)
		}
	}
	initTxn(t, c, 4, "tx-idle", 10000, -1, -1)

	dr := kmsg.NewPtrDescribeTransactionsRequest()
	dr.TransactionalIDs = []string{"tx-d", "nope"}
	states := c.do(dr).(*kmsg.DescribeTransactionsResponse).TransactionStates
	if len(states) != 2 {
		t.Fatalf("%d states", len(states))
	}
	d := states[0]
	if d.ErrorCode != 0 || d.State != "Ongoing" || d.ProducerID != ip.ProducerID || d.TimeoutMillis != 10000 || d.StartTimestamp <= 0 ||
		len(d.Topics) != 1 || d.Topics[0].Topic != "dl" || fmt.Sprint(d.Topics[0].Partitions) != "[0 1]" {
		t.Fatalf("describe tx-d: %+v", d)
	}
	if states[1].ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe an unknown id: error %d, want TRANSACTIONAL_ID_NOT_FOUND", states[1].ErrorCode)
	}
	list := func(filters ...string) *kmsg.ListTransactionsResponse {
		lr := kmsg.NewPtrListTransactionsRequest()
		lr.SetVersion(1)
		lr.StateFilters = filters
		return c.do(lr).(*kmsg.ListTransactionsResponse)
	}
	ids := func(r *kmsg.ListTransactionsResponse) string {
		var out []string
		for _, s := range r.TransactionStates {
			out = append(out, s.TransactionalID+"="+s.TransactionState)
		}
		return fmt.Sprint(out)
	}
	if got := ids(list()); got != "[tx-d=Ongoing tx-idle=Empty]" {
		t.Fatalf("list: %s", got)
	}
	if r := list("Ongoing", "Bogus"); ids(r) != "[tx-d=Ongoing]" || fmt.Sprint(r.UnknownStateFilters) != "[Bogus]" {
		t.Fatalf("list Ongoing: %s, unknown filters %v", ids(r), r.UnknownStateFilters)
	}
}
