package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka Streams with processing.guarantee=exactly_once_v2 on three kgate
// nodes (test/clients/java StreamsMain): a word count through a repartition
// topic and a state store with its changelog, two application instances
// (so the tasks are shared and move in rebalances), the Raft leader (group
// and transaction coordinator, leader of every partition) killed with
// SIGKILL while they process and restarted, then one instance killed with
// SIGKILL and started again on its state directory. Every input record
// yields one output record (the record cache is off), so read committed,
// the counts of each word must be exactly 1, 2, ..., n for its n
// occurrences: a record counted twice after a failure shows as a repeated
// count, a lost one as a gap or a short final count.

const (
	streamsWords   = 3000 // input records, in two halves
	streamsVocab   = 60   // distinct words
	streamsEndKey  = "~end"
	streamsBatch   = 20 // words produced every streamsPace
	streamsPace    = 100 * time.Millisecond
	streamsTimeout = 100 * time.Second // from the first record to every count complete
)

func streamsWord(rng *rand.Rand) string { return fmt.Sprintf("w%02d", rng.Intn(streamsVocab)) }

// streamsApp is one StreamsMain process; its state directory outlives
// restarts (so a restarted instance keeps its process id and
// transactional id, and the old transaction is fenced at once).
type streamsApp struct {
	t        *testing.T
	name     string
	argv     []string
	logPath  string
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	runErr   error
	running  int // "state RUNNING" lines seen, over all runs
	stopping bool
}

func newStreamsApp(t *testing.T, jar, name string, args ...string) *streamsApp {
	dir := t.TempDir()
	if d := os.Getenv(envClientLogDir); d != "" {
		dir = d
	}
	a := &streamsApp{t: t, name: name,
		argv:    append([]string{javaTmpDir(t), "-cp", jar, "kgate.e2e.StreamsMain"}, args...),
		logPath: filepath.Join(dir, fmt.Sprintf("streams-%s-%d.log", name, time.Now().UnixNano()%1e9))}
	t.Cleanup(a.kill9)
	return a
}

// start starts the process; a goroutine copies its output to the log
// file and counts its state changes until the process exits.
func (a *streamsApp) start() {
	a.t.Helper()
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		a.t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== %s start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command("java", a.argv...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		a.t.Fatal(err)
	}
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		a.t.Fatalf("starting Streams instance %s: %v", a.name, err)
	}
	exited := make(chan struct{})
	a.mu.Lock()
	a.cmd, a.exited, a.stopping, a.runErr = cmd, exited, false, nil
	a.mu.Unlock()
	go func() {
		defer close(exited)
		defer logf.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(logf, "%s stdout: %s\n", time.Now().Format("15:04:05.000"), line)
			if line == "state RUNNING" {
				a.mu.Lock()
				a.running++
				a.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, out)
		err := cmd.Wait()
		a.mu.Lock()
		a.runErr = err
		a.mu.Unlock()
	}()
}

// runs is how many times the instance has reached RUNNING.
func (a *streamsApp) runs() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// check fails the test if the instance exited when it was not told to.
func (a *streamsApp) check() {
	a.t.Helper()
	a.mu.Lock()
	exited, stopping := a.exited, a.stopping
	a.mu.Unlock()
	select {
	case <-exited:
		if !stopping {
			a.t.Fatalf("Streams instance %s exited by itself (%v); log tail:\n%s", a.name, a.err(), tailFile(a.logPath, 40))
		}
	default:
	}
}

func (a *streamsApp) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runErr
}

func (a *streamsApp) signal(sig syscall.Signal) (<-chan struct{}, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return nil, false
	}
	a.stopping = true
	_ = a.cmd.Process.Signal(sig)
	return a.exited, true
}

// kill9 kills the process with SIGKILL and waits for it to go.
func (a *streamsApp) kill9() {
	exited, ok := a.signal(syscall.SIGKILL)
	if !ok {
		return
	}
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		a.t.Errorf("Streams instance %s still running %v after SIGKILL", a.name, stopTimeout)
	}
}

