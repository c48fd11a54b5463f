// Package e2e runs bin/kgate as a process and drives it with real Kafka
// clients: franz-go and Sarama in process, kcat, confluent-kafka-python,
// kafka-python, kafkajs and the Java client through the programs in
// test/clients. See README.md.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// produceChunks is how many producer runs (each a new producer instance)
	// write the totalRecords; kgate is restarted after the first half.
	produceChunks  = 10
	createTimeout  = time.Minute
	produceTimeout = 2 * time.Minute
	verifyTimeout  = 2 * time.Minute

	installHint = "run scripts/install-test-deps.sh"
)

var allCodecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// topicConfig is passed to every CreateTopics: the records' timestamps are in
// 2023, so a time-based retention check must not delete them.
var topicConfig = map[string]string{"retention.ms": "-1"}

// kafkaClient is one client under test.
type kafkaClient struct {
	name string
	// codecs are rotated over the produce chunks.
	codecs []string
	// createTopic creates a topic with numPartitions partitions through the
	// client's admin API; nil means the harness creates it with kadm.
	createTopic func(ctx context.Context, bootstrap, topic string) error
	// produce writes records from..to-1 (genRecord or want) with one
	// producer instance using codec.
	produce func(ctx context.Context, bootstrap, topic string, from, to int, codec string) error
	// verify reads partitions 0..2 from offset 0 and checks that they hold
	// exactly records from..to-1.
	verify func(ctx context.Context, bootstrap, topic string, from, to int) error
	// want is the record convention the client follows; nil means genRecord.
	want func(int) wantRecord
}

// runScenario is the common end-to-end scenario: create a 3-partition topic,
// produce totalRecords in produceChunks chunks rotating codecs, restart kgate
// (SIGTERM) half way, let the client verify everything, then verify again
// independently with kgo.
func runScenario(t *testing.T, c kafkaClient) {
	t.Helper()
	begin := time.Now()
	srv := startKgate(t)
	bootstrap := srv.bootstrap()
	topic := fmt.Sprintf("e2e-%s-%d", c.name, time.Now().UnixNano()%1e9)
	want := c.want
	if want == nil {
		want = genRecord
	}

	create := c.createTopic
	how := c.name + " admin"
	if create == nil {
		create, how = kadmCreateTopic, "kadm"
	}
	step(t, fmt.Sprintf("create topic %s with %d partitions (%s)", topic, numPartitions, how), createTimeout,
		func(ctx context.Context) error { return create(ctx, bootstrap, topic) })
	step(t, "check topic metadata (kadm)", createTimeout,
		func(ctx context.Context) error { return checkPartitions(ctx, bootstrap, topic) })

	per := totalRecords / produceChunks
	for k := range produceChunks {
		if k == produceChunks/2 {
			srv.restart()
		}
		from, to := k*per, (k+1)*per
		codec := c.codecs[k%len(c.codecs)]
		step(t, fmt.Sprintf("%s produce %d..%d codec=%s", c.name, from, to-1, codec), produceTimeout,
			func(ctx context.Context) error { return c.produce(ctx, bootstrap, topic, from, to, codec) })
	}
	step(t, fmt.Sprintf("%s verify 0..%d", c.name, totalRecords-1), verifyTimeout,
		func(ctx context.Context) error { return c.verify(ctx, bootstrap, topic, 0, totalRecords) })
	step(t, fmt.Sprintf("kgo verify 0..%d", totalRecords-1), verifyTimeout,
		func(ctx context.Context) error {
			return kgoVerify(ctx, bootstrap, topic, newChecker(want, 0, totalRecords, begin))
		})
	t.Logf("%s scenario passed in %v", c.name, time.Since(begin).Round(time.Millisecond))
}

// step runs fn with a deadline and fails the test on error.
func step(t *testing.T, what string, timeout time.Duration, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	begin := time.Now()
	if err := fn(ctx); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s: timed out after %v: %v", what, timeout, err)
		}
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: ok (%v)", what, time.Since(begin).Round(time.Millisecond))
}

func kadmCreateTopic(ctx context.Context, bootstrap, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	cfg := map[string]*string{}
	for k, v := range topicConfig {
		cfg[k] = &v
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, numPartitions, 1, cfg, topic)
	if err != nil {
		return err
	}
	return resp.Err
}

