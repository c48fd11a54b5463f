package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions on a three-node cluster: a franz-go transactional producer
// commits and aborts interleaved transactions while the Raft leader (the
// transaction coordinator and the leader of every partition) is killed
// with SIGKILL, twice: once inside a transaction between its records and
// its commit, once at whatever point the producer has reached. Afterwards a read_committed consumer must see exactly the
// records of committed transactions, every one once, and none of an
// aborted one; a transaction whose end the producer could not learn must
// be visible whole or not at all; a read_uncommitted consumer sees every
// record whose produce was acknowledged.

const (
	txnBeforeKill = 8 // transactions decided before the kill
	txnAfterKill  = 8 // transactions decided after it, and after the second kill
	txnRecords    = 6 // records per transaction, spread over the partitions
)

// txnOutcome is what the producer learned of one transaction.
type txnOutcome int

const (
	txnCommitted txnOutcome = iota // EndTransaction(commit) succeeded
	txnAborted                     // never committed: aborted by the producer or fenced by its successor
	txnUnknown                     // the commit was sent but its answer was lost
)

// txnLog is written by the test goroutine only.
type txnLog struct {
	outcomes map[int]txnOutcome
	acked    map[string]bool // values whose produce was acknowledged
}

func txnValue(txn, rec int) string { return fmt.Sprintf("txn-%04d-%02d", txn, rec) }