// stop closes the application with SIGTERM (KafkaStreams.close in its
// shutdown hook) and expects it gone within stopTimeout.
func (a *streamsApp) stop() {
	a.t.Helper()
	exited, ok := a.signal(syscall.SIGTERM)
	if !ok {
		return
	}
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		a.kill9()
		a.t.Fatalf("Streams instance %s did not close within %v of SIGTERM; log tail:\n%s", a.name, stopTimeout, tailFile(a.logPath, 40))
	}
}

// countReader reads the output topic read_committed and keeps, per word,
// the counts in the order read.
type countReader struct {
	t      *testing.T
	cl     *kgo.Client
	counts map[string][]int64
	total  int
	ends   map[int32]bool // partitions whose end record was read
	bad    []string
}

func (r *countReader) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	fs := r.cl.PollFetches(ctx)
	fs.EachError(func(_ string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			r.t.Logf("fetch output partition %d: %v (the client retries)", p, err)
		}
	})
	fs.EachRecord(func(rec *kgo.Record) {
		word := string(rec.Key)
		if word == streamsEndKey {
			r.ends[rec.Partition] = true
			return
		}
		if len(rec.Value) != 8 {
			r.bad = append(r.bad, fmt.Sprintf("%s@%d/%d: %d-byte value", word, rec.Partition, rec.Offset, len(rec.Value)))
			return
		}
		r.counts[word] = append(r.counts[word], int64(binary.BigEndian.Uint64(rec.Value)))
		r.total++
	})
}

// complete reports whether every word's last count is its occurrences.
func (r *countReader) complete(want map[string]int) bool {
	for w, n := range want {
		c := r.counts[w]
		if len(c) == 0 || c[len(c)-1] != int64(n) {
			return false
		}
	}
	return true
}

