package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Load for the multi-node scenarios: one idempotent acks=all franz-go
// producer and a consumer group of three members of one client library, all
// bootstrapped with every node, and the bookkeeping that checks what the
// clients saw.

const (
	clusterPartitions = 6
	clusterMembers    = 3
	// envClientLogDir makes every franz-go client of the cluster scenarios
	// log at debug level to a file in this directory, and keeps the client
	// programs' stderr there. Set KGATE_E2E_RDKAFKA_DEBUG (librdkafka's
	// "debug" property, for example "cgrp,protocol") to have the
	// confluent-kafka-python consumer log there too.
	envClientLogDir = "KGATE_E2E_CLIENT_LOG_DIR"
)

func clusterValue(i int) string { return fmt.Sprintf("cl-%09d", i) }

func parseClusterValue(v string) (int, bool) {
	i, err := strconv.Atoi(strings.TrimPrefix(v, "cl-"))
	return i, err == nil && strings.HasPrefix(v, "cl-")
}

// clKgoDebugOpts returns the logger options for a franz-go client named name.
func clKgoDebugOpts(t *testing.T, name string) []kgo.Opt {
	dir := os.Getenv(envClientLogDir)
	if dir == "" {
		return nil
	}
	safe := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s-%d.log", safe, name, time.Now().UnixNano()%1e9)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(f, kgo.LogLevelDebug, func() string {
		return time.Now().Format("15:04:05.000000 ")
	}))}
}

// createClusterTopic creates a topic with clusterPartitions partitions and
// waits until Metadata shows each partition led.
func createClusterTopic(t *testing.T, c *kgateCluster, topic string) {
	t.Helper()
	// A follower learns of the topic a moment after the leader created it;
	// a short metadata min age lets kadm ask again without franz-go's
	// default 5 s wait.
	_, adm := c.adminClient(kgo.MetadataMinAge(100 * time.Millisecond))
	step(t, fmt.Sprintf("create topic %s with %d partitions (kadm)", topic, clusterPartitions), createTimeout,
		func(ctx context.Context) error {
			cfg := map[string]*string{}
			for k, v := range topicConfig {
				cfg[k] = &v
			}
			resp, err := adm.CreateTopic(ctx, clusterPartitions, 1, cfg, topic)
			if err != nil {
				return err
			}
			if resp.Err != nil {
				return resp.Err
			}
			for {
				md, err := adm.Metadata(ctx, topic)
				if err == nil {
					td := md.Topics[topic]
					led := 0
					for _, p := range td.Partitions {
						if p.Err == nil && p.Leader >= 0 {
							led++
						}
					}
					if td.Err == nil && led == clusterPartitions {
						return nil
					}
					err = fmt.Errorf("%d of %d partitions led (topic error %v)", led, clusterPartitions, td.Err)
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
}

// clusterProducer produces clusterValue(i) to partition i % clusterPartitions
// at a moderate rate until finish.
type clusterProducer struct {
	t    *testing.T
	cl   *kgo.Client
	acks *ackLog
	stop chan struct{}
	done chan struct{}
}

func startClusterProducer(t *testing.T, c *kgateCluster, topic string) *clusterProducer {
	t.Helper()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.bootstrap()...),
		kgo.ClientID("cluster-producer"),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent by default
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(90 * time.Second),
		kgo.ProducerLinger(5 * time.Millisecond),
	}, clKgoDebugOpts(t, "producer")...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	p := &clusterProducer{t: t, cl: cl, acks: newAckLog(), stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() {
		p.halt()
		cl.Close()
	})
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			r := &kgo.Record{Topic: topic, Partition: int32(i % clusterPartitions), Value: []byte(clusterValue(i))}
			p.acks.sent(i)
			// A background context: a record handed to the client is
			// either acknowledged or failed by the client itself.
			cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) { p.acks.done(i, err) })
			if i%5 == 4 {
				time.Sleep(5 * time.Millisecond) // about 1000 records/s
			}
		}
	}()
	return p
}

func (p *clusterProducer) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// acked is the number of acknowledged records so far.
func (p *clusterProducer) acked() int {
	n, _, _ := p.acks.counts()
	return n
}