func TestClusterTransactionsLeaderKill9(t *testing.T) {
	c := startCluster(t)
	topic := fmt.Sprintf("cl-txn-%d", time.Now().UnixNano()%1e9)
	createClusterTopic(t, c, topic)

	log := &txnLog{outcomes: map[int]txnOutcome{}, acked: map[string]bool{}}
	newProducer := func() *kgo.Client {
		opts := append([]kgo.Opt{
			kgo.SeedBrokers(c.bootstrap()...),
			kgo.TransactionalID("cl-txn-producer"),
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(30 * time.Second),
			kgo.TransactionTimeout(20 * time.Second),
		}, clKgoDebugOpts(t, "txn-producer")...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := newProducer()
	defer func() { cl.Close() }()

	// run decides one transaction; on any failure it recovers the way an
	// application does: a new producer with the same transactional id,
	// whose InitProducerId fences the old one and aborts what it left open.
	// midway, when set, runs after the third record of a transaction.
	var midway func()
	run := func(i int, commit bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		outcome := txnAborted
		defer func() { log.outcomes[i] = outcome }()
		fail := func(err error) error {
			cl.Close()
			cl = newProducer()
			return err
		}
		if err := cl.BeginTransaction(); err != nil {
			return fail(err)
		}
		for j := 0; j < txnRecords; j++ {
			v := txnValue(i, j)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(j % clusterPartitions)}).FirstErr(); err != nil {
				return fail(fmt.Errorf("produce %s: %w", v, err))
			}
			log.acked[v] = true
			if j == 2 && midway != nil {
				midway()
				midway = nil
			}
		}
		if commit {
			outcome = txnUnknown
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return fail(fmt.Errorf("end transaction: %w", err))
		}
		if commit {
			outcome = txnCommitted
		}
		return nil
	}

	next := 0
	decide := func(n int) {
		t.Helper()
		for done := 0; done < n; next++ {
			if next > 10*(txnBeforeKill+txnAfterKill) {
				t.Fatalf("the producer failed %d transactions; last outcomes %v", next-done, log.outcomes)
			}
			if err := run(next, next%3 != 2); err != nil {
				t.Logf("transaction %d failed (the producer starts over): %v", next, err)
				continue
			}
			done++
		}
	}
	decide(txnBeforeKill)

	// Kill the leader while a transaction is open: records written, the
	// commit not yet sent.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	open := next
	next++
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for j := 0; j < txnRecords; j++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(txnValue(open, j)), Partition: int32(j % clusterPartitions)}).FirstErr(); err != nil {
			t.Fatalf("produce in the open transaction: %v", err)
		}
		log.acked[txnValue(open, j)] = true
	}
	old := c.leader()
	at := time.Now()
	c.node(old).kill9()
	var survivors []int32
	for _, n := range c.running() {
		survivors = append(survivors, n.id)
	}
	leader := c.waitFormed(survivors...)
	t.Logf("leader node %d killed (SIGKILL) inside transaction %d; node %d leads %v later",
		old, open, leader, time.Since(at).Round(time.Millisecond))
	// The open transaction completes through the new coordinator, or (if
	// its producer gave up) is aborted by the next producer's init.
	log.outcomes[open] = txnUnknown
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Logf("committing the open transaction through the new leader failed (the producer starts over): %v", err)
		cl.Close()
		cl = newProducer()
	} else {
		log.outcomes[open] = txnCommitted
		t.Logf("the open transaction committed through the new leader %v after the kill", time.Since(at).Round(time.Millisecond))
	}
	decide(txnAfterKill)

	// The killed node comes back; then the new leader is killed while
	// transactions run: the kill lands wherever the producer is (its last
	// records, AddPartitionsToTxn, EndTxn), so a commit's outcome may be
	// unknown to it, and must then be all or nothing.
	c.node(old).start()
	c.waitFormed(c.ids()...)
	second := c.leader()
	killed := make(chan struct{})
	killedIn := -1
	midway = func() {
		killedIn = next
		go func() {
			defer close(killed)
			c.node(second).kill9()
		}()
	}
	decide(txnAfterKill)
	<-killed
	t.Logf("leader node %d killed (SIGKILL) while transaction %d ran", second, killedIn)

	// A last committed transaction writes "end" to every partition: a
	// read_committed consumer that has read it has read everything before.
	for {
		if err := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := cl.BeginTransaction(); err != nil {
				return err
			}
			for p := 0; p < clusterPartitions; p++ {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("end"), Partition: int32(p)}).FirstErr(); err != nil {
					return err
				}
			}
			return cl.EndTransaction(ctx, kgo.TryCommit)
		}(); err == nil {
			break
		} else if next++; next > 20*(txnBeforeKill+txnAfterKill) {
			t.Fatalf("the end transaction never committed: %v", err)
		}
		cl.Close()
		cl = newProducer()
	}

	committed := readTxnValues(t, c, topic, "read_committed", kgo.ReadCommitted())
	uncommitted := readTxnValues(t, c, topic, "read_uncommitted", kgo.ReadUncommitted())
	counts := map[string]int{}
	for _, v := range committed {
		counts[v]++
	}
	var problems []string
	byTxn := map[int]int{}
	for v, n := range counts {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("%s read %d times", v, n))
		}
		var i, j int
		fmt.Sscanf(v, "txn-%04d-%02d", &i, &j)
		byTxn[i]++
	}
	tally := map[txnOutcome]int{}
	for i, o := range log.outcomes {
		tally[o]++
		switch n := byTxn[i]; {
		case o == txnCommitted && n != txnRecords:
			problems = append(problems, fmt.Sprintf("committed transaction %d shows %d of %d records", i, n, txnRecords))
		case o == txnAborted && n != 0:
			problems = append(problems, fmt.Sprintf("aborted transaction %d shows %d records", i, n))
		case o == txnUnknown && n != 0 && n != txnRecords:
			problems = append(problems, fmt.Sprintf("transaction %d is partly visible: %d of %d records", i, n, txnRecords))
		}
	}
	for i := range byTxn {
		if _, ok := log.outcomes[i]; !ok {
			problems = append(problems, fmt.Sprintf("transaction %d was never run but shows records", i))
		}
	}
	seen := map[string]bool{}
	for _, v := range uncommitted {
		seen[v] = true
	}
	for v := range log.acked {
		if !seen[v] {
			problems = append(problems, fmt.Sprintf("acknowledged %s missing from read_uncommitted", v))
		}
	}
	sort.Strings(problems)
	t.Logf("%d committed, %d aborted, %d unknown transactions; read_committed %d records, read_uncommitted %d",
		tally[txnCommitted], tally[txnAborted], tally[txnUnknown], len(committed), len(uncommitted))
	if tally[txnAborted] == 0 || tally[txnCommitted] == 0 {
		t.Errorf("the run did not both commit and abort (%v)", tally)
	}
	if len(problems) > 0 {
		t.Fatalf("%d anomalies, e.g. %s", len(problems), firstN(problems, 20))
	}
}

