package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// Apache Kafka's own command-line tools (org.apache.kafka:kafka-tools and,
// for kafka-configs, the core jar kafka_2.13, fetched into
// test/clients/kafka-tools/target/lib by scripts/install-test-deps.sh) run
// against a three-node cluster, bootstrapped once through the leader and
// once through a follower. Each tool is its script's main class with the
// script's arguments: docs/operations.md ("Kafka tools") lists the same
// commands as `kafka-<tool>.sh ARGS`, with 127.0.0.1:9092 standing for
// the bootstrap server.

// kafkaToolClasses maps each script to the main class it runs.
var kafkaToolClasses = map[string]string{
	"kafka-topics.sh":              "org.apache.kafka.tools.TopicCommand",
	"kafka-log-dirs.sh":            "org.apache.kafka.tools.LogDirsCommand",
	"kafka-delete-records.sh":      "org.apache.kafka.tools.DeleteRecordsCommand",
	"kafka-metadata-quorum.sh":     "org.apache.kafka.tools.MetadataQuorumCommand",
	"kafka-leader-election.sh":     "org.apache.kafka.tools.LeaderElectionCommand",
	"kafka-transactions.sh":        "org.apache.kafka.tools.TransactionsCommand",
	"kafka-reassign-partitions.sh": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
	"kafka-configs.sh":             "kafka.admin.ConfigCommand",
	"kafka-acls.sh":                "org.apache.kafka.tools.AclCommand",
	"kafka-features.sh":            "org.apache.kafka.tools.FeatureCommand",
}

// docBootstrap is the bootstrap address the documented commands use; the
// test substitutes the node it drives.
const docBootstrap = "127.0.0.1:9092"

// kafkaTools runs the tools from one directory of jars.
type kafkaTools struct {
	t   *testing.T
	lib string
	tmp string
	// subst replaces words of the documented arguments when running them.
	subst map[string]string
	// exact replaces documented arguments that are exactly a key (values
	// the documentation can only show as an example: ids, epochs).
	exact map[string]string
	// ran holds every command run, as documented: "script arg...".
	ran map[string]bool
}

func newKafkaTools(t *testing.T) *kafkaTools {
	t.Helper()
	dir := clientsDir(t, "kafka-tools")
	lib := filepath.Join(dir, "target", "lib")
	requireCommand(t, "java", dir, "java", "-version")
	requireFile(t, filepath.Join(lib, ".complete"), "Kafka tools jars (mvn dependency:copy-dependencies in test/clients/kafka-tools)")
	return &kafkaTools{t: t, lib: lib, tmp: t.TempDir(), ran: map[string]bool{}}
}