// waitAcked waits until more than n records are acknowledged.
func (p *clusterProducer) waitAcked(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for p.acked() <= n {
		if time.Now().After(deadline) {
			return fmt.Errorf("no record acknowledged within %v (%s)", timeout, p.acks.summary())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// finish stops producing, waits for every outstanding record and fails the
// test if any record failed.
func (p *clusterProducer) finish() {
	p.t.Helper()
	p.halt()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		p.t.Fatalf("producer did not flush: %v (%s)", err, p.acks.summary())
	}
	p.t.Logf("producer: %s", p.acks.summary())
	if _, failed, _ := p.acks.counts(); failed > 0 {
		p.t.Errorf("producer: %d records failed: %s", failed, p.acks.summary())
	}
}

// clGroupWatch collects what the members of the group saw: records, rebalance
// callbacks and client errors. Callbacks, client errors and records read
// twice count once the group is armed (it has stabilised) and until a member
// starts closing. Before that the group forms through rebalances, as on any
// Kafka cluster: a commit in one gets the client's RebalanceInProgressException,
// and a member that read records of a partition it then hands over without
// a commit leaves them to be read again by the next owner.
type clGroupWatch struct {
	mu       sync.Mutex
	armed    bool
	disarmed bool
	// consumed lists, for each value index, the offsets it was read at:
	// the same offset twice is a member reading again, two offsets a
	// duplicate in the log.
	consumed map[int][]int64
	// armedReads is consumed for the reads made while armed.
	armedReads map[int][]int64
	misplace   []string // records found in another partition than produced to
	// noDuplicates makes report fail for a record consumed twice.
	noDuplicates bool
	// clientMayEnd is how many group sessions the members may end on
	// their own when a coordinator lookup could not reach a killed node
	// (sessionEndedByClient); ended lists those sessions.
	clientMayEnd int
	ended        []string
	members      map[string]*clMemberWatch
}

type clMemberWatch struct {
	closing     bool
	owned       map[int32]bool
	records     int
	events      []string       // rebalance callbacks after arming, before closing
	badErrs     []string       // non-retriable errors after arming, before closing
	formingErrs []string       // non-retriable errors before arming (logged)
	softErrs    map[string]int // retriable errors before closing
}

func newClGroupWatch() *clGroupWatch {
	return &clGroupWatch{consumed: map[int][]int64{}, armedReads: map[int][]int64{}, members: map[string]*clMemberWatch{}}
}

func (w *clGroupWatch) member(name string) *clMemberWatch {
	m := w.members[name]
	if m == nil {
		m = &clMemberWatch{owned: map[int32]bool{}, softErrs: map[string]int{}, closing: w.disarmed}
		w.members[name] = m
	}
	return m
}

func (w *clGroupWatch) arm() {
	w.mu.Lock()
	w.armed = true
	w.mu.Unlock()
}

// disarm stops counting callbacks and errors: the test begins closing the
// members, and each leaving member rebalances the others.
func (w *clGroupWatch) disarm() {
	w.mu.Lock()
	w.armed, w.disarmed = false, true
	for _, m := range w.members {
		m.closing = true
	}
	w.mu.Unlock()
}

// rebalance records an assigned, revoked or lost callback.
func (w *clGroupWatch) rebalance(name, kind string, parts []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.member(name)
	for _, p := range parts {
		m.owned[p] = kind == "assigned"
	}
	if w.armed && !m.closing {
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		m.events = append(m.events, fmt.Sprintf("%s %s %v", time.Now().Format("15:04:05.000"), kind, parts))
	}
}

func (w *clGroupWatch) record(name string, partition int32, offset int64, value string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.member(name).records++
	i, ok := parseClusterValue(value)
	if !ok {
		w.misplace = append(w.misplace, fmt.Sprintf("unexpected value %q in partition %d", value, partition))
		return
	}
	if int32(i%clusterPartitions) != partition {
		w.misplace = append(w.misplace, fmt.Sprintf("%s in partition %d", value, partition))
	}
	w.consumed[i] = append(w.consumed[i], offset)
	if w.armed {
		w.armedReads[i] = append(w.armedReads[i], offset)
	}
}

func (w *clGroupWatch) clientError(name, desc string, retriable bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.member(name)
	if m.closing {
		return
	}
	if retriable {
		m.softErrs[desc]++
		return
	}
	e := fmt.Sprintf("%s %s", time.Now().Format("15:04:05.000"), desc)
	if !w.armed {
		m.formingErrs = append(m.formingErrs, e)
		return
	}
	m.badErrs = append(m.badErrs, e)
}

// sessionEndedByClient records err, a franz-go member's group session
// error, as a session the client ended on its own, and reports whether it
// did. franz-go gives up its group session when a coordinator lookup dials a
// node that refuses the connection and the lookup it then sends to the next
// broker of its rotation dials a refusing node too (kgo's retryable.Request
// retries on a next broker only if that lookup found one): after a kill,
// that is the killed node twice in a row, once as a discovered broker and
// once as a seed, before any survivor could be asked. No answer of kgate's
// is involved, Kafka's coordinator moves end sessions the same way (see
// docs/benchmarks.md), and the member rejoins under its member id. Any other
// session error is a client error the watch fails on.
func (w *clGroupWatch) sessionEndedByClient(name string, err error) bool {
	var gs *kgo.ErrGroupSession
	var op *net.OpError
	if !errors.As(err, &gs) || !errors.As(err, &op) || op.Op != "dial" || !errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.member(name).closing || len(w.ended) >= w.clientMayEnd {
		return false
	}
	w.ended = append(w.ended, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), name, err))
	return true
}

