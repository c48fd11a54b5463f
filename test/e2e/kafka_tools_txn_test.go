package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// checkTransactionTools runs kafka-transactions list, describe,
// describe-producers, find-hanging and abort as docs/operations.md shows
// them, through a follower (the tool finds the coordinator and the
// partition leader itself), on a transaction a producer has left open: the
// transaction is not hanging (its coordinator has the partition in it),
// abort closes it in the partition with WriteTxnMarkers, and read_committed
// sees only what the producer commits afterwards. With Iggy, see
// checkTransactionToolsIggy.
func checkTransactionTools(t *testing.T, k *kafkaTools, c *kgateCluster, follower int32) {
	const topic = "payments"
	via := c.node(follower).kafka()
	_, adm := c.adminClient()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	findHanging := func() {
		t.Helper()
		// Through every node, asking about each node's replicas: each
		// answers DescribeProducers from its own replica.
		for _, id := range c.ids() {
			k.exact = map[string]string{"1": strconv.Itoa(int(id))}
			out := k.run(c.node(id).kafka(), "kafka-transactions.sh", "--bootstrap-server", docBootstrap, "find-hanging", "--broker-id", "1")
			k.exact = nil
			checkNoHanging(t, out, "find-hanging --broker-id "+strconv.Itoa(int(id)))
		}
		out := k.run(via, "kafka-transactions.sh", "--bootstrap-server", docBootstrap, "find-hanging",
			"--topic", topic, "--partition", "0", "--max-transaction-timeout", "0")
		checkNoHanging(t, out, "find-hanging --topic")
	}
	abortAt0 := []string{"--bootstrap-server", docBootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"}
	const noOpenAt0 = "Could not find any open transactions starting at offset 0 on partition payments-0"
	list := []string{"--bootstrap-server", docBootstrap, "list"}
	describe := []string{"--bootstrap-server", docBootstrap, "describe", "--transactional-id", "payments-1"}
	abortPID := []string{"--bootstrap-server", docBootstrap, "abort", "--topic", topic, "--partition", "0",
		"--producer-id", "2", "--producer-epoch", "0", "--coordinator-epoch", "-1"}
	if iggyMode() {
		checkTransactionToolsIggy(ctx, t, k, c, via, findHanging, abortAt0, noOpenAt0, list, describe, abortPID)
		return
	}

	// A transactional producer writes one record (offset 0) and leaves its
	// transaction open, as a producer that died would: the coordinator
	// would abort it at its timeout.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("payments-1"),
		kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(v string) {
		t.Helper()
		if err := prod.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce("aborted-by-tool-1")
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil || epoch != 0 {
		t.Fatalf("producer id %d epoch %d: %v", pid, epoch, err)
	}

	out, leaders := leaderAround(c, func() string { return k.run(via, "kafka-transactions.sh", list...) })
	if !regexp.MustCompile(`(?m)^payments-1\s+` + leaders + `\s+` + strconv.FormatInt(pid, 10) + `\s+Ongoing\s*$`).MatchString(out) {
		t.Fatalf("kafka-transactions list: want payments-1 Ongoing at coordinator %s:\n%s", leaders, out)
	}
	out = k.run(via, "kafka-transactions.sh", describe...)
	if !strings.Contains(out, "Ongoing") || !strings.Contains(out, "payments-0") {
		t.Fatalf("kafka-transactions describe: want Ongoing with payments-0:\n%s", out)
	}
	checkOpenTxn(t, k, via, pid, "-1", "0")
	findHanging()

	// abort by start offset: the tool finds the producer in
	// DescribeProducers and sends WriteTxnMarkers to the partition leader.
	k.run(via, "kafka-transactions.sh", abortAt0...)
	checkOpenTxn(t, k, via, pid, "0", "None")
	if end := committedEnd(ctx, t, adm, topic); end != 2 {
		t.Fatalf("read_committed end offset %d after the abort, want 2 (the record and the marker)", end)
	}
	// The coordinator still has the transaction, so the producer goes on:
	// its next record opens the transaction in the partition again, at 2,
	// and abort by producer id and epoch (the older brokers' form) closes
	// that too.
	produce("aborted-by-tool-2")
	checkOpenTxn(t, k, via, pid, "0", "2")
	k.exact = map[string]string{"2": strconv.FormatInt(pid, 10)}
	k.run(via, "kafka-transactions.sh", abortPID...)
	k.exact = nil
	checkOpenTxn(t, k, via, pid, "0", "None")
	// Nothing open at 0 any more.
	if out, err := k.exec(via, "kafka-transactions.sh", abortAt0...); err == nil || !strings.Contains(out, noOpenAt0) {
		t.Fatalf("abort of a closed transaction: exit %v, want %q:\n%s", err, noOpenAt0, out)
	}
	produce("committed")
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the tool's aborts: %v", err)
	}
	onlyCommittedRead(ctx, t, c, topic)
	if got := consumeAll(ctx, t, c, topic, kgo.ReadUncommitted()); len(got) != 3 {
		t.Fatalf("read_uncommitted sees %q, want the three records", got)
	}
	findHanging()
}

func checkNoHanging(t *testing.T, out, what string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "Topic") || !strings.Contains(lines[0], "Duration(min)") {
		t.Fatalf("kafka-transactions %s: want the header and no hanging transaction:\n%s", what, out)
	}
}