// run runs "script args..." (args as documented, with docBootstrap) against
// bootstrap and returns its standard output; a non-zero exit fails the test
// unless allowFail.
func (k *kafkaTools) run(bootstrap, script string, args ...string) string {
	k.t.Helper()
	out, err := k.exec(bootstrap, script, args...)
	if err != nil {
		k.t.Fatalf("%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
	return out
}

func (k *kafkaTools) exec(bootstrap, script string, args ...string) (string, error) {
	k.t.Helper()
	class, ok := kafkaToolClasses[script]
	if !ok {
		k.t.Fatalf("no main class known for %s", script)
	}
	argv := []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Djava.io.tmpdir=" + k.tmp,
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", filepath.Join(k.lib, "*"), class}
	k.ran[script+" "+strings.Join(args, " ")] = true
	for _, a := range args {
		if v, ok := k.exact[a]; ok {
			a = v
		}
		a = strings.ReplaceAll(a, docBootstrap, bootstrap)
		for from, to := range k.subst {
			a = strings.ReplaceAll(a, from, to)
		}
		argv = append(argv, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.Dir = k.tmp
	cmd.SysProcAttr = groupProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	k.t.Logf("$ %s %s\n%s", script, strings.Join(args, " "), strings.TrimRight(string(out), "\n"))
	if err != nil {
		return string(out) + "\nstderr:\n" + tail(stderr.String(), 20), err
	}
	return string(out), nil
}

// TestKafkaTools drives each tool through the leader and through a
// follower, asserting what it prints. In the Iggy tier the cluster runs
// --backend iggy: partition leadership is spread over the nodes, log
// directories are Iggy's, records cannot be deleted and no idempotence
// state is kept.
func TestKafkaTools(t *testing.T) {
	tools := newKafkaTools(t)
	var c *kgateCluster
	if iggyMode() {
		c = startKgate(t).iggy.c
	} else {
		c = startCluster(t)
	}
	leader := c.leader()
	var follower int32
	for _, id := range c.ids() {
		if id != leader {
			follower = id
			break
		}
	}
	const topic = "tools"
	_, adm := c.adminClient()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Kafka's admin client sends a listing (kafka-topics.sh --describe and
	// --list start with one) to whichever node it likes: every node lists
	// the new topic at once. (Through the Iggy backend a follower listed
	// its topic cache, up to a second old, and a CI run failed.)
	for _, id := range c.ids() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.node(id).kafka()))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(int(id)))
		cl.Close()
		if err != nil {
			t.Fatalf("listing every topic through node %d: %v", id, err)
		}
		var names []string
		for _, mt := range resp.Topics {
			if mt.Topic != nil {
				names = append(names, *mt.Topic)
			}
		}
		if !slices.Contains(names, topic) {
			t.Fatalf("right after CreateTopics, node %d lists the topics %v, without %q", id, names, topic)
		}
	}
	// An idempotent producer (franz-go's default) writes 10 records to
	// partition 0, for DescribeProducers and DeleteRecords.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	for _, via := range []struct {
		name string
		id   int32
	}{{"leader", leader}, {"follower", follower}} {
		bootstrap := c.node(via.id).kafka()
		t.Run(via.name, func(t *testing.T) {
			tools.t = t
			defer func() { tools.t = nil }()
			checkTopicsDescribe(t, tools, bootstrap, topic, c)
			checkLogDirs(t, tools, bootstrap, topic, c.ids())
			checkQuorum(t, tools, bootstrap, c)
			checkFeatures(t, tools, bootstrap)
			checkLeaderElection(t, tools, bootstrap, topic)
			checkDescribeProducers(t, tools, bootstrap, topic)
			checkReassignList(t, tools, bootstrap, topic)
			checkClientQuotas(t, tools, bootstrap, "app-via-"+via.name)
		})
	}
	t.Cleanup(func() { checkDocumentedToolCommands(t, tools.ran) })
	// DeleteRecords: through the leader to 3, through a follower to 5.
	t.Run("delete-records", func(t *testing.T) {
		tools.t = t
		// Its own deadline: the tools before it take a minute or more of
		// JVM starts (the set-up's 60 s ran out on a loaded machine).
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if iggyMode() {
			checkDeleteRecordsRefused(t, tools, c.node(follower).kafka(), topic)
			return
		}
		for _, step := range []struct {
			id     int32
			offset int64
		}{{leader, 3}, {follower, 5}} {
			checkDeleteRecords(t, tools, c.node(step.id).kafka(), topic, step.offset)
			offs, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := offs.Lookup(topic, 0); o.Offset != step.offset {
				t.Fatalf("earliest offset %d after kafka-delete-records to %d", o.Offset, step.offset)
			}
		}
	})
	// kafka-transactions on a transaction left open (its own context).
	t.Run("transactions", func(t *testing.T) {
		tools.t = t
		checkTransactionTools(t, tools, c, follower)
	})
	// A voter that is down: the quorum shows it without a log end offset.
	t.Run("dead-voter", func(t *testing.T) {
		tools.t = t
		var dead int32
		for _, id := range c.ids() {
			if id != leader && id != follower {
				dead = id
			}
		}
		c.node(dead).kill9()
		out := tools.run(c.node(follower).kafka(), "kafka-metadata-quorum.sh", "--bootstrap-server", docBootstrap, "describe", "--replication")
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 7 && f[0] == strconv.Itoa(int(dead)) {
				found = true
				if f[2] != "-1" || f[4] != "-1" || f[6] != "Follower" {
					t.Errorf("dead node %d: %q, want log end offset and last fetch -1", dead, line)
				}
			}
		}
		if !found {
			t.Fatalf("the dead voter %d is not listed:\n%s", dead, out)
		}
	})
}