// readTxnValues reads every partition from the start at the given
// isolation level until each has shown its "end" record, and returns the
// other values in read order.
func readTxnValues(t *testing.T, c *kgateCluster, topic, name string, level kgo.IsolationLevel) []string {
	t.Helper()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.bootstrap()...),
		kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, clKgoDebugOpts(t, "txn-reader")...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	ends := map[int32]bool{}
	step(t, "read every partition to its end record, "+name, verifyTimeout, func(ctx context.Context) error {
		for len(ends) < clusterPartitions {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%d of %d partitions read to their end: %w", len(ends), clusterPartitions, err)
			}
			fs.EachError(func(_ string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Logf("fetch partition %d: %v (the client retries)", p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) == "end" {
					ends[r.Partition] = true
					return
				}
				out = append(out, string(r.Value))
			})
		}
		return nil
	})
	return out
}

// TestTransactionsDoc runs the commands of docs/transactions.md's "Try it"
// exactly as written on a `make run` cluster (three nodes), then again
// through the leader and through a follower: librdkafka's transactional
// producer commits one transaction and aborts another; kcat read_committed
// prints the committed record only, read_uncommitted both.
func TestTransactionsDoc(t *testing.T) {
	root := repoRoot(t)
	doc := readFile(t, filepath.Join(root, "docs", "transactions.md"))
	// The doc's python3 is one with confluent-kafka (Debian's
	// python3-confluent-kafka, as test/clients uses).
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import confluent_kafka").Run(); err != nil {
		t.Fatalf("%s cannot import confluent_kafka: %v (%s)", py, err, installHint)
	}
	pyDir := t.TempDir()
	if err := os.Symlink(py, filepath.Join(pyDir, "python3")); err != nil {
		t.Fatal(err)
	}
	producer := strings.Join(shBlockAfter(t, doc, "## Try it", 0), "\n")
	consumers := shBlockAfter(t, doc, "## Try it", 1)
	var b strings.Builder
	fmt.Fprintf(&b, "export PATH=%s:\"$PATH\"\n", shellQuote(pyDir))
	// pass writes the doc's commands, their node 1 address (127.0.0.1:9092)
	// and topic replaced by addr and topic unless both are the doc's.
	pass := func(addr, topic string) string {
		r := strings.NewReplacer("127.0.0.1:9092", addr, "payments", topic)
		var p strings.Builder
		p.WriteString("echo '+ producer'\n" + r.Replace(producer) + "\n")
		for _, c := range consumers {
			fmt.Fprintf(&p, "echo %s\n%s\n", shellQuote("+ "+r.Replace(c)), r.Replace(c))
		}
		return p.String()
	}
	// As written, through node 1, then again through the leader and
	// through a follower (node 1 may be either), each with a topic and a
	// transactional id of its own.
	b.WriteString("echo '=== as written'\n" + pass("127.0.0.1:9092", "payments"))
	b.WriteString(`leader=""
for _ in $(seq 300); do
  leader=$(curl -s 127.0.0.1:9391/v1/cluster | jq -r '.leader_id // empty')
  [ -n "$leader" ] && break; sleep 0.1
done
[ -n "$leader" ] || { echo "no leader"; exit 1; }
follower=1; [ "$leader" = 1 ] && follower=2
`)
	for _, role := range []string{"leader", "follower"} {
		fmt.Fprintf(&b, "echo '=== through the %s, node '$%s\n", role, role)
		for node := 1; node <= 3; node++ {
			fmt.Fprintf(&b, "if [ \"$%s\" = %d ]; then\n%sfi\n", role, node,
				pass(fmt.Sprintf("127.0.0.1:%d", 9090+2*node), "payments-"+role))
		}
	}
	out := runMakeRunScript(t, root, b.String())
	passes := strings.Split(out, "=== ")[1:]
	if len(passes) != 3 {
		t.Fatalf("%d passes in the output, want 3:\n%s", len(passes), out)
	}
	for _, p := range passes {
		name, _, _ := strings.Cut(p, "\n")
		_, consumers, ok := strings.Cut(p, "+ kcat")
		if !ok {
			t.Fatalf("%s: no kcat in the output:\n%s", name, out)
		}
		committed, uncommitted, ok := strings.Cut(consumers, "+ kcat")
		if !ok {
			t.Fatalf("%s: one kcat in the output:\n%s", name, out)
		}
		lines := func(s string) []string {
			var out []string
			for _, l := range strings.Split(s, "\n")[1:] { // after the echoed command
				if l = strings.TrimSpace(l); l != "" {
					out = append(out, l)
				}
			}
			return out
		}
		if got := lines(committed); fmt.Sprint(got) != "[committed]" {
			t.Errorf("%s: read_committed printed %q, want only \"committed\"", name, got)
		}
		if got := lines(uncommitted); fmt.Sprint(got) != "[committed aborted]" {
			t.Errorf("%s: read_uncommitted printed %q, want \"committed\" and \"aborted\"", name, got)
		}
	}
}