// endedByClient is how many group sessions sessionEndedByClient recorded.
func (w *clGroupWatch) endedByClient() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ended)
}

func (w *clGroupWatch) setClosing(name string) {
	w.mu.Lock()
	w.member(name).closing = true
	w.mu.Unlock()
}

// owned returns the partitions a member holds according to its callbacks.
func (w *clGroupWatch) owned(name string) []int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int32
	for p, ok := range w.member(name).owned {
		if ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (w *clGroupWatch) recordsOf(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.member(name).records
}

// duplicatesLocked tells the records consumed more than once while armed
// apart: read again at the same offset (a member's position went back), or
// at two offsets (the log holds the record twice), with a few of each.
func (w *clGroupWatch) duplicatesLocked() string {
	var again, twice []string
	for _, i := range slices.Sorted(maps.Keys(w.armedReads)) {
		offs := w.armedReads[i]
		if len(offs) < 2 {
			continue
		}
		desc := fmt.Sprintf("%s at %v", clusterValue(i), offs)
		if slices.Min(offs) == slices.Max(offs) {
			again = append(again, desc)
		} else {
			twice = append(twice, desc)
		}
	}
	few := func(l []string) []string { return l[:min(len(l), 5)] }
	return fmt.Sprintf("%d read again at the same offset, e.g. %v; %d at more than one offset, e.g. %v",
		len(again), few(again), len(twice), few(twice))
}

// missing returns the acknowledged indexes not consumed yet.
func (w *clGroupWatch) missing(acked []int) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for _, i := range acked {
		if len(w.consumed[i]) == 0 {
			out = append(out, i)
		}
	}
	return out
}

// report fails the test for every callback after arming, every
// non-retriable error and every misplaced record, and logs the retriable
// errors.
func (w *clGroupWatch) report(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.members))
	for n := range w.members {
		names = append(names, n)
	}
	sort.Strings(names)
	dups, forming := 0, 0
	for i, offs := range w.consumed {
		switch {
		case len(w.armedReads[i]) > 1:
			dups++
		case len(offs) > 1:
			forming++
		}
	}
	t.Logf("group consumed %d distinct records (%d more than once after it was stable; %d read again across the rebalances that formed it)",
		len(w.consumed), dups, forming)
	// A session a client ended costs a rebalance: the member's uncommitted
	// records are read again and every member sees callbacks.
	rebalanced := len(w.ended) > 0
	for _, e := range w.ended {
		t.Logf("group session ended by the client (rejoined under its member id): %s", e)
	}
	if w.noDuplicates && dups > 0 && !rebalanced {
		t.Errorf("%d records consumed more than once, with no rebalance (%s)", dups, w.duplicatesLocked())
	}
	for _, n := range names {
		m := w.members[n]
		t.Logf("member %s: %d records, retriable errors %v", n, m.records, m.softErrs)
		if len(m.formingErrs) > 0 {
			t.Logf("member %s: client errors while the group formed: %s", n, strings.Join(m.formingErrs, "; "))
		}
		switch {
		case len(m.events) > 0 && rebalanced:
			t.Logf("member %s: rebalance callbacks after a client ended its session: %s", n, strings.Join(m.events, "; "))
		case len(m.events) > 0:
			t.Errorf("member %s: rebalance callbacks after the group had stabilised: %s", n, strings.Join(m.events, "; "))
		}
		if len(m.badErrs) > 0 {
			t.Errorf("member %s: non-retriable client errors: %s", n, strings.Join(m.badErrs, "; "))
		}
	}
	if len(w.misplace) > 0 {
		t.Errorf("%d records read from the wrong partition, e.g. %s", len(w.misplace), firstN(w.misplace, 5))
	}
}

