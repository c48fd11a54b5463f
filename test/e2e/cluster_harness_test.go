package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The multi-node harness: three (or more) bin/kgate processes on loopback,
// each with its own data directory and four free ports, started the way
// scripts/run-cluster.sh starts them (--bootstrap-expect 3, --join every
// gossip address), with 500 ms Raft heartbeat/election timeouts and a 1 s
// initial rebalance delay. Every node is killed when its test ends.
//
//	go test -race ./test/e2e/ -run TestCluster -v
//
// | test | scenario |
// |---|---|
// | TestClusterLeaderKill9{FranzGo,ConfluentKafkaPython,Java} | kill -9 of the leader under producer + group load |
// | TestClusterLeaderSIGTERM{FranzGo,ConfluentKafkaPython,Java} | SIGTERM of the leader under the same load |
// | TestClusterJoinFourthNode | a fourth node joins through one follower |
// | TestClusterFullRestart | SIGTERM of all three, restart on the same data |
// | TestClusterFullDisk | a follower's, then the leader's data disk filled under load; restart once freed (needs root) |
// | TestClusterEveryNodeAnswers | kcat's auto-creation and topic administration through each node |
//
// The group members of the Python and Java tests are
// test/clients/confluent-kafka-python/cluster_consumer.py and
// test/clients/java/.../ClusterConsumer.java. For debugging, set
// KGATE_E2E_CLIENT_LOG_DIR (franz-go debug logs and the programs' stderr go
// there), KGATE_E2E_RDKAFKA_DEBUG (librdkafka debug contexts) and
// KGATE_E2E_CLUSTER_LOGS=1 (print the nodes' log tails even on success).

const (
	clusterSize = 3
	// clusterFormTimeout bounds how long a fresh (or restarted) cluster may
	// take until every node agrees on one leader and every voter is alive.
	clusterFormTimeout = 45 * time.Second
)

// clusterFlags shorten elections and the first rebalance of a new group.
var clusterFlags = []string{
	"--raft-heartbeat-timeout", "500ms",
	"--raft-election-timeout", "500ms",
	"--group-initial-rebalance-delay", "1s",
}

var clusterAddrFlags = []string{"kafka-addr", "raft-addr", "gossip-addr", "admin-addr"}

// kgateCluster is a set of kgate nodes started by one test.
type kgateCluster struct {
	t     *testing.T
	bin   string
	dir   string
	nodes []*clusterNode // in node id order
	http  *http.Client
	used  map[string]bool // addresses handed out
}

// clusterNode is one kgate process; its ports and data directory stay the
// same across restarts.
type clusterNode struct {
	c       *kgateCluster
	id      int32
	dataDir string
	logPath string
	addrs   map[string]string // where the node is reached (and listens, unless bind names another)
	bind    map[string]string // listen addresses that differ from addrs (for example 0.0.0.0)
	args    []string          // --join, --bootstrap-expect

	bin      string // "" runs the cluster's binary
	cmd      *exec.Cmd
	stopping bool
	exited   chan struct{}
	runErr   error
	exitedAt time.Time
}

// clusterView is GET /v1/cluster.
type clusterView struct {
	ClusterID string              `json:"cluster_id"`
	LeaderID  *int32              `json:"leader_id"`
	Nodes     []clusterMemberView `json:"nodes"`
	// Absent (0) from releases before feature levels.
	FeatureLevel    int `json:"feature_level"`
	MaxFeatureLevel int `json:"max_feature_level"`
}

type clusterMemberView struct {
	ID          int32  `json:"id"`
	KafkaAddr   string `json:"kafka_addr"`
	RaftAddr    string `json:"raft_addr"`
	GossipAddr  string `json:"gossip_addr"`
	AdminAddr   string `json:"admin_addr"`
	GossipState string `json:"gossip_state"`
	Voter       bool   `json:"voter"`
	Leader      bool   `json:"leader"`
}

func (v clusterView) member(id int32) (clusterMemberView, bool) {
	for _, m := range v.Nodes {
		if m.ID == id {
			return m, true
		}
	}
	return clusterMemberView{}, false
}

// startCluster starts clusterSize fresh nodes and waits until they have
// formed a cluster. Every node is killed when the test ends.
func startCluster(t *testing.T) *kgateCluster {
	t.Helper()
	return startClusterWith(t, nil)
}

// startClusterWith is startCluster with setup run on the nodes before they
// start: it may change their addresses, bind addresses and arguments.
func startClusterWith(t *testing.T, setup func(c *kgateCluster)) *kgateCluster {
	t.Helper()
	c := startClusterOf(t, kgateBinary(t), setup)
	c.awaitFeatureLevel()
	return c
}

