package e2e

// Helpers for the consumer-group tests (groups_*_test.go): kgate started with
// short group delays, the group member programs of test/clients (see
// test/clients/GROUPS.md) run as processes that print JSON lines, and checks
// of assignments, records and committed offsets.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// groupPartitions is the partition count of the group tests' topics.
	groupPartitions = 6
	// groupSessionMs is the members' session timeout unless a test says
	// otherwise; the members heartbeat every 500 ms.
	groupSessionMs = 6000
	// memberJoinTimeout bounds waiting for members (JVMs included) to start,
	// join and settle; memberExitTimeout bounds a clean close.
	groupJoinTimeout = 60 * time.Second
	groupExitTimeout = 30 * time.Second
	groupStepTimeout = 45 * time.Second
)

// startGroupKgate starts kgate with a 1 s initial rebalance delay (KIP-134)
// and a 1 s minimum session timeout, through its KGATE_* environment
// variables, which the kgate process inherits.
func startGroupKgate(t *testing.T) *kgateServer {
	t.Helper()
	t.Setenv("KGATE_GROUP_INITIAL_REBALANCE_DELAY", "1s")
	t.Setenv("KGATE_GROUP_MIN_SESSION_TIMEOUT", "1s")
	return startKgate(t)
}

// groupProgram runs one client's group member program:
// argv... BOOTSTRAP TOPIC group GROUP CLIENT_ID [key=value ...].
type groupProgram struct {
	name string
	dir  string
	argv []string
	// generation is set when the program reports its group generation.
	generation bool
	// memberID is set when the program reports its member id.
	memberID bool
}

var (
	groupFranzBuildOnce sync.Once
	groupFranzBuildPath string
	groupFranzBuildErr  error
)

// franzGroupProgram builds test/clients/franzgo-consumer (once per test
// binary) into bin/franzgo-consumer.
func franzGroupProgram(t *testing.T) groupProgram {
	t.Helper()
	root := repoRoot(t)
	groupFranzBuildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		groupFranzBuildPath = filepath.Join(root, "bin", "franzgo-consumer")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", groupFranzBuildPath, "./test/clients/franzgo-consumer")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			groupFranzBuildErr = fmt.Errorf("go build ./test/clients/franzgo-consumer: %v\n%s", err, out)
		}
	})
	if groupFranzBuildErr != nil {
		t.Fatal(groupFranzBuildErr)
	}
	return groupProgram{name: "franz-go", dir: root, argv: []string{groupFranzBuildPath}, generation: true, memberID: true}
}

func confluentGroupProgram(t *testing.T) groupProgram {
	t.Helper()
	dir := clientsDir(t, "confluent-kafka-python")
	py := python(t)
	requireCommand(t, "confluent-kafka-python", dir, py, "-c", "import confluent_kafka")
	return groupProgram{name: "confluent-kafka-python", dir: dir, argv: []string{py, "group_consumer.py"}}
}

func kafkajsGroupProgram(t *testing.T) groupProgram {
	t.Helper()
	dir := clientsDir(t, "kafkajs")
	requireCommand(t, "kafkajs (npm ci in test/clients/kafkajs)", dir, "node", "-e", "require('kafkajs')")
	return groupProgram{name: "kafkajs", dir: dir, argv: []string{"node", "group.js"}, memberID: true}
}

// javaJar checks for an up-to-date test/clients/java jar (the Java client
// programs: clients, group members, transactions, Kafka Streams).
func javaJar(t *testing.T) (dir, jar string) {
	t.Helper()
	dir = clientsDir(t, "java")
	jar = filepath.Join(dir, "target", "kgate-e2e-java.jar")
	requireCommand(t, "java", dir, "java", "-version")
	requireFile(t, jar, "Java client jar (mvn package in test/clients/java)")
	requireFresh(t, jar, filepath.Join(dir, "pom.xml"), filepath.Join(dir, "src"))
	return dir, jar
}

func javaGroupProgram(t *testing.T) groupProgram {
	t.Helper()
	dir, jar := javaJar(t)
	return groupProgram{name: "java", dir: dir, argv: []string{"java", javaTmpDir(t), "-cp", jar, "kgate.e2e.GroupMain"},
		generation: true, memberID: true}
}

// groupRecord is one record a member processed.
type groupRecord struct {
	clientID string
	p        int32
	o        int64
	k        string
}