func TestClusterStreamsExactlyOnceLeaderKill9(t *testing.T) {
	_, jar := javaJar(t)

	c := startCluster(t)
	suffix := time.Now().UnixNano() % 1e9
	in, out := fmt.Sprintf("streams-in-%d", suffix), fmt.Sprintf("streams-out-%d", suffix)
	appID := fmt.Sprintf("streams-wc-%d", suffix)
	createClusterTopic(t, c, in)
	createClusterTopic(t, c, out)

	rng := rand.New(rand.NewSource(17))
	words := make([]string, streamsWords)
	want := map[string]int{}
	for i := range words {
		words[i] = streamsWord(rng)
		want[words[i]]++
	}
	prod, _ := c.adminClient(kgo.RecordRetries(100), kgo.ProduceRequestTimeout(10*time.Second))
	rcl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.bootstrap()...),
		kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, clKgoDebugOpts(t, "streams-reader")...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	r := &countReader{t: t, cl: rcl, counts: map[string][]int64{}, ends: map[int32]bool{}}

	bootstrap := strings.Join(c.bootstrap(), ",")
	apps := []*streamsApp{}
	for _, name := range []string{"a", "b"} {
		apps = append(apps, newStreamsApp(t, jar, name, bootstrap, appID, in, out, t.TempDir(), fmt.Sprint(clusterSize)))
	}
	defer func() {
		if t.Failed() {
			for _, a := range apps {
				t.Logf("Streams instance %s log tail (%s):\n%s", a.name, a.logPath, tailFile(a.logPath, 30))
			}
		}
	}()
	start := time.Now()
	deadline := start.Add(streamsTimeout)
	// waitFor polls the output (and checks the instances) until cond holds.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			for _, a := range apps {
				a.check()
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in time (%d counts read committed, complete=%v, end records of %d partitions)", what, r.total, r.complete(want), len(r.ends))
			}
			r.poll(context.Background())
		}
		t.Logf("%.1fs: %s (%d counts read committed)", time.Since(start).Seconds(), what, r.total)
	}

	killLeader := func() {
		t.Helper()
		old := c.leader()
		c.node(old).kill9()
		t.Logf("%.1fs: leader node %d killed with SIGKILL", time.Since(start).Seconds(), old)
		c.node(old).start()
		newLeader := c.waitFormed(c.ids()...)
		t.Logf("%.1fs: node %d restarted, leader node %d", time.Since(start).Seconds(), old, newLeader)
	}

	for _, a := range apps {
		a.start()
	}
	waitFor("both instances running", func() bool { return apps[0].runs() > 0 && apps[1].runs() > 0 })

	// The words go in at a steady pace while the failures happen, so that
	// the instances are inside transactions when they do.
	produced := make(chan error, 1)
	prodCtx, stopProducing := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { stopProducing(); wg.Wait() })
	go func() {
		defer wg.Done()
		var mu sync.Mutex
		var first error
		pace := time.NewTicker(streamsPace)
		defer pace.Stop()
		for i := 0; i < streamsWords; i++ {
			if i%streamsBatch == 0 && i > 0 {
				select {
				case <-prodCtx.Done():
					produced <- prodCtx.Err()
					return
				case <-pace.C:
				}
			}
			prod.Produce(prodCtx, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte(words[i])}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && first == nil {
					first = fmt.Errorf("producing input word %s: %w", r.Key, err)
				}
			})
		}
		err := prod.Flush(prodCtx)
		mu.Lock()
		defer mu.Unlock()
		if first != nil {
			err = first
		}
		produced <- err
	}()

	waitFor("counting under way", func() bool { return r.total >= streamsWords/6 })
	killLeader()
	waitFor("counting goes on after the leader kill", func() bool { return r.total >= streamsWords*2/5 })
	// Instance b dies; while a takes its tasks over and b comes back on
	// its state directory, the leader is killed again.
	runsB := apps[1].runs()
	apps[1].kill9()
	t.Logf("%.1fs: Streams instance b killed with SIGKILL", time.Since(start).Seconds())
	apps[1].start()
	killLeader()
	waitFor("instance b running again", func() bool { return apps[1].runs() > runsB })
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("input: %v", err)
		}
	case <-time.After(time.Until(deadline)):
		t.Fatal("input: not all words produced in time")
	}
	t.Logf("%.1fs: all %d words produced", time.Since(start).Seconds(), streamsWords)
	waitFor("every count complete", func() bool { return r.complete(want) })

	for _, a := range apps {
		a.stop()
	}
	// An end record in every output partition, written after the
	// instances closed: reading to it reads everything they committed.
	endProd, _ := c.adminClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	step(t, "write an end record to every output partition", time.Minute, func(ctx context.Context) error {
		for p := int32(0); p < clusterPartitions; p++ {
			endProd.Produce(ctx, &kgo.Record{Topic: out, Partition: p, Key: []byte(streamsEndKey)}, nil)
		}
		return endProd.Flush(ctx)
	})
	deadline = time.Now().Add(verifyTimeout)
	waitFor("every output partition read to its end record", func() bool { return len(r.ends) == clusterPartitions })

	// Not asserted: how much output the failures aborted (records that
	// read_uncommitted sees and read_committed does not).
	ucl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer ucl.Close()
	u := &countReader{t: t, cl: ucl, counts: map[string][]int64{}, ends: map[int32]bool{}}
	for len(u.ends) < clusterPartitions && time.Now().Before(deadline) {
		u.poll(context.Background())
	}
	t.Logf("read_uncommitted: %d counts (%d of aborted transactions)", u.total, u.total-r.total)

	var problems []string
	ws := make([]string, 0, len(r.counts))
	for w := range r.counts {
		ws = append(ws, w)
	}
	sort.Strings(ws)
	for _, w := range ws {
		if want[w] == 0 {
			problems = append(problems, fmt.Sprintf("%s: counted but never produced", w))
		}
	}
	for w, n := range want {
		got := r.counts[w]
		for i, v := range got {
			if v != int64(i+1) {
				problems = append(problems, fmt.Sprintf("%s (%d occurrences): count #%d is %d (counts %v)", w, n, i+1, v, firstCounts(got, i)))
				break
			}
		}
		if len(got) != n {
			problems = append(problems, fmt.Sprintf("%s: %d counts for %d occurrences", w, len(got), n))
		}
	}
	problems = append(problems, r.bad...)
	sort.Strings(problems)
	t.Logf("%d counts read committed for %d words (%d distinct); instance a ran %d times, b %d times",
		r.total, streamsWords, len(want), apps[0].runs(), apps[1].runs())
	if len(problems) > 0 {
		t.Fatalf("not exactly once: %d problems: %s", len(problems), firstN(problems, 10))
	}
}

// firstCounts is got around index i, for a failure message.
func firstCounts(got []int64, i int) []int64 {
	lo, hi := max(0, i-3), min(len(got), i+4)
	return got[lo:hi]
}