// checkPartitions waits until Metadata shows the topic with numPartitions
// partitions, each led by a broker.
func checkPartitions(ctx context.Context, bootstrap, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td, ok := md.Topics[topic]
			switch {
			case !ok:
				err = errors.New("topic missing from metadata")
			case td.Err != nil:
				err = td.Err
			case len(td.Partitions) != numPartitions:
				err = fmt.Errorf("topic has %d partitions, want %d", len(td.Partitions), numPartitions)
			default:
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 {
						err = fmt.Errorf("partition %d: leader %d, err %v", p.Partition, p.Leader, p.Err)
					}
				}
			}
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// clientProgram runs one of the non-Go client programs in test/clients. A
// program takes (bootstrap, topic, mode, from, to, codec) — or (bootstrap,
// topic, "create", partitions) — prints a one-line JSON result with "ok"
// and exits non-zero on failure.
type clientProgram struct {
	name string
	dir  string   // working directory
	argv []string // command and leading arguments
}

func (p clientProgram) run(ctx context.Context, args ...string) error {
	argv := append(append([]string{}, p.argv...), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = groupProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	line := lastLine(stdout.String())
	var res struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	jerr := json.Unmarshal([]byte(line), &res)
	switch {
	case err == nil && jerr == nil && res.OK:
		return nil
	case res.Error != "":
		return fmt.Errorf("%s %s: %s (exit: %v)\nstderr tail:\n%s", p.name, strings.Join(args, " "), res.Error, err, tail(stderr.String(), 30))
	default:
		return fmt.Errorf("%s %s: exit: %v; result line %q\nstdout tail:\n%s\nstderr tail:\n%s",
			p.name, strings.Join(args, " "), err, line, tail(stdout.String(), 10), tail(stderr.String(), 30))
	}
}

// asClient wires a client program into the scenario.
func (p clientProgram) asClient(codecs []string, createsTopic bool) kafkaClient {
	c := kafkaClient{
		name:   p.name,
		codecs: codecs,
		produce: func(ctx context.Context, bootstrap, topic string, from, to int, codec string) error {
			return p.run(ctx, bootstrap, topic, "produce", fmt.Sprint(from), fmt.Sprint(to), codec)
		},
		verify: func(ctx context.Context, bootstrap, topic string, from, to int) error {
			return p.run(ctx, bootstrap, topic, "verify", fmt.Sprint(from), fmt.Sprint(to), "-")
		},
	}
	if createsTopic {
		c.createTopic = func(ctx context.Context, bootstrap, topic string) error {
			return p.run(ctx, bootstrap, topic, "create", fmt.Sprint(numPartitions))
		}
	}
	return c
}

// javaTmpDir is the JVM flag that keeps a Java program's temporary files in
// the test's own directory: snappy-java and RocksDB unpack their native
// libraries into java.io.tmpdir, and a killed JVM leaves them there (in
// /tmp, a few each run).
func javaTmpDir(t *testing.T) string {
	return "-Djava.io.tmpdir=" + t.TempDir()
}

// clientsDir is test/clients/<name>; it fails the test if it is missing.
func clientsDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "test", "clients", name)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("client program directory: %v", err)
	}
	return dir
}

// requireFile fails (does not skip) when a dependency installed by
// scripts/install-test-deps.sh is missing.
func requireFile(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s missing (%v): %s", what, err, installHint)
	}
}

// requireCommand fails (does not skip) when running argv in dir does not
// succeed within 30 s.
func requireCommand(t *testing.T, what, dir string, argv ...string) {
	t.Helper()
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Fatalf("%s: %v: %s", what, err, installHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: `%s` failed: %v\n%s\n%s", what, strings.Join(argv, " "), err, tail(string(out), 10), installHint)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// requireFresh fails when a file under sources is newer than built.
func requireFresh(t *testing.T, built string, sources ...string) {
	t.Helper()
	bi, err := os.Stat(built)
	if err != nil {
		t.Fatalf("%v: %s", err, installHint)
	}
	for _, src := range sources {
		err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if fi, err := d.Info(); err == nil && !d.IsDir() && fi.ModTime().After(bi.ModTime()) {
				t.Fatalf("%s is newer than %s: %s", path, built, installHint)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