// awaitFeatureLevel waits until every node is at the feature level its
// binary supports: a new cluster raises it as soon as the leader has
// heard from every voter, and tests of commands gated by a level must not
// race that.
func (c *kgateCluster) awaitFeatureLevel() {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterFormTimeout)
	defer cancel()
	for {
		err := c.featureLevelRaised(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("feature level not raised within %v: %v", clusterFormTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startClusterOf starts a cluster with every node running bin, with setup
// (if any) run on the nodes before they start.
func startClusterOf(t *testing.T, bin string, setup func(c *kgateCluster)) *kgateCluster {
	t.Helper()
	if os.Getenv(envExternal) != "" {
		t.Skipf("multi-node scenario: not possible with %s", envExternal)
	}
	c := &kgateCluster{t: t, bin: bin, dir: t.TempDir(), http: &http.Client{Timeout: 2 * time.Second},
		used: map[string]bool{}}
	for range clusterSize {
		c.newNode()
	}
	seeds := c.gossipAddrs()
	var backendArgs []string
	if iggyMode() {
		// The Iggy tier: the same scenarios, every node on one Iggy server.
		backendArgs = startIggyBackend(t).nodeArgs()
	}
	for _, n := range c.nodes {
		n.args = append([]string{"--bootstrap-expect", strconv.Itoa(clusterSize), "--join", strings.Join(seeds, ",")},
			backendArgs...)
	}
	if setup != nil {
		setup(c)
		seeds = c.gossipAddrs()
		for _, n := range c.nodes {
			n.args[3] = strings.Join(seeds, ",")
		}
	}
	t.Cleanup(c.cleanup)
	for _, n := range c.nodes {
		n.start()
	}
	leader := c.waitFormed(c.ids()...)
	t.Logf("cluster of %d formed, leader node %d", clusterSize, leader)
	return c
}

// newNode allocates the next node id with fresh ports and data directory;
// it is not started.
func (c *kgateCluster) newNode() *clusterNode {
	id := int32(len(c.nodes) + 1)
	n := &clusterNode{
		c:       c,
		id:      id,
		dataDir: filepath.Join(c.dir, fmt.Sprintf("node%d", id)),
		logPath: filepath.Join(c.dir, fmt.Sprintf("node%d.log", id)),
		addrs:   map[string]string{},
	}
	for _, f := range clusterAddrFlags {
		n.addrs[f] = c.freeAddr()
	}
	c.nodes = append(c.nodes, n)
	return n
}

// freeAddr is freeAddr, never twice the same within the cluster: a port
// just released can be handed out again.
func (c *kgateCluster) freeAddr() string {
	for range 100 {
		addr := freeAddr(c.t)
		if !c.used[addr] {
			c.used[addr] = true
			return addr
		}
	}
	c.t.Fatal("no unused free port")
	return ""
}

func (c *kgateCluster) cleanup() {
	for _, n := range c.nodes {
		if n.running() {
			n.kill9()
		} else if n.cmd != nil && !n.stopping {
			c.t.Errorf("node %d (pid %d) exited on its own at %s (%s)", n.id, n.cmd.Process.Pid,
				n.exitedAt.Format("15:04:05.000"), n.exitStatus())
		}
	}
	if c.t.Failed() || os.Getenv("KGATE_E2E_CLUSTER_LOGS") != "" {
		for _, n := range c.nodes {
			c.t.Logf("node %d log (%s), last lines:\n%s", n.id, n.logPath, tailFile(n.logPath, 80))
		}
	}
}

func (c *kgateCluster) node(id int32) *clusterNode { return c.nodes[id-1] }

func (c *kgateCluster) ids() []int32 {
	var ids []int32
	for _, n := range c.nodes {
		ids = append(ids, n.id)
	}
	return ids
}

// kafkaAddrs maps each node to the Kafka address of its first listener.
func (c *kgateCluster) kafkaAddrs() map[int32]string {
	out := map[int32]string{}
	for _, n := range c.nodes {
		out[n.id] = n.kafka()
	}
	return out
}

func (c *kgateCluster) gossipAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.addrs["gossip-addr"])
	}
	return out
}

// bootstrap lists the Kafka addresses of the first clusterSize nodes, dead
// or alive, as a client configured for the cluster would.
func (c *kgateCluster) bootstrap() []string {
	var out []string
	for _, n := range c.nodes[:clusterSize] {
		out = append(out, n.kafka())
	}
	return out
}

func (c *kgateCluster) running() []*clusterNode {
	var out []*clusterNode
	for _, n := range c.nodes {
		if n.running() {
			out = append(out, n)
		}
	}
	return out
}

// view fetches GET /v1/cluster from one node.
func (c *kgateCluster) view(ctx context.Context, n *clusterNode) (clusterView, error) {
	var v clusterView
	err := c.getJSON(ctx, n, "/v1/cluster", &v)
	return v, err
}

func (c *kgateCluster) getJSON(ctx context.Context, n *clusterNode, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addrs["admin-addr"]+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on node %d: %s", path, n.id, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

func (c *kgateCluster) ready(ctx context.Context, n *clusterNode) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addrs["admin-addr"]+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %d /readyz: %s", n.id, resp.Status)
	}
	return nil
}