// TestJavaTransactions runs the Java KafkaProducer with a transactional.id
// (test/clients/java TxnMain): a commit, an abort, and a zombie producer
// fenced by a second one with the same id. A read_committed consumer reads
// exactly the committed records. The same with --backend iggy (the Iggy
// tier), where records and markers are Iggy messages.
//
// The readers start once the partition's last stable offset has reached its
// high watermark (TxnMain waits, bounded): commitTransaction() returning
// does not mean every node shows the commit, in Kafka (EndTxn is answered
// before the markers are written) or in kgate on Iggy (the node leading
// the partition applies CompleteTxn up to one Raft commit round after the
// coordinator; "lso_behind" in the result counts the reads that saw that).
func TestJavaTransactions(t *testing.T) {
	_, jar := javaJar(t)
	srv := startKgate(t)
	topic := fmt.Sprintf("java-txn-%d", time.Now().UnixNano()%1e9)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "java", javaTmpDir(t), "-cp", jar, "kgate.e2e.TxnMain", srv.bootstrap(), topic).Output()
	result := lastLine(string(out))
	t.Logf("TxnMain: %s", result)
	if err != nil {
		t.Fatalf("TxnMain: %v", err)
	}
	for _, want := range []string{
		`"zombie_commit": "ProducerFencedException"`,
		`"read_committed": "[committed-1, committed-2]"`,
		`"read_uncommitted": "[committed-1, aborted-1, zombie-open, committed-2]"`,
		`"ok": true`,
	} {
		if !strings.Contains(result, want) {
			t.Errorf("TxnMain's result lacks %s", want)
		}
	}
}