// checkOpenTxn checks the producer's LatestCoordinatorEpoch (-1 until an
// abort's marker sets one) and CurrentTransactionStartOffset in
// describe-producers.
func checkOpenTxn(t *testing.T, k *kafkaTools, bootstrap string, pid int64, coord, start string) {
	t.Helper()
	out := k.run(bootstrap, "kafka-transactions.sh", "--bootstrap-server", docBootstrap,
		"describe-producers", "--topic", "payments", "--partition", "0")
	for _, line := range strings.Split(out, "\n") {
		// ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
		if f := strings.Fields(line); len(f) == 6 && f[0] == strconv.FormatInt(pid, 10) {
			if f[2] != coord || f[5] != start {
				t.Fatalf("describe-producers: coordinator epoch %s, transaction start %s, want %s and %s:\n%s", f[2], f[5], coord, start, out)
			}
			return
		}
	}
	t.Fatalf("describe-producers does not list producer %d:\n%s", pid, out)
}

func committedEnd(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	offs, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := offs.Lookup(topic, 0)
	return o.Offset
}

// consumeAll reads the topic (one partition) from the start at the
// isolation level up to its "end" record and returns the values before it.
func consumeAll(ctx context.Context, t *testing.T, c *kgateCluster, topic string, level kgo.IsolationLevel) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming %s: %v (got %q)", topic, err, out)
		}
		end := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				end = true
			} else if !end {
				out = append(out, string(r.Value))
			}
		})
		if end {
			return out
		}
	}
}

// checkTransactionToolsIggy is checkTransactionTools with --backend iggy:
// describe-producers lists the transactional producer with the start of
// the transaction it left open (the partition's next offset when the
// partition joined it) and no coordinator epoch; find-hanging finds it
// not hanging; abort by start offset, then abort by producer id and epoch,
// each close a transaction left open in the partition as on the embedded
// backend (the marker goes into Iggy, the FSM records it), and
// read_committed moves past them. A producer whose transaction the tool
// aborted in the partition commits the rest of it (nothing there): its
// coordinator still had it.
func checkTransactionToolsIggy(ctx context.Context, t *testing.T, k *kafkaTools, c *kgateCluster, via string,
	findHanging func(), abortAt0 []string, noOpenAt0 string, list, describe, abortPID []string) {
	t.Helper()
	const topic = "payments"
	findHanging()
	if out, err := k.exec(via, "kafka-transactions.sh", abortAt0...); err == nil || !strings.Contains(out, noOpenAt0) {
		t.Fatalf("abort by start offset with Iggy, nothing open: exit %v, want %q:\n%s", err, noOpenAt0, out)
	}
	if out, err := k.exec(via, "kafka-transactions.sh", list...); err != nil || strings.Contains(out, "payments-1") {
		t.Fatalf("kafka-transactions list with Iggy: %v\n%s", err, out)
	}
	if out, err := k.exec(via, "kafka-transactions.sh", describe...); err == nil {
		t.Fatalf("kafka-transactions describe of an unknown id with Iggy succeeded:\n%s", out)
	}
	_, adm := c.adminClient()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("payments-1"),
		kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	txn := func(v string, end bool) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		if end {
			if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("commit %s: %v", v, err)
			}
		}
	}
	// A transaction left open, as by a producer that died.
	txn("aborted-by-tool", false)
	pid, _, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, leaders := leaderAround(c, func() string { return k.run(via, "kafka-transactions.sh", list...) })
	if !regexp.MustCompile(`(?m)^payments-1\s+` + leaders + `\s+` + strconv.FormatInt(pid, 10) + `\s+Ongoing\s*$`).MatchString(out) {
		t.Fatalf("kafka-transactions list: want payments-1 Ongoing at coordinator %s:\n%s", leaders, out)
	}
	if end := committedEnd(ctx, t, adm, topic); end != 0 {
		t.Fatalf("read_committed end offset %d with the transaction open, want 0", end)
	}
	checkOpenTxn(t, k, via, pid, "-1", "0")
	findHanging()
	k.run(via, "kafka-transactions.sh", abortAt0...)
	checkOpenTxn(t, k, via, pid, "-1", "None")
	if end := committedEnd(ctx, t, adm, topic); end != 2 {
		t.Fatalf("read_committed end offset %d after the abort, want 2 (the record and the marker)", end)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the tool's abort: %v", err)
	}
	// Another left open, aborted by producer id and epoch.
	txn("aborted-by-pid", false)
	start := committedEnd(ctx, t, adm, topic)
	checkOpenTxn(t, k, via, pid, "-1", strconv.FormatInt(start, 10))
	k.exact = map[string]string{"2": strconv.FormatInt(pid, 10)}
	k.run(via, "kafka-transactions.sh", abortPID...)
	k.exact = nil
	checkOpenTxn(t, k, via, pid, "-1", "None")
	if end := committedEnd(ctx, t, adm, topic); end != start+2 {
		t.Fatalf("read_committed end offset %d after the abort, want %d (past the record and the marker)", end, start+2)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the tool's abort: %v", err)
	}
	txn("committed", true)
	onlyCommittedRead(ctx, t, c, topic)
	if got := consumeAll(ctx, t, c, topic, kgo.ReadUncommitted()); strings.Join(got, ",") != "aborted-by-tool,aborted-by-pid,committed" {
		t.Fatalf("read_uncommitted sees %q, want the three records", got)
	}
	checkOpenTxn(t, k, via, pid, "-1", "None")
	findHanging()
}

// onlyCommittedRead writes a record outside any transaction (read_committed
// reads up to it once every transaction before it has ended) and checks that
// read_committed sees the record "committed" alone before it.
func onlyCommittedRead(ctx context.Context, t *testing.T, c *kgateCluster, topic string) {
	t.Helper()
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ProduceSync(ctx, kgo.StringRecord("end")).FirstErr(); err != nil {
		t.Fatalf("produce the end record: %v", err)
	}
	if got := consumeAll(ctx, t, c, topic, kgo.ReadCommitted()); strings.Join(got, ",") != "committed" {
		t.Fatalf("read_committed sees %q, want only the committed record", got)
	}
}