// groupMemberEvent is one JSON line of a member program.
type groupMemberEvent struct {
	Event      string           `json:"event"`
	Partitions []int32          `json:"partitions"`
	Generation *int32           `json:"generation"`
	MemberID   string           `json:"member_id"`
	P          int32            `json:"p"`
	O          int64            `json:"o"`
	K          string           `json:"k"`
	Offsets    map[string]int64 `json:"offsets"`
	Error      string           `json:"error"`
	OK         *bool            `json:"ok"`
}

// groupMember is one running group member program.
type groupMember struct {
	t        *testing.T
	prog     groupProgram
	clientID string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   *groupLockedBuffer
	exited   chan struct{}
	waitErr  error

	mu          sync.Mutex
	stopping    bool // the test closed or killed it
	assigned    []int32
	hasAssigned bool
	assignments int // "assigned" events
	revocations int // "revoked" and "lost" events (non-empty ones)
	generation  int32
	memberID    string
	records     []groupRecord
	commits     map[int32]int64 // last committed offset per partition
	commitErrs  []string
	errs        []string
	lines       []string // last stdout lines, for failure messages
	final       *groupMemberEvent
}

type groupLockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *groupLockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *groupLockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startGroupMember starts prog as a member of group with the given client id.
func startGroupMember(t *testing.T, prog groupProgram, bootstrap, topic, group, clientID string, opts ...string) *groupMember {
	t.Helper()
	args := append(append([]string{}, prog.argv...), bootstrap, topic, "group", group, clientID)
	args = append(args, opts...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = prog.dir
	cmd.SysProcAttr = groupProcAttr()
	m := &groupMember{t: t, prog: prog, clientID: clientID, cmd: cmd, stderr: &groupLockedBuffer{},
		exited: make(chan struct{}), generation: -1, commits: map[int32]int64{}}
	cmd.Stderr = m.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s member %s: %v", prog.name, clientID, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			m.handle(sc.Text())
		}
		m.waitErr = cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		if m.running() {
			m.kill9()
		}
		if t.Failed() {
			t.Logf("%s member %s: stdout tail:\n%s\nstderr tail:\n%s", prog.name, clientID,
				strings.Join(m.lastLines(15), "\n"), tail(m.stderr.String(), 25))
		}
	})
	return m
}

func (m *groupMember) handle(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lines = append(m.lines, line)
	if len(m.lines) > 200 {
		m.lines = m.lines[len(m.lines)-100:]
	}
	var ev groupMemberEvent
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		m.errs = append(m.errs, "unparsable line: "+line)
		return
	}
	switch {
	case ev.OK != nil:
		m.final = &ev
	case ev.Event == "assigned":
		m.assigned = slices.Sorted(slices.Values(ev.Partitions))
		m.hasAssigned = true
		m.assignments++
		if ev.Generation != nil {
			m.generation = *ev.Generation
		}
		if ev.MemberID != "" {
			m.memberID = ev.MemberID
		}
	case ev.Event == "revoked" || ev.Event == "lost":
		m.revocations++
	case ev.Event == "record":
		m.records = append(m.records, groupRecord{clientID: m.clientID, p: ev.P, o: ev.O, k: ev.K})
	case ev.Event == "commit":
		for ps, o := range ev.Offsets {
			p, err := strconv.Atoi(ps)
			if err != nil {
				m.errs = append(m.errs, "bad commit line: "+line)
				continue
			}
			m.commits[int32(p)] = o
		}
	case ev.Event == "commit_error":
		m.commitErrs = append(m.commitErrs, ev.Error)
	case ev.Event == "error":
		m.errs = append(m.errs, ev.Error)
	}
}

func (m *groupMember) lastLines(n int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.lines) > n {
		return slices.Clone(m.lines[len(m.lines)-n:])
	}
	return slices.Clone(m.lines)
}

func (m *groupMember) running() bool {
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// groupMemberState is a snapshot of what a member reported.
type groupMemberState struct {
	clientID    string
	assigned    []int32
	hasAssigned bool
	assignments int
	revocations int
	generation  int32
	memberID    string
	records     []groupRecord
	commits     map[int32]int64
	commitErrs  []string
}

func (m *groupMember) state() groupMemberState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return groupMemberState{
		clientID: m.clientID, assigned: slices.Clone(m.assigned), hasAssigned: m.hasAssigned,
		assignments: m.assignments, revocations: m.revocations, generation: m.generation, memberID: m.memberID,
		records: slices.Clone(m.records), commits: groupCloneOffsets(m.commits), commitErrs: slices.Clone(m.commitErrs),
	}
}