// clMember is one consumer of the group under test.
type clMember interface {
	// name is the member's client id.
	name() string
	// close stops consuming and closes the consumer, which leaves the group.
	close(ctx context.Context) error
}

// clMemberKind starts group members of one client library.
type clMemberKind struct {
	client string
	// require fails the test if the client is not installed.
	require func(t *testing.T)
	start   func(t *testing.T, c *kgateCluster, topic, group, name string, w *clGroupWatch, o clMemberOpts) clMember
}

// clDrain stops the producer and waits until the group has consumed every
// record it acknowledged and committed to the end of every partition. It
// returns the acknowledged records' indexes and a fresh admin client:
// franz-go keeps a coordinator it cannot dial cached for sharded group
// requests.
func clDrain(t *testing.T, c *kgateCluster, prod *clusterProducer, w *clGroupWatch, group, topic string) ([]int, *kadm.Client) {
	t.Helper()
	prod.finish()
	acked := prod.acks.ackedIndexes()
	_, adm := c.adminClient()
	step(t, fmt.Sprintf("group consumes all %d acknowledged records", len(acked)), time.Minute,
		func(ctx context.Context) error { return clWaitConsumed(ctx, w, acked) })
	step(t, "committed offsets reach the end of every partition", 30*time.Second,
		func(ctx context.Context) error { return clWaitCommitted(ctx, adm, group, topic) })
	return acked, adm
}

// startMembers starts clusterMembers members of the group, named
// prefix-0, prefix-1, …, and returns them with their names.
func (k clMemberKind) startMembers(t *testing.T, c *kgateCluster, topic, group, prefix string, w *clGroupWatch, o clMemberOpts) ([]clMember, []string) {
	t.Helper()
	var members []clMember
	var names []string
	for i := range clusterMembers {
		name := fmt.Sprintf("%s-%d", prefix, i)
		names = append(names, name)
		members = append(members, k.start(t, c, topic, group, name, w, o))
	}
	return members, names
}

// clMemberOpts are a member's group settings; zero values keep the
// client's defaults (commits every 500 ms).
type clMemberOpts struct {
	session, heartbeat, commit time.Duration
	cooperative                bool // the cooperative-sticky assignor
}

// args are the options as key=value arguments of the consumer programs.
func (o clMemberOpts) args() []string {
	var out []string
	for _, kv := range []struct {
		k string
		d time.Duration
	}{{"session", o.session}, {"heartbeat", o.heartbeat}, {"commit", o.commit}} {
		if kv.d > 0 {
			out = append(out, fmt.Sprintf("%s=%d", kv.k, kv.d.Milliseconds()))
		}
	}
	if o.cooperative {
		out = append(out, "assignor=cooperative-sticky")
	}
	return out
}

// clKgoMember is a franz-go group consumer (cooperative-sticky, autocommit
// every 500 ms) run in process.
type clKgoMember struct {
	id     string
	cl     *kgo.Client
	w      *clGroupWatch
	cancel context.CancelFunc
	done   chan struct{}
}

var clFranzGoMembers = clMemberKind{
	client:  "franz-go",
	require: func(*testing.T) {},
	start:   startClKgoMember,
}