// TestClusterGroupTransactSessionLeaderKill9: consume-transform-produce with
// franz-go's GroupTransactSession on three nodes, the leader (group and
// transaction coordinator) killed with SIGKILL mid-run. A session whose End
// fails is replaced by a new one with the same transactional id, as
// franz-go prescribes. Every input record must appear exactly once in the
// output, read committed.
func TestClusterGroupTransactSessionLeaderKill9(t *testing.T) {
	const total = 600
	c := startCluster(t)
	suffix := time.Now().UnixNano() % 1e9
	in, out := fmt.Sprintf("cl-gts-in-%d", suffix), fmt.Sprintf("cl-gts-out-%d", suffix)
	group := fmt.Sprintf("cl-gts-%d", suffix)
	createClusterTopic(t, c, in)
	createClusterTopic(t, c, out)
	admCl, adm := c.adminClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	step(t, fmt.Sprintf("produce %d input records", total), time.Minute, func(ctx context.Context) error {
		for i := 0; i < total; i++ {
			admCl.Produce(ctx, &kgo.Record{Topic: in, Partition: int32(i % clusterPartitions), Value: []byte(fmt.Sprintf("%05d", i))}, nil)
		}
		return admCl.Flush(ctx)
	})
	ends, err := adm.ListEndOffsets(context.Background(), in)
	if err != nil || ends.Error() != nil {
		t.Fatalf("input end offsets: %v %v", err, ends.Error())
	}
	var lastCheck string // what drained last saw, for the failure message
	// Each check asks with a client of its own: a client that cached the
	// killed leader as the group's coordinator keeps dialling it (franz-go
	// drops a cached coordinator on NOT_COORDINATOR, not on a dead
	// connection), and the check is about the group's offsets, not that.
	drained := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		checkCl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...))
		if err != nil {
			t.Fatal(err)
		}
		defer checkCl.Close()
		offs, err := kadm.NewClient(checkCl).FetchOffsets(ctx, group)
		if err != nil {
			lastCheck = "fetch offsets: " + err.Error()
			return false
		}
		done := true
		lastCheck = "committed/end:"
		ends.Each(func(e kadm.ListedOffset) {
			o, ok := offs.Lookup(in, e.Partition)
			lastCheck += fmt.Sprintf(" p%d %d/%d", e.Partition, o.At, e.Offset)
			if !ok || o.At < e.Offset {
				done = false
			}
		})
		return done
	}
	newSession := func() *kgo.GroupTransactSession {
		opts := append([]kgo.Opt{
			kgo.SeedBrokers(c.bootstrap()...),
			kgo.TransactionalID("cl-gts"),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.DefaultProduceTopic(out),
			kgo.TransactionTimeout(20 * time.Second),
		}, clKgoDebugOpts(t, "gts")...)
		s, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sess := newSession()
	defer func() { sess.Close() }()

	moved, sessions := 0, 1
	var killed chan struct{}
	old, movedAtKill := int32(-1), 0
	deadline := time.Now().Add(3 * time.Minute)
	for !drained() {
		if time.Now().After(deadline) {
			t.Fatalf("input not drained within 3 minutes (%d records moved in committed transactions, %d sessions; %s)", moved, sessions, lastCheck)
		}
		pollCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := sess.PollRecords(pollCtx, 40)
		cancel()
		if fs.NumRecords() == 0 {
			continue
		}
		err := sess.Begin()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			if err != nil {
				return
			}
			n++
			err = sess.ProduceSync(context.Background(), &kgo.Record{Value: append([]byte("out-"), r.Value...), Partition: r.Partition}).FirstErr()
		})
		if killed == nil && moved >= total/3 {
			// Kill the leader while this transaction's End is about to run.
			old, movedAtKill = c.leader(), moved
			killed = make(chan struct{})
			go func() {
				defer close(killed)
				c.node(old).kill9()
			}()
		}
		committed := false
		if err == nil {
			committed, err = sess.End(context.Background(), kgo.TryCommit)
		}
		if err != nil {
			t.Logf("session %d: %v; a new session takes over", sessions, err)
			sess.Close()
			sess = newSession()
			sessions++
			continue
		}
		if committed {
			moved += n
		}
	}
	if killed == nil {
		t.Fatal("the input drained before the leader was killed")
	}
	<-killed
	t.Logf("leader node %d killed after %d records moved; %d sessions; input drained", old, movedAtKill, sessions)

	// A last transaction writes "end" to every output partition.
	p, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.TransactionalID("cl-gts-end"),
		kgo.DefaultProduceTopic(out), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	step(t, "commit the end records", time.Minute, func(ctx context.Context) error {
		if err := p.BeginTransaction(); err != nil {
			return err
		}
		for part := 0; part < clusterPartitions; part++ {
			if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("end"), Partition: int32(part)}).FirstErr(); err != nil {
				return err
			}
		}
		return p.EndTransaction(ctx, kgo.TryCommit)
	})
	got := readTxnValues(t, c, out, "read_committed", kgo.ReadCommitted())
	counts := map[string]int{}
	for _, v := range got {
		counts[v]++
	}
	var problems []string
	for i := 0; i < total; i++ {
		if v := fmt.Sprintf("out-%05d", i); counts[v] != 1 {
			problems = append(problems, fmt.Sprintf("%s x%d", v, counts[v]))
		}
	}
	t.Logf("output: %d records read committed for %d inputs", len(got), total)
	if len(got) != total || len(problems) > 0 {
		t.Fatalf("%d records for %d inputs; %d not exactly once, e.g. %s", len(got), total, len(problems), firstN(problems, 20))
	}
}