func groupCloneOffsets(in map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// failure describes an unexpected exit, or is "" while the member runs or
// was stopped by the test.
func (m *groupMember) failure() string {
	m.mu.Lock()
	stopping := m.stopping
	m.mu.Unlock()
	if stopping || m.running() {
		return ""
	}
	return fmt.Sprintf("%s member %s exited on its own (%v): %s\nstderr tail:\n%s", m.prog.name, m.clientID,
		m.waitErr, m.finalText(), tail(m.stderr.String(), 25))
}

func (m *groupMember) finalText() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.final == nil {
		return "no result line"
	}
	if *m.final.OK {
		return "ok"
	}
	return "error: " + m.final.Error
}

// close asks the member to close (a dynamic member leaves the group) and
// waits for a clean exit with an ok result.
func (m *groupMember) close() {
	m.t.Helper()
	m.requestClose()
	m.waitClosed()
}

func (m *groupMember) requestClose() {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	_, _ = io.WriteString(m.stdin, "close\n")
	_ = m.stdin.Close()
}

func (m *groupMember) waitClosed() {
	m.t.Helper()
	select {
	case <-m.exited:
	case <-time.After(groupExitTimeout):
		m.kill9()
		m.t.Fatalf("%s member %s did not exit within %v of close (killed it)\nstderr tail:\n%s",
			m.prog.name, m.clientID, groupExitTimeout, tail(m.stderr.String(), 25))
	}
	if m.waitErr != nil || m.finalText() != "ok" {
		m.t.Fatalf("%s member %s: close: exit %v, result %s\nstderr tail:\n%s", m.prog.name, m.clientID,
			m.waitErr, m.finalText(), tail(m.stderr.String(), 25))
	}
}

// kill9 kills the member's process group with SIGKILL: no LeaveGroup, no
// final commit.
func (m *groupMember) kill9() {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-m.exited:
	case <-time.After(groupExitTimeout):
		m.t.Errorf("%s member %s still running %v after SIGKILL", m.prog.name, m.clientID, groupExitTimeout)
	}
}