func startClKgoMember(t *testing.T, c *kgateCluster, topic, group, name string, w *clGroupWatch, o clMemberOpts) clMember {
	t.Helper()
	m := &clKgoMember{id: name, w: w, done: make(chan struct{})}
	parts := func(ps map[string][]int32) []int32 { return append([]int32(nil), ps[topic]...) }
	commit := 500 * time.Millisecond
	if o.commit > 0 {
		commit = o.commit
	}
	var group0 []kgo.Opt // franz-go's default balancer is cooperative-sticky already
	if o.session > 0 {
		group0 = append(group0, kgo.SessionTimeout(o.session))
	}
	if o.heartbeat > 0 {
		group0 = append(group0, kgo.HeartbeatInterval(o.heartbeat))
	}

	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.bootstrap()...),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.AutoCommitInterval(commit),
		kgo.AutoCommitCallback(func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				w.clientError(name, "commit: "+err.Error(), clusterRetriable(err))
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						w.clientError(name, fmt.Sprintf("commit partition %d: %v", rp.Partition, err), clusterRetriable(err))
					}
				}
			}
		}),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			w.rebalance(name, "assigned", parts(ps))
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if len(ps[topic]) > 0 {
				w.rebalance(name, "revoked", parts(ps))
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if len(ps[topic]) > 0 {
				w.rebalance(name, "lost", parts(ps))
			}
		}),
	}, append(group0, clKgoDebugOpts(t, name)...)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	t.Cleanup(func() {
		cancel()
		<-m.done
		cl.Close()
	})
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachError(func(topic string, p int32, err error) {
				if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) || w.sessionEndedByClient(name, err) {
					return
				}
				w.clientError(name, fmt.Sprintf("fetch %s/%d: %v", topic, p, err), clusterRetriable(err))
			})
			fs.EachRecord(func(r *kgo.Record) { w.record(name, r.Partition, r.Offset, string(r.Value)) })
		}
	}()
	return m
}

func (m *clKgoMember) name() string { return m.id }

func (m *clKgoMember) close(context.Context) error {
	m.w.setClosing(m.id)
	m.cancel()
	<-m.done
	m.cl.Close() // commits what was polled and leaves the group
	return nil
}

// groupMeta is the member id and generation as the client knows them.
func (m *clKgoMember) groupMeta() (string, int32) { return m.cl.GroupMetadata() }

// clusterRetriable says whether a client error is one a Kafka client is
// expected to retry through: a retriable Kafka error code or a broken
// connection.
//
// A group session that ended (kgo.ErrGroupSession) is not: the member lost
// its partitions.
func clusterRetriable(err error) bool {
	var gs *kgo.ErrGroupSession
	if errors.As(err, &gs) {
		return false
	}
	var op *net.OpError
	return kerr.IsRetriable(err) || kgo.IsRetryableBrokerErr(err) || (errors.As(err, &op) && op.Op == "dial")
}

// clProgramMember runs a group consumer program from test/clients. The
// program takes BOOTSTRAP TOPIC group-consume GROUP CLIENT_ID, prints one
// JSON event per line on stdout (clProgramEvent; the protocol is described in
// test/clients/confluent-kafka-python/cluster_consumer.py) and closes its
// consumer when its stdin reaches EOF.
type clProgramMember struct {
	id     string
	w      *clGroupWatch
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr string // path
	done   chan struct{}
	result clProgramResult
}