// formed reports the leader once every running node is ready, names the
// same running leader, and lists every id in voters as an alive voter.
func (c *kgateCluster) formed(ctx context.Context, voters ...int32) (int32, error) {
	run := c.running()
	if len(run) == 0 {
		return 0, fmt.Errorf("no node is running")
	}
	leader := int32(-1)
	for _, n := range run {
		if err := c.ready(ctx, n); err != nil {
			return 0, err
		}
		v, err := c.view(ctx, n)
		if err != nil {
			return 0, err
		}
		if v.LeaderID == nil {
			return 0, fmt.Errorf("node %d names no leader", n.id)
		}
		if leader >= 0 && *v.LeaderID != leader {
			return 0, fmt.Errorf("nodes disagree on the leader: %d and %d", leader, *v.LeaderID)
		}
		leader = *v.LeaderID
		for _, id := range voters {
			m, ok := v.member(id)
			if !ok || !m.Voter || m.GossipState != "alive" {
				return 0, fmt.Errorf("node %d sees node %d as %+v (found %v), want an alive voter", n.id, id, m, ok)
			}
		}
	}
	if int(leader) < 1 || int(leader) > len(c.nodes) || !c.node(leader).running() {
		return 0, fmt.Errorf("leader %d is not a running node", leader)
	}
	return leader, nil
}

// waitFormed waits (clusterFormTimeout) until formed succeeds and returns
// the leader.
func (c *kgateCluster) waitFormed(voters ...int32) int32 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterFormTimeout)
	defer cancel()
	var last error
	for {
		for _, n := range c.nodes {
			if n.cmd != nil && !n.running() && !n.stopping {
				c.t.Fatalf("node %d exited (%s)\nlog tail:\n%s", n.id, n.exitStatus(), tailFile(n.logPath, 40))
			}
		}
		leader, err := c.formed(ctx, voters...)
		if err == nil {
			return leader
		}
		last = err
		select {
		case <-ctx.Done():
			c.t.Fatalf("cluster not formed within %v: %v", clusterFormTimeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leader waits (10 s) until the running nodes agree on a running leader
// and returns it.
func (c *kgateCluster) leader() int32 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		leader, err := c.formed(ctx)
		if err == nil {
			return leader
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("finding the leader: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// adminClient is a kgo client (and its kadm wrapper) bootstrapped with
// every node.
func (c *kgateCluster) adminClient(opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	c.t.Helper()
	opts = append(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...)}, opts...), clKgoDebugOpts(c.t, "admin")...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// stopAll sends SIGTERM to every running node at once and expects each to
// exit cleanly.
func (c *kgateCluster) stopAll() {
	c.t.Helper()
	run := c.running()
	for _, n := range run {
		n.stopping = true
		if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			c.t.Fatalf("SIGTERM node %d: %v", n.id, err)
		}
	}
	for _, n := range run {
		n.waitExit()
	}
}

func (n *clusterNode) kafka() string { return n.addrs["kafka-addr"] }

func (n *clusterNode) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// start starts the process and returns at once.
func (n *clusterNode) start() {
	t := n.c.t
	t.Helper()
	if n.running() {
		t.Fatalf("node %d is already running", n.id)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := []string{"serve", "--node-id", strconv.Itoa(int(n.id)), "--data-dir", n.dataDir}
	for _, f := range clusterAddrFlags {
		a := n.addrs[f]
		if b, ok := n.bind[f]; ok {
			a = b
		}
		args = append(args, "--"+f, a)
	}
	args = append(append(args, clusterFlags...), n.args...)
	bin := n.c.bin
	if n.bin != "" {
		bin = n.bin
	}
	fmt.Fprintf(logf, "=== %s harness: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting node %d: %v", n.id, err)
	}
	n.cmd, n.stopping = cmd, false
	exited := make(chan struct{})
	n.exited = exited
	go func() {
		n.runErr = cmd.Wait()
		n.exitedAt = time.Now()
		close(exited)
	}()
}

// stop sends SIGTERM and expects a clean exit within stopTimeout.
func (n *clusterNode) stop() {
	n.c.t.Helper()
	if !n.running() {
		return
	}
	n.stopping = true
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		n.c.t.Fatalf("SIGTERM node %d: %v", n.id, err)
	}
	n.waitExit()
}

func (n *clusterNode) waitExit() {
	t := n.c.t
	t.Helper()
	select {
	case <-n.exited:
	case <-time.After(stopTimeout):
		n.kill9()
		t.Fatalf("node %d did not exit within %v of SIGTERM (killed it)", n.id, stopTimeout)
	}
	if n.runErr != nil {
		t.Errorf("node %d exited uncleanly after SIGTERM: %v\nlog tail:\n%s", n.id, n.runErr, tailFile(n.logPath, 40))
	}
}

// kill9 sends SIGKILL and waits for the process to go.
func (n *clusterNode) kill9() {
	if !n.running() {
		return
	}
	n.stopping = true
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-n.exited:
	case <-time.After(stopTimeout):
		n.c.t.Errorf("node %d (pid %d) still running %v after SIGKILL", n.id, n.cmd.Process.Pid, stopTimeout)
	}
}

func (n *clusterNode) exitStatus() string {
	if n.runErr != nil {
		return n.runErr.Error()
	}
	return "exit status 0"
}