func checkTopicsDescribe(t *testing.T, k *kafkaTools, bootstrap, topic string, c *kgateCluster) {
	t.Helper()
	ids := c.ids()
	out, leaders := leaderAround(c, func() string {
		return k.run(bootstrap, "kafka-topics.sh", "--bootstrap-server", docBootstrap, "--describe", "--topic", topic)
	})
	if !strings.Contains(out, "Topic: "+topic) || !strings.Contains(out, "PartitionCount: 2") {
		t.Fatalf("kafka-topics --describe:\n%s", out)
	}
	replicas := joinIDs(ids, ",")
	for p := 0; p < 2; p++ {
		want := fmt.Sprintf(`Partition: %d\tLeader: %s\tReplicas: %s\tIsr: %s`, p, leaders, replicas, replicas)
		if iggyMode() { // leadership is spread: any node
			want = fmt.Sprintf(`Partition: %d\tLeader: [%s]\tReplicas: %s\tIsr: %s`, p, joinIDs(ids, ""), replicas, replicas)
		}
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("kafka-topics --describe lacks %q:\n%s", want, out)
		}
	}
}

// leaderAround runs cmd and returns its output with a pattern matching the
// leader the cluster had just before it or just after it: an answer naming
// either is right, since a loaded machine may hold an election in between
// (a leader stepping down in a CI run failed a check pinned to the leader
// at the test's start).
func leaderAround(c *kgateCluster, cmd func() string) (string, string) {
	before := c.leader()
	out := cmd()
	after := c.leader()
	return out, fmt.Sprintf("(?:%d|%d)", before, after)
}

func joinIDs(ids []int32, sep string) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, sep)
}

// logDirsOutput is kafka-log-dirs' JSON line.
type logDirsOutput struct {
	Brokers []struct {
		Broker  int32 `json:"broker"`
		LogDirs []struct {
			LogDir     string `json:"logDir"`
			Error      *string
			Partitions []struct {
				Partition string `json:"partition"`
				Size      int64  `json:"size"`
				OffsetLag int64  `json:"offsetLag"`
				IsFuture  bool   `json:"isFuture"`
			} `json:"partitions"`
		} `json:"logDirs"`
	} `json:"brokers"`
}

func checkLogDirs(t *testing.T, k *kafkaTools, bootstrap, topic string, ids []int32) {
	t.Helper()
	out := k.run(bootstrap, "kafka-log-dirs.sh", "--bootstrap-server", docBootstrap, "--describe", "--topic-list", topic)
	var got logDirsOutput
	if err := json.Unmarshal([]byte(lastLine(out)), &got); err != nil {
		t.Fatalf("kafka-log-dirs output is not its JSON: %v\n%s", err, out)
	}
	if len(got.Brokers) != len(ids) {
		t.Fatalf("kafka-log-dirs: %d brokers, want %d:\n%s", len(got.Brokers), len(ids), out)
	}
	for _, b := range got.Brokers {
		if len(b.LogDirs) != 1 {
			t.Fatalf("broker %d: log dirs %+v", b.Broker, b.LogDirs)
		}
		wantDir := strings.HasSuffix(b.LogDirs[0].LogDir, "topics")
		if iggyMode() {
			wantDir = strings.HasPrefix(b.LogDirs[0].LogDir, "iggy:")
		}
		if !wantDir {
			t.Fatalf("broker %d: log dirs %+v", b.Broker, b.LogDirs)
		}
		sizes := map[string]int64{}
		for _, p := range b.LogDirs[0].Partitions {
			sizes[p.Partition] = p.Size
		}
		if len(sizes) != 2 || sizes[topic+"-0"] <= 0 || sizes[topic+"-1"] != 0 {
			t.Fatalf("broker %d: partition sizes %v, want %s-0 > 0 and %s-1 empty", b.Broker, sizes, topic, topic)
		}
	}
}