type clProgramResult struct {
	seen  bool
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// clProgramEvent is one line of a consumer program's output.
type clProgramEvent struct {
	Event      string  `json:"event"`
	Partitions []int32 `json:"partitions"`
	Records    []struct {
		P int32  `json:"p"`
		O int64  `json:"o"`
		V string `json:"v"`
	} `json:"records"`
	Where     string `json:"where"`
	Code      int    `json:"code"`
	Name      string `json:"name"`
	Retriable bool   `json:"retriable"`
	Fatal     bool   `json:"fatal"`
	Message   string `json:"message"`
	// Last line.
	OK    *bool  `json:"ok"`
	Error string `json:"error"`
}

// librdkafka's local error codes that only say a connection or the
// coordinator is being re-established: the client recovers by itself.
var clLibrdkafkaTransient = map[string]bool{
	"_TRANSPORT":        true,
	"_ALL_BROKERS_DOWN": true,
	"_WAIT_COORD":       true,
	"_TIMED_OUT":        true,
	"_NO_OFFSET":        true, // an auto commit with nothing new to commit
}

func (e clProgramEvent) retriable() bool {
	switch {
	case e.Fatal:
		return false
	case e.Retriable, clLibrdkafkaTransient[e.Name]:
		return true
	case e.Code > 0:
		return kerr.IsRetriable(kerr.ErrorForCode(int16(e.Code)))
	}
	return false
}

func startClProgramMember(t *testing.T, dir string, argv []string, c *kgateCluster, topic, group, name string, w *clGroupWatch, opts []string) *clProgramMember {
	t.Helper()
	logDir := os.Getenv(envClientLogDir)
	if logDir == "" {
		logDir = t.TempDir()
	}
	safe := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	m := &clProgramMember{id: name, w: w, done: make(chan struct{}),
		stderr: filepath.Join(logDir, fmt.Sprintf("%s-%s-%d.stderr", safe, name, time.Now().UnixNano()%1e9))}
	args := append(append(append([]string{}, argv...), strings.Join(c.bootstrap(), ","), topic, "group-consume", group, name), opts...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = groupProcAttr()
	errf, err := os.Create(m.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stderr = errf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if m.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", strings.Join(args, " "), err)
	}
	m.cmd = cmd
	t.Cleanup(func() {
		select {
		case <-m.done:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-m.done
		}
		if t.Failed() {
			t.Logf("%s stderr, last lines:\n%s", name, tailFile(m.stderr, 30))
		}
	})
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			m.handle(sc.Bytes())
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
	}()
	return m
}

func (m *clProgramMember) handle(line []byte) {
	var e clProgramEvent
	if err := json.Unmarshal(line, &e); err != nil {
		m.w.clientError(m.id, fmt.Sprintf("unparsable output line %q", line), false)
		return
	}
	switch {
	case e.OK != nil:
		m.result = clProgramResult{seen: true, OK: *e.OK, Error: e.Error}
	case e.Event == "assigned" || e.Event == "revoked" || e.Event == "lost":
		if len(e.Partitions) > 0 {
			m.w.rebalance(m.id, e.Event, e.Partitions)
		}
	case e.Event == "records":
		for _, r := range e.Records {
			m.w.record(m.id, r.P, r.O, r.V)
		}
	case e.Event == "error":
		desc := fmt.Sprintf("%s: %s (code %d)", e.Where, e.Name, e.Code)
		if !e.retriable() {
			desc = fmt.Sprintf("%s: %s (code %d, retriable %v, fatal %v): %s", e.Where, e.Name, e.Code, e.Retriable, e.Fatal, e.Message)
		}
		m.w.clientError(m.id, desc, e.retriable())
	case e.Event == "closing":
		m.w.setClosing(m.id)
	}
}

func (m *clProgramMember) name() string { return m.id }

func (m *clProgramMember) close(ctx context.Context) error {
	m.stdin.Close()
	select {
	case <-m.done:
	case <-ctx.Done():
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
		return fmt.Errorf("%s did not exit after its stdin closed: %v", m.id, ctx.Err())
	}
	switch {
	case !m.result.seen:
		return fmt.Errorf("%s exited (%v) without a result line; stderr:\n%s", m.id, m.cmd.ProcessState, tailFile(m.stderr, 20))
	case !m.result.OK:
		return fmt.Errorf("%s failed: %s; stderr:\n%s", m.id, m.result.Error, tailFile(m.stderr, 20))
	}
	return nil
}

var clConfluentPythonMembers = clMemberKind{
	client: "confluent-kafka-python",
	require: func(t *testing.T) {
		requireCommand(t, "confluent-kafka-python", clientsDir(t, "confluent-kafka-python"), python(t), "-c", "import confluent_kafka")
	},
	start: func(t *testing.T, c *kgateCluster, topic, group, name string, w *clGroupWatch, o clMemberOpts) clMember {
		return startClProgramMember(t, clientsDir(t, "confluent-kafka-python"), []string{python(t), "cluster_consumer.py"},
			c, topic, group, name, w, o.args())
	},
}

var clJavaMembers = clMemberKind{
	client: "java",
	require: func(t *testing.T) {
		javaJar(t)
	},
	start: func(t *testing.T, c *kgateCluster, topic, group, name string, w *clGroupWatch, o clMemberOpts) clMember {
		dir := clientsDir(t, "java")
		return startClProgramMember(t, dir, []string{"java", javaTmpDir(t), "-cp", filepath.Join(dir, "target", "kgate-e2e-java.jar"), "kgate.e2e.ClusterConsumer"},
			c, topic, group, name, w, o.args())
	},
}

// clGroupSnapshot is what an operator sees of the group: DescribeGroups
// (member ids, client ids, assignments) and kgate's /v1/groups generation.
type clGroupSnapshot struct {
	state      string
	generation int32
	members    map[string]string  // client id -> member id
	assigned   map[string][]int32 // client id -> partitions of the topic
}

func (s clGroupSnapshot) String() string {
	var parts []string
	for cid, mid := range s.members {
		parts = append(parts, fmt.Sprintf("%s=%s%v", cid, mid, s.assigned[cid]))
	}
	sort.Strings(parts)
	return fmt.Sprintf("state %s generation %d members [%s]", s.state, s.generation, strings.Join(parts, " "))
}

// clDescribeGroup takes a clGroupSnapshot through kadm and the leader's admin
// API.
func clDescribeGroup(ctx context.Context, c *kgateCluster, adm *kadm.Client, group, topic string) (clGroupSnapshot, error) {
	s := clGroupSnapshot{members: map[string]string{}, assigned: map[string][]int32{}}
	dgs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return s, err
	}
	dg, ok := dgs[group]
	if !ok {
		return s, fmt.Errorf("group %s not described", group)
	}
	if dg.Err != nil {
		return s, dg.Err
	}
	s.state = dg.State
	for _, m := range dg.Members {
		s.members[m.ClientID] = m.MemberID
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range ca.Topics {
				if at.Topic == topic {
					ps := append([]int32(nil), at.Partitions...)
					sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
					s.assigned[m.ClientID] = ps
				}
			}
		}
	}
	leader, err := c.formed(ctx)
	if err != nil {
		return s, err
	}
	var out struct {
		Groups []struct {
			Group      string `json:"group"`
			Generation int32  `json:"generation"`
		} `json:"groups"`
	}
	if err := c.getJSON(ctx, c.node(leader), "/v1/groups", &out); err != nil {
		return s, err
	}
	s.generation = -1
	for _, g := range out.Groups {
		if g.Group == group {
			s.generation = g.Generation
		}
	}
	return s, nil
}