// waitGroupCond polls cond until it holds; it fails the test at the timeout or
// as soon as one of members exits on its own. cond returns a description of
// the state for the failure message.
func waitGroupCond(t *testing.T, what string, timeout time.Duration, members []*groupMember, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := ""
	for {
		for _, m := range members {
			if f := m.failure(); f != "" {
				t.Fatalf("%s: %s", what, f)
			}
		}
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		ok, desc := cond(cctx)
		ccancel()
		if ok {
			t.Logf("%s: ok (%v)", what, time.Since(begin).Round(time.Millisecond))
			return
		}
		last = desc
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached within %v; last state: %s", what, timeout, last)
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// newGroupAdmin is a kadm client for the test; it is closed at the end.
func newGroupAdmin(t *testing.T, bootstrap string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createGroupTopic creates topic with n partitions through kadm and waits
// for its metadata.
func createGroupTopic(t *testing.T, adm *kadm.Client, topic string, n int32) {
	t.Helper()
	step(t, fmt.Sprintf("create topic %s with %d partitions (kadm)", topic, n), createTimeout, func(ctx context.Context) error {
		cfg := map[string]*string{}
		for k, v := range topicConfig {
			cfg[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, n, 1, cfg, topic)
		if err != nil {
			return err
		}
		if resp.Err != nil {
			return resp.Err
		}
		for {
			md, err := adm.Metadata(ctx, topic)
			if err == nil {
				if td, ok := md.Topics[topic]; ok && td.Err == nil && len(td.Partitions) == int(n) {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("metadata: %w (%v)", ctx.Err(), err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// groupKey is the key of the group tests' record i; record i goes to
// partition i % partitions, so it is at offset i / partitions there.
func groupKey(i int) string { return "key-" + strconv.Itoa(i) }

// produceGroupRecords produces records from..to-1 (partition i % parts).
func produceGroupRecords(t *testing.T, bootstrap, topic string, parts, from, to int) {
	t.Helper()
	step(t, fmt.Sprintf("produce records %d..%d to %s (kgo)", from, to-1, topic), produceTimeout, func(ctx context.Context) error {
		// Uncompressed: kafkajs ships no snappy codec, kgo's default.
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			return err
		}
		defer cl.Close()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % parts),
				Key: []byte(groupKey(i)), Value: []byte("value-" + strconv.Itoa(i))})
		}
		return cl.ProduceSync(ctx, recs...).FirstErr()
	})
}

// checkGroupCoverage reports whether the members' current assignments are
// non-empty, pairwise disjoint and together cover partitions 0..n-1.
func checkGroupCoverage(states []groupMemberState, n int) (bool, string) {
	owner := map[int32]string{}
	var desc []string
	ok := true
	for _, s := range states {
		desc = append(desc, fmt.Sprintf("%s=%v", s.clientID, s.assigned))
		if !s.hasAssigned || len(s.assigned) == 0 {
			ok = false
		}
		for _, p := range s.assigned {
			if prev, dup := owner[p]; dup {
				ok = false
				desc = append(desc, fmt.Sprintf("partition %d owned by %s and %s", p, prev, s.clientID))
			}
			owner[p] = s.clientID
		}
	}
	for p := range int32(n) {
		if _, has := owner[p]; !has {
			ok = false
		}
	}
	return ok, strings.Join(desc, " ")
}

func groupMemberStates(members []*groupMember) []groupMemberState {
	out := make([]groupMemberState, len(members))
	for i, m := range members {
		out[i] = m.state()
	}
	return out
}

// groupDescribeMatches checks kadm's DescribeGroups view of group against the
// members' own reports: Stable, exactly these members (by client id), each
// with client host /127.0.0.1, the member id it reported (when the program
// reports it) and the assignment it reported.
func groupDescribeMatches(ctx context.Context, adm *kadm.Client, group, topic string, members []*groupMember) (bool, string) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return false, fmt.Sprintf("DescribeGroups: %v", err)
	}
	d, ok := ds[group]
	if !ok {
		return false, "DescribeGroups: group missing from the answer"
	}
	if d.Err != nil {
		return false, fmt.Sprintf("DescribeGroups: %v", d.Err)
	}
	if d.State != "Stable" || d.ProtocolType != "consumer" {
		return false, fmt.Sprintf("DescribeGroups: state %q protocol type %q, want Stable consumer", d.State, d.ProtocolType)
	}
	if len(d.Members) != len(members) {
		return false, fmt.Sprintf("DescribeGroups: %d members %v, want %d", len(d.Members), groupDescribedMembers(d), len(members))
	}
	for _, m := range members {
		s := m.state()
		var dm *kadm.DescribedGroupMember
		for i := range d.Members {
			if d.Members[i].ClientID == s.clientID {
				dm = &d.Members[i]
			}
		}
		if dm == nil {
			return false, fmt.Sprintf("DescribeGroups: no member with client id %s in %v", s.clientID, groupDescribedMembers(d))
		}
		if dm.ClientHost != "/127.0.0.1" {
			return false, fmt.Sprintf("DescribeGroups: member %s client host %q, want /127.0.0.1", s.clientID, dm.ClientHost)
		}
		if m.prog.memberID && dm.MemberID != s.memberID {
			return false, fmt.Sprintf("DescribeGroups: member %s has member id %q, the client reports %q", s.clientID, dm.MemberID, s.memberID)
		}
		got := groupDescribedPartitions(dm, topic)
		if !slices.Equal(got, s.assigned) {
			return false, fmt.Sprintf("DescribeGroups: member %s assigned %v, the client reports %v", s.clientID, got, s.assigned)
		}
	}
	return true, fmt.Sprintf("DescribeGroups: Stable, protocol %s, members %v", d.Protocol, groupDescribedMembers(d))
}

func groupDescribedMembers(d kadm.DescribedGroup) []string {
	var out []string
	for _, m := range d.Members {
		out = append(out, fmt.Sprintf("%s(%s)=%v", m.ClientID, m.MemberID, groupDescribedAllPartitions(&m)))
	}
	return out
}

func groupDescribedAllPartitions(dm *kadm.DescribedGroupMember) []int32 {
	c, ok := dm.Assigned.AsConsumer()
	if !ok {
		return nil
	}
	var out []int32
	for _, t := range c.Topics {
		out = append(out, t.Partitions...)
	}
	slices.Sort(out)
	return out
}

func groupDescribedPartitions(dm *kadm.DescribedGroupMember, topic string) []int32 {
	c, ok := dm.Assigned.AsConsumer()
	if !ok {
		return nil
	}
	var out []int32
	for _, t := range c.Topics {
		if t.Topic == topic {
			out = append(out, t.Partitions...)
		}
	}
	slices.Sort(out)
	return out
}

// waitGroupBalanced waits until members hold disjoint, non-empty assignments
// covering every partition of topic and DescribeGroups agrees with them.
func waitGroupBalanced(t *testing.T, what string, timeout time.Duration, adm *kadm.Client, group, topic string, members []*groupMember) {
	t.Helper()
	var desc string
	waitGroupCond(t, what, timeout, members, func(ctx context.Context) (bool, string) {
		ok, cov := checkGroupCoverage(groupMemberStates(members), groupPartitions)
		if !ok {
			return false, "assignments: " + cov
		}
		ok, desc = groupDescribeMatches(ctx, adm, group, topic, members)
		return ok, "assignments: " + cov + "; " + desc
	})
	_, cov := checkGroupCoverage(groupMemberStates(members), groupPartitions)
	t.Logf("%s: %s; %s", what, cov, desc)
}

// groupCommitted is the group's committed offsets of topic (partition -> offset).
func groupCommitted(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	os, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range os[topic] {
		if o.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, o.Err)
		}
		out[p] = o.At
	}
	return out, nil
}

// groupCommittedAt reports whether every partition of topic has offset want
// committed for group.
func groupCommittedAt(ctx context.Context, adm *kadm.Client, group, topic string, n int, want int64) (bool, string) {
	c, err := groupCommitted(ctx, adm, group, topic)
	if err != nil {
		return false, fmt.Sprintf("FetchOffsets: %v", err)
	}
	for p := range int32(n) {
		if o, ok := c[p]; !ok || o != want {
			return false, fmt.Sprintf("FetchOffsets: %v, want %d on every partition", c, want)
		}
	}
	return true, ""
}

// groupRecordsOf merges the records of the members.
func groupRecordsOf(members []*groupMember) []groupRecord {
	var out []groupRecord
	for _, m := range members {
		out = append(out, m.state().records...)
	}
	return out
}

// groupCoversOffsets reports whether recs hold every offset in [from, to) of every
// partition 0..n-1.
func groupCoversOffsets(recs []groupRecord, n int, from, to int64) (bool, string) {
	seen := map[int32]map[int64]bool{}
	for _, r := range recs {
		if seen[r.p] == nil {
			seen[r.p] = map[int64]bool{}
		}
		seen[r.p][r.o] = true
	}
	var missing []string
	for p := range int32(n) {
		k := 0
		for o := from; o < to; o++ {
			if !seen[p][o] {
				k++
			}
		}
		if k > 0 {
			missing = append(missing, fmt.Sprintf("p%d: %d missing", p, k))
		}
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf("records [%d,%d): %s", from, to, strings.Join(missing, ", "))
	}
	return true, ""
}

// checkGroupRecordKeys checks that every record's key is the one produced at its
// partition and offset.
func checkGroupRecordKeys(t *testing.T, recs []groupRecord, n int) {
	t.Helper()
	for _, r := range recs {
		if want := groupKey(int(r.o)*n + int(r.p)); r.k != want {
			t.Fatalf("member %s read partition %d offset %d with key %q, want %q", r.clientID, r.p, r.o, r.k, want)
		}
	}
}

// countGroupRecords counts how often each (partition, offset) was processed.
func countGroupRecords(recs []groupRecord) map[[2]int64]int {
	out := map[[2]int64]int{}
	for _, r := range recs {
		out[[2]int64{int64(r.p), r.o}]++
	}
	return out
}

// groupFirstOffsets is the smallest offset processed per partition.
func groupFirstOffsets(recs []groupRecord) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range recs {
		if o, ok := out[r.p]; !ok || r.o < o {
			out[r.p] = r.o
		}
	}
	return out
}

// closeGroupMembers asks every member to close at once, then waits for each.
func closeGroupMembers(t *testing.T, members []*groupMember) {
	t.Helper()
	begin := time.Now()
	for _, m := range members {
		m.requestClose()
	}
	for _, m := range members {
		m.waitClosed()
	}
	t.Logf("closed %d members (%v)", len(members), time.Since(begin).Round(time.Millisecond))
}