func checkQuorum(t *testing.T, k *kafkaTools, bootstrap string, c *kgateCluster) {
	t.Helper()
	ids := c.ids()
	out, leaders := leaderAround(c, func() string {
		return k.run(bootstrap, "kafka-metadata-quorum.sh", "--bootstrap-server", docBootstrap, "describe", "--status")
	})
	if want := `LeaderId: +` + leaders + `\n`; !regexp.MustCompile(want).MatchString(out) {
		t.Fatalf("kafka-metadata-quorum describe --status lacks %q:\n%s", want, out)
	}
	for _, want := range []string{
		"LeaderEpoch:", "HighWatermark:", "MaxFollowerLag:", "CurrentVoters:", "CurrentObservers:       []",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("kafka-metadata-quorum describe --status lacks %q:\n%s", want, out)
		}
	}
	for _, id := range ids {
		if !strings.Contains(out, fmt.Sprintf(`{"id": %d,`, id)) {
			t.Fatalf("kafka-metadata-quorum describe --status does not list voter %d:\n%s", id, out)
		}
	}
	out, leaders = leaderAround(c, func() string {
		return k.run(bootstrap, "kafka-metadata-quorum.sh", "--bootstrap-server", docBootstrap, "describe", "--replication")
	})
	rows := map[int32][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		if id, err := strconv.Atoi(f[0]); err == nil {
			rows[int32(id)] = f
		}
	}
	if len(rows) != len(ids) {
		t.Fatalf("kafka-metadata-quorum describe --replication: %d rows, want %d:\n%s", len(rows), len(ids), out)
	}
	// NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status
	leader := int32(-1)
	for id, f := range rows {
		if len(f) == 7 && f[6] == "Leader" {
			if leader >= 0 {
				t.Fatalf("kafka-metadata-quorum describe --replication: two leaders, %d and %d:\n%s", leader, id, out)
			}
			leader = id
		}
	}
	if !regexp.MustCompile(`^` + leaders + `$`).MatchString(strconv.Itoa(int(leader))) {
		t.Fatalf("kafka-metadata-quorum describe --replication: leader %d, want %s:\n%s", leader, leaders, out)
	}
	leaderLEO, _ := strconv.ParseInt(rows[leader][2], 10, 64)
	nowMs := time.Now().UnixMilli()
	for id, f := range rows {
		if len(f) != 7 {
			t.Fatalf("node %d: row %q", id, f)
		}
		leo, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || leo <= 0 || leo > leaderLEO {
			t.Errorf("node %d: log end offset %q (leader's %d)", id, f[2], leaderLEO)
		}
		if want := map[bool]string{true: "Leader", false: "Follower"}[id == leader]; f[6] != want {
			t.Errorf("node %d: status %q, want %s", id, f[6], want)
		}
		for _, col := range f[4:6] { // last fetch and last caught up: within the last minute
			ms, err := strconv.ParseInt(col, 10, 64)
			if err != nil || ms > nowMs+1000 || ms < nowMs-60_000 {
				t.Errorf("node %d: timestamp %q is not recent (now %d)", id, col, nowMs)
			}
		}
	}
}