// clWaitGroupStable waits until the group is Stable with exactly the named
// members, each consuming a share of the topic that matches what its own
// callbacks say, every member has consumed records, and this held twice a
// second apart with the same member ids and generation.
func clWaitGroupStable(t *testing.T, c *kgateCluster, adm *kadm.Client, group, topic string, names []string, w *clGroupWatch) clGroupSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var prev *clGroupSnapshot
	var prevAt time.Time
	var last string
	for {
		s, err := clDescribeGroup(ctx, c, adm, group, topic)
		if err == nil {
			err = clGroupSettled(s, names, w)
		}
		switch {
		case err != nil:
			last, prev = err.Error(), nil
		case prev == nil || prev.String() != s.String():
			last, prev, prevAt = "settled once: "+s.String(), &s, time.Now()
		case time.Since(prevAt) >= time.Second:
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s did not stabilise within 60s: %s", group, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func clGroupSettled(s clGroupSnapshot, names []string, w *clGroupWatch) error {
	if s.state != "Stable" {
		return fmt.Errorf("group state %s: %s", s.state, s)
	}
	if len(s.members) != len(names) {
		return fmt.Errorf("%d members, want %d: %s", len(s.members), len(names), s)
	}
	covered := map[int32]bool{}
	for _, n := range names {
		if _, ok := s.members[n]; !ok {
			return fmt.Errorf("member %s missing: %s", n, s)
		}
		got := s.assigned[n]
		if len(got) == 0 {
			return fmt.Errorf("member %s has no partition: %s", n, s)
		}
		if own := w.owned(n); fmt.Sprint(own) != fmt.Sprint(got) {
			return fmt.Errorf("member %s owns %v by its callbacks, %v by DescribeGroups", n, own, got)
		}
		if w.recordsOf(n) == 0 {
			return fmt.Errorf("member %s has consumed nothing yet", n)
		}
		for _, p := range got {
			if covered[p] {
				return fmt.Errorf("partition %d assigned twice: %s", p, s)
			}
			covered[p] = true
		}
	}
	if len(covered) != clusterPartitions {
		return fmt.Errorf("%d of %d partitions assigned: %s", len(covered), clusterPartitions, s)
	}
	return nil
}

// clOffsetWatch samples the group's committed offsets and notes every one
// that goes backwards (or disappears).
type clOffsetWatch struct {
	mu       sync.Mutex
	high     map[int32]int64
	regress  []string
	samples  int
	failures map[string]int
	cancel   context.CancelFunc
	done     chan struct{}
}

func clWatchOffsets(c *kgateCluster, group, topic string) *clOffsetWatch {
	ctx, cancel := context.WithCancel(context.Background())
	o := &clOffsetWatch{high: map[int32]int64{}, failures: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	bootstrap := c.bootstrap()
	go func() {
		defer close(o.done)
		var cl *kgo.Client
		defer func() {
			if cl != nil {
				cl.Close()
			}
		}()
		for ctx.Err() == nil {
			var resp kadm.OffsetResponses
			var err error
			if cl == nil {
				cl, err = kgo.NewClient(kgo.SeedBrokers(bootstrap...))
			}
			if err == nil {
				rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
				resp, err = kadm.NewClient(cl).FetchOffsets(rctx, group)
				rcancel()
				if err == nil {
					err = resp.Error()
				}
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil && cl != nil {
				// franz-go keeps sending a sharded OffsetFetch to a cached
				// coordinator it cannot dial; a new client looks it up
				// again, as a new admin tool run would.
				cl.Close()
				cl = nil
			}
			o.sample(resp, topic, err)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return o
}

func (o *clOffsetWatch) sample(resp kadm.OffsetResponses, topic string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.failures[err.Error()]++
		return
	}
	o.samples++
	now := time.Now().Format("15:04:05.000")
	for p, high := range o.high {
		r, ok := resp.Lookup(topic, p)
		if !ok || r.At < high {
			at := int64(-1)
			if ok {
				at = r.At
			}
			o.regress = append(o.regress, fmt.Sprintf("%s partition %d: %d after %d", now, p, at, high))
		}
	}
	for p, r := range resp[topic] {
		if r.At > o.high[p] {
			o.high[p] = r.At
		}
	}
}

// finish stops sampling and fails the test for any regression.
func (o *clOffsetWatch) finish(t *testing.T) {
	t.Helper()
	o.cancel()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	t.Logf("committed offsets: %d samples, failed fetches %v, highest %v", o.samples, o.failures, o.high)
	if o.samples == 0 {
		t.Errorf("no successful OffsetFetch sample")
	}
	if len(o.regress) > 0 {
		t.Errorf("committed offsets went backwards %d times: %s", len(o.regress), firstN(o.regress, 10))
	}
}

// clWaitCommitted waits until the group's committed offsets reach the end of
// every partition.
func clWaitCommitted(ctx context.Context, adm *kadm.Client, group, topic string) error {
	var last error
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			var resp kadm.OffsetResponses
			resp, err = adm.FetchOffsets(ctx, group)
			if err == nil {
				err = resp.Error()
			}
			if err == nil {
				var behind []string
				ends.Each(func(e kadm.ListedOffset) {
					if r, ok := resp.Lookup(topic, e.Partition); !ok || r.At != e.Offset {
						behind = append(behind, fmt.Sprintf("p%d committed %d end %d", e.Partition, r.At, e.Offset))
					}
				})
				if len(behind) == 0 {
					return nil
				}
				err = errors.New(strings.Join(behind, ", "))
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// clWaitConsumed waits until the group has consumed every acknowledged record.
func clWaitConsumed(ctx context.Context, w *clGroupWatch, acked []int) error {
	for {
		miss := w.missing(acked)
		if len(miss) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			var s []string
			for _, i := range miss {
				s = append(s, clusterValue(i))
			}
			return fmt.Errorf("%d of %d acknowledged records never consumed by the group, e.g. %s", len(miss), len(acked), firstN(s, 10))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