// checkFeatures runs kafka-features describe: the cluster's feature level
// as the feature kgate.version, supported up to this binary's level and
// finalized there (the leader raises it once every voter runs the binary,
// within seconds of the cluster forming).
func checkFeatures(t *testing.T, k *kafkaTools, bootstrap string) {
	t.Helper()
	want := []string{"Feature: kgate.version", "SupportedMinVersion: 0",
		fmt.Sprintf("SupportedMaxVersion: %d", fsm.LatestLevel), fmt.Sprintf("FinalizedVersionLevel: %d", fsm.LatestLevel)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out string
	err := retry(ctx, time.Second, func() error {
		out = k.run(bootstrap, "kafka-features.sh", "--bootstrap-server", docBootstrap, "describe")
		for _, w := range want {
			if !strings.Contains(out, w) {
				return fmt.Errorf("lacks %q", w)
			}
		}
		if strings.Count(strings.TrimSpace(out), "Feature: ") != 1 {
			return errors.New("lists more than kgate.version")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("kafka-features describe %v:\n%s", err, out)
	}
}

func checkLeaderElection(t *testing.T, k *kafkaTools, bootstrap, topic string) {
	t.Helper()
	out := k.run(bootstrap, "kafka-leader-election.sh", "--bootstrap-server", docBootstrap,
		"--election-type", "PREFERRED", "--topic", topic, "--partition", "0")
	if !strings.Contains(out, "Valid replica already elected for partitions "+topic+"-0") {
		t.Fatalf("kafka-leader-election --topic:\n%s", out)
	}
	out = k.run(bootstrap, "kafka-leader-election.sh", "--bootstrap-server", docBootstrap,
		"--election-type", "UNCLEAN", "--all-topic-partitions")
	if !strings.Contains(out, "None of the partitions") && strings.TrimSpace(out) != "" {
		t.Fatalf("kafka-leader-election --all-topic-partitions:\n%s", out)
	}
}

// checkDescribeProducers: the idempotent producer of the ten records, as
// Kafka lists it (on Iggy too: the partition's leader has its sequences).
func checkDescribeProducers(t *testing.T, k *kafkaTools, bootstrap, topic string) {
	t.Helper()
	out := k.run(bootstrap, "kafka-transactions.sh", "--bootstrap-server", docBootstrap,
		"describe-producers", "--topic", topic, "--partition", "0")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ProducerId") {
		t.Fatalf("kafka-transactions describe-producers: want a header and one producer:\n%s", out)
	}
	f := strings.Fields(lines[1])
	// ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
	if len(f) < 6 || f[3] != "9" || f[2] != "-1" || f[5] != "None" {
		t.Fatalf("kafka-transactions describe-producers: want last sequence 9, no coordinator epoch, no transaction:\n%s", out)
	}
}

func checkReassignList(t *testing.T, k *kafkaTools, bootstrap, topic string) {
	t.Helper()
	out := k.run(bootstrap, "kafka-reassign-partitions.sh", "--bootstrap-server", docBootstrap, "--list")
	if !strings.Contains(out, "No partition reassignments found.") {
		t.Fatalf("kafka-reassign-partitions --list:\n%s", out)
	}
	const file = "reassign.json" // in the tools' working directory
	body := fmt.Sprintf(`{"version": 1, "partitions": [{"topic": %q, "partition": 0, "replicas": [1]}]}`, topic)
	if err := os.WriteFile(filepath.Join(k.tmp, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := k.exec(bootstrap, "kafka-reassign-partitions.sh", "--bootstrap-server", docBootstrap,
		"--reassignment-json-file", file, "--execute")
	if err == nil || !strings.Contains(out, reassignRefusal) {
		t.Fatalf("kafka-reassign-partitions --execute: exit %v, want a failure saying %q:\n%s", err, reassignRefusal, out)
	}
}

// reassignRefusal is how kgate explains that it does not move replicas.
const reassignRefusal = "kgate places every partition's replicas on the Raft voters"

func checkDeleteRecords(t *testing.T, k *kafkaTools, bootstrap, topic string, offset int64) {
	t.Helper()
	const file = "delete-records.json" // in the tools' working directory
	body := fmt.Sprintf(`{"partitions": [{"topic": %q, "partition": 0, "offset": %d}], "version": 1}`, topic, offset)
	if err := os.WriteFile(filepath.Join(k.tmp, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := k.run(bootstrap, "kafka-delete-records.sh", "--bootstrap-server", docBootstrap, "--offset-json-file", file)
	if want := fmt.Sprintf("partition: %s-0\tlow_watermark: %d", topic, offset); !strings.Contains(out, want) {
		t.Fatalf("kafka-delete-records lacks %q:\n%s", want, out)
	}
}

func checkClientQuotas(t *testing.T, k *kafkaTools, bootstrap, clientID string) {
	t.Helper()
	// The documented commands name the client "my-app".
	k.subst = map[string]string{"my-app": clientID}
	defer func() { k.subst = nil }()
	args := func(a ...string) []string { return a }
	out := k.run(bootstrap, "kafka-configs.sh", args("--bootstrap-server", docBootstrap, "--alter", "--entity-type", "clients",
		"--entity-name", "my-app", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")...)
	if !strings.Contains(out, "Completed updating config for client "+clientID) {
		t.Fatalf("kafka-configs --alter clients:\n%s", out)
	}
	out = k.run(bootstrap, "kafka-configs.sh", args("--bootstrap-server", docBootstrap, "--describe", "--entity-type", "clients",
		"--entity-name", "my-app")...)
	if want := "Quota configs for client-id '" + clientID + "' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0"; !strings.Contains(out, want) {
		t.Fatalf("kafka-configs --describe clients lacks %q:\n%s", want, out)
	}
	out = k.run(bootstrap, "kafka-configs.sh", args("--bootstrap-server", docBootstrap, "--alter", "--entity-type", "clients",
		"--entity-name", "my-app", "--delete-config", "consumer_byte_rate")...)
	out = k.run(bootstrap, "kafka-configs.sh", args("--bootstrap-server", docBootstrap, "--describe", "--entity-type", "clients",
		"--entity-name", "my-app")...)
	if want := "Quota configs for client-id '" + clientID + "' are producer_byte_rate=1048576.0"; !strings.Contains(out, want) {
		t.Fatalf("kafka-configs --describe clients after --delete-config lacks %q:\n%s", want, out)
	}
	out = k.run(bootstrap, "kafka-configs.sh", "--bootstrap-server", docBootstrap, "--alter", "--entity-type", "users",
		"--entity-default", "--add-config", "request_percentage=50")
	if !strings.Contains(out, "Completed updating default config for users") {
		t.Fatalf("kafka-configs --alter users --entity-default:\n%s", out)
	}
	// The default user here; a named user's describe also lists its SCRAM
	// credentials (docs/security.md covers those).
	out = k.run(bootstrap, "kafka-configs.sh", "--bootstrap-server", docBootstrap, "--describe", "--entity-type", "users",
		"--entity-default")
	if want := "Quota configs for the default user-principal are request_percentage=50.0"; !strings.Contains(out, want) {
		t.Fatalf("kafka-configs --describe users lacks %q:\n%s", want, out)
	}
}

// checkDocumentedToolCommands fails unless every command in the "Kafka
// tools" section of docs/operations.md was run by this test, as written.
func checkDocumentedToolCommands(t *testing.T, ran map[string]bool) {
	if t.Failed() {
		return
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n## Kafka tools\n")
	if start < 0 {
		t.Fatal(`docs/operations.md has no "## Kafka tools" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	n := 0
	inBlock := false
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock = !inBlock && strings.TrimPrefix(line, "```") == "sh"
		case inBlock && strings.HasPrefix(line, "kafka-"):
			n++
			if !ran[strings.TrimSpace(line)] {
				t.Errorf("docs/operations.md runs %q, which TestKafkaTools does not", line)
			}
		}
	}
	if n < len(ran) {
		t.Errorf("docs/operations.md shows %d Kafka tool commands, TestKafkaTools runs %d", n, len(ran))
	}
}

// checkDeleteRecordsRefused: with Iggy, each partition answers
// POLICY_VIOLATION and the log start stays.
func checkDeleteRecordsRefused(t *testing.T, k *kafkaTools, bootstrap, topic string) {
	t.Helper()
	const file = "delete-records.json"
	body := fmt.Sprintf(`{"partitions": [{"topic": %q, "partition": 0, "offset": 3}], "version": 1}`, topic)
	if err := os.WriteFile(filepath.Join(k.tmp, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := k.exec(bootstrap, "kafka-delete-records.sh", "--bootstrap-server", docBootstrap, "--offset-json-file", file)
	if !strings.Contains(out, "PolicyViolationException") {
		t.Fatalf("kafka-delete-records with Iggy: want POLICY_VIOLATION:\n%s", out)
	}
}
