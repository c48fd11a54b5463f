//go:build chaos && linux

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The campaign's cluster: kgate processes whose Raft and gossip peers are
// reached only through the Network's proxies, so that the nemesis can cut
// any link. Clients and the admin API reach the nodes directly.

// nodeFlags shorten elections (as test/e2e's cluster does) and the first
// rebalance of the group.
var nodeFlags = []string{
	"--raft-heartbeat-timeout", "500ms",
	"--raft-election-timeout", "500ms",
	"--group-initial-rebalance-delay", "1s",
	// Few entries kept after a snapshot, so that every snapshot compacts
	// the log (crash-compaction) and a node back from a fault often
	// catches up by an installed snapshot rather than the log.
	"--raft-trailing-logs", "256",
	// Small Raft log segments (about two seconds of the workload each),
	// so that a compaction deletes segment files.
	"--raft-log-segment-bytes", "65536",
	// A checksum of the applied commands every 256 indexes: when replicas
	// differ, the first window whose checksums differ says where
	// (digestsPart).
	"--raft-digest-every", "256",
}

// How the nodes keep partitions (-storage): with references into the Raft
// log (each record written once) a node also copies batches out of files
// kept past 1 MiB (--raft-retained-bytes), so that copies happen between
// the faults.
var storageFlag = flag.String("storage", "", "partition storage of the nodes: copy, raft-log, or mixed (node ids 1 and 2 modulo 3 raft-log, the others copy); empty: kgate's default or KGATE_PARTITION_STORAGE")

// storageFlags are node id's flags for -storage.
func storageFlags(id int) ([]string, error) {
	refs := []string{"--partition-storage", "raft-log", "--raft-retained-bytes", "1048576"}
	switch *storageFlag {
	case "":
		return nil, nil
	case "copy":
		return []string{"--partition-storage", "copy"}, nil
	case "raft-log":
		return refs, nil
	case "mixed":
		if id%3 == 0 {
			return []string{"--partition-storage", "copy"}, nil
		}
		return refs, nil
	}
	return nil, fmt.Errorf("-storage %q: copy, raft-log or mixed", *storageFlag)
}

type cluster struct {
	t     *testing.T
	bin   string
	nw    *Network
	nodes []*node // the members, by node id (churn replaces them)
	gone  []*node // nodes that left the cluster (churn)
	dir   string  // data and logs, kept when the test fails
	http  *http.Client
	used  map[string]bool // addresses handed out
	// ports: the nodes' listening ports come from [portFirst, portFirst+
	// portCount), portNext the next to try (freeAddr).
	portFirst, portNext int
	// smallDisks: each node's data directory is a tmpfs of its own, for
	// the full-disk kind (disk_test.go).
	smallDisks bool
}

type node struct {
	c                          *cluster
	id                         int
	kafka, raft, gossip, admin string // real listeners
	raftProxy, gossipProxy     *Proxy
	dataDir, logPath           string
	args                       []string
	disk                       *smallDisk // with cluster.smallDisks
	left                       time.Time  // when it left the cluster (churn)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	killing bool   // the nemesis is killing it
	died    string // how and when it exited when nobody killed it
	exitErr error  // of the last exit (nil: status 0)
}

// startCluster starts n nodes and waits until they form a cluster; with
// smallDisks each node's data directory is a file system of its own.
func startCluster(t *testing.T, n int, smallDisks bool) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: kgateBinary(t), nw: NewNetwork(), http: &http.Client{Timeout: 2 * time.Second}, used: map[string]bool{},
		smallDisks: smallDisks}
	dir, err := os.MkdirTemp("", "kgate-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	// Registered first, so it runs last: the nodes are gone (c.cleanup)
	// before their file systems are unmounted.
	t.Cleanup(c.unmountDisks)
	for i := 1; i <= n; i++ {
		c.nodes = append(c.nodes, c.newNode(i))
	}
	var seeds []string
	for _, nd := range c.nodes {
		seeds = append(seeds, nd.gossipProxy.Addr)
	}
	for _, nd := range c.nodes {
		nd.args = append(nd.args, "--bootstrap-expect", strconv.Itoa(n), "--join", strings.Join(seeds, ","))
	}
	t.Cleanup(c.cleanup)
	for _, nd := range c.nodes {
		nd.start()
	}
	if _, err := c.waitFormed(90 * time.Second); err != nil {
		t.Fatalf("cluster of %d not formed: %v", n, err)
	}
	return c
}

// newNode allocates node id's addresses, proxies and arguments (without
// --join or --bootstrap-expect) and a data directory of its own.
func (c *cluster) newNode(id int) *node {
	t := c.t
	nd := &node{c: c, id: id, dataDir: filepath.Join(c.dir, fmt.Sprintf("node%d", id)),
		logPath: filepath.Join(c.dir, fmt.Sprintf("node%d.log", id))}
	nd.kafka, nd.raft, nd.gossip, nd.admin = c.freeAddr(), c.freeAddr(), c.freeAddr(), c.freeAddr()
	var err error
	if nd.raftProxy, err = c.nw.Listen(id, nd.raft, false); err != nil {
		t.Fatal(err)
	}
	if nd.gossipProxy, err = c.nw.Listen(id, nd.gossip, true); err != nil {
		t.Fatal(err)
	}
	nd.args = []string{"serve", "--node-id", strconv.Itoa(nd.id), "--data-dir", nd.dataDir,
		"--kafka-addr", nd.kafka, "--admin-addr", nd.admin,
		"--raft-addr", nd.raft, "--advertise-raft-addr", nd.raftProxy.Addr,
		"--gossip-addr", nd.gossip, "--advertise-gossip-addr", nd.gossipProxy.Addr}
	nd.args = append(nd.args, nodeFlags...)
	storage, err := storageFlags(id)
	if err != nil {
		t.Fatal(err)
	}
	nd.args = append(nd.args, storage...)
	nd.args = append(nd.args, extraNodeFlags()...)
	if c.smallDisks {
		if nd.disk, err = mountSmallDisk(nd.dataDir); err != nil {
			t.Fatal(err)
		}
	}
	return nd
}

// unmountDisks unmounts the nodes' file systems, their data copied
// beside them first when the run failed (as cleanup keeps the logs).
func (c *cluster) unmountDisks() {
	if !c.smallDisks {
		return
	}
	keep := c.t.Failed() || os.Getenv("KGATE_CHAOS_LOGS") != ""
	for _, nd := range c.all() {
		if nd.disk == nil {
			continue
		}
		to := ""
		if keep {
			to = nd.dataDir + ".kept"
		}
		if err := nd.disk.unmount(to); err != nil {
			c.t.Errorf("node %d's file system: %v", nd.id, err)
		} else if keep {
			c.t.Logf("node %d's data (a tmpfs, unmounted) copied to %s", nd.id, to)
		}
	}
	if keep {
		return
	}
	os.RemoveAll(c.dir)
}

func (c *cluster) cleanup() {
	for _, nd := range c.all() {
		nd.mu.Lock()
		cmd, paused := nd.cmd, nd.paused
		nd.mu.Unlock()
		if cmd != nil && nd.running() {
			nd.mu.Lock()
			nd.killing = true
			nd.mu.Unlock()
			if paused {
				_ = cmd.Process.Signal(syscall.SIGCONT)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-nd.exited
		}
	}
	c.nw.Close()
	if c.t.Failed() || os.Getenv("KGATE_CHAOS_LOGS") != "" {
		for _, nd := range c.all() {
			c.t.Logf("node %d log (%s), last lines:\n%s", nd.id, nd.logPath, tailFile(nd.logPath, 60))
		}
		c.t.Logf("the nodes' data and logs are kept in %s", c.dir)
		return
	}
	if !c.smallDisks { // else unmountDisks removes it, once they are unmounted
		os.RemoveAll(c.dir)
	}
}

func (c *cluster) ids() []int {
	var out []int
	for _, nd := range c.nodes {
		out = append(out, nd.id)
	}
	return out
}

func (c *cluster) kafkaAddrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.kafka)
	}
	return out
}

// node is the member with node id id.
func (c *cluster) node(id int) *node {
	for _, nd := range c.nodes {
		if nd.id == id {
			return nd
		}
	}
	c.t.Fatalf("no node %d in the cluster (members %v)", id, c.ids())
	return nil
}

// all is every node started, members and those that left.
func (c *cluster) all() []*node { return append(append([]*node(nil), c.nodes...), c.gone...) }

// started is the node with id id among all, a member or one that left
// since (a fault's target may leave in a later churn).
func (c *cluster) started(id int) *node {
	for _, nd := range c.all() {
		if nd.id == id {
			return nd
		}
	}
	c.t.Fatalf("no node %d was started (members %v)", id, c.ids())
	return nil
}

func (nd *node) start() { nd.startExpecting(false) }

// startExpecting starts the node; with exit set its exit is expected (a
// node started on a full disk stops by itself) and not reported by died.
func (nd *node) startExpecting(exit bool) {
	t := nd.c.t
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s chaos: %s %s\n", time.Now().Format(time.RFC3339Nano), nd.c.bin, strings.Join(nd.args, " "))
	cmd := exec.Command(nd.c.bin, nd.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting node %d: %v", nd.id, err)
	}
	exited := make(chan struct{})
	nd.mu.Lock()
	nd.cmd, nd.exited, nd.paused, nd.killing = cmd, exited, false, exit
	nd.mu.Unlock()
	nd.c.nw.SetProcess(nd.id, cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		nd.mu.Lock()
		nd.exitErr = err
		if !nd.killing {
			nd.died = fmt.Sprintf("node %d (pid %d) exited on its own at %s: %v", nd.id, cmd.Process.Pid, time.Now().Format("15:04:05.000"), err)
		}
		nd.mu.Unlock()
		close(exited)
	}()
}

func (nd *node) running() bool {
	nd.mu.Lock()
	ch := nd.exited
	nd.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (nd *node) kill9() {
	nd.mu.Lock()
	cmd, ch := nd.cmd, nd.exited
	nd.killing = true
	nd.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-ch
}

// died says which nodes exited when nobody killed them ("" if none).
func (c *cluster) died() string {
	var out []string
	for _, nd := range c.all() {
		nd.mu.Lock()
		if nd.died != "" {
			out = append(out, nd.died)
		}
		nd.mu.Unlock()
	}
	return strings.Join(out, "; ")
}

// pause stops the process (SIGSTOP) and returns once the kernel reports
// it stopped.
func (nd *node) pause() error {
	nd.mu.Lock()
	cmd := nd.cmd
	nd.paused = true
	nd.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return pollUntil(10*time.Second, func() error {
		if s := procState(cmd.Process.Pid); s != "T" {
			return fmt.Errorf("node %d state %q, want T (stopped)", nd.id, s)
		}
		return nil
	})
}

// resume continues a paused process and returns once it runs again.
func (nd *node) resume() error {
	nd.mu.Lock()
	cmd := nd.cmd
	nd.paused = false
	nd.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	return pollUntil(10*time.Second, func() error {
		if s := procState(cmd.Process.Pid); s == "T" {
			return fmt.Errorf("node %d still stopped", nd.id)
		}
		return nil
	})
}

// procState is the state letter of /proc/PID/stat (R, S, T, ...).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// clusterView is the part of GET /v1/cluster the campaign reads.
type clusterView struct {
	LeaderID *int32 `json:"leader_id"`
	Nodes    []struct {
		ID          int32  `json:"id"`
		GossipState string `json:"gossip_state"`
		Voter       bool   `json:"voter"`
	} `json:"nodes"`
}

func (c *cluster) view(ctx context.Context, nd *node) (clusterView, error) {
	var v clusterView
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.admin+"/v1/cluster", nil)
	if err != nil {
		return v, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("node %d /v1/cluster: %s", nd.id, resp.Status)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// metric is the value of an unlabelled series on nd's /metrics.
func (c *cluster) metric(ctx context.Context, nd *node, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("node %d: no %s", nd.id, name)
}

func (c *cluster) ready(ctx context.Context, nd *node) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.admin+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %d /readyz: %s", nd.id, resp.Status)
	}
	return nil
}

// formed reports the leader once every node runs, is ready, names the
// same leader, and sees every node as an alive voter.
func (c *cluster) formed() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	leader := -1
	for _, nd := range c.nodes {
		if !nd.running() {
			return 0, fmt.Errorf("node %d is not running", nd.id)
		}
		if err := c.ready(ctx, nd); err != nil {
			return 0, err
		}
		v, err := c.view(ctx, nd)
		if err != nil {
			return 0, err
		}
		if v.LeaderID == nil {
			return 0, fmt.Errorf("node %d names no leader", nd.id)
		}
		if leader >= 0 && int(*v.LeaderID) != leader {
			return 0, fmt.Errorf("nodes disagree on the leader: %d and %d", leader, *v.LeaderID)
		}
		leader = int(*v.LeaderID)
		alive := 0
		for _, m := range v.Nodes {
			if m.Voter && m.GossipState == "alive" {
				alive++
			}
		}
		if alive != len(c.nodes) {
			return 0, fmt.Errorf("node %d sees %d alive voters, want %d", nd.id, alive, len(c.nodes))
		}
	}
	return leader, nil
}

func (c *cluster) waitFormed(limit time.Duration) (int, error) {
	var leader int
	err := pollUntil(limit, func() error {
		if d := c.died(); d != "" {
			return stop{errors.New(d)}
		}
		l, err := c.formed()
		leader = l
		return err
	})
	return leader, err
}

// leader is the node that the reachable nodes name as leader and that
// names itself, or 0 when there is none right now.
func (c *cluster) leader() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, nd := range c.nodes {
		nd.mu.Lock()
		paused := nd.paused
		nd.mu.Unlock()
		if paused || !nd.running() {
			continue
		}
		v, err := c.view(ctx, nd)
		if err == nil && v.LeaderID != nil && int(*v.LeaderID) == nd.id {
			return nd.id
		}
	}
	return 0
}

// stop is an error that ends pollUntil at once.
type stop struct{ error }

// leaderBesides is a leader other than node not, as the nodes other than
// not see it (0: none agreed yet).
func (c *cluster) leaderBesides(not int) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, nd := range c.nodes {
		if nd.id == not || !nd.running() {
			continue
		}
		v, err := c.view(ctx, nd)
		if err != nil || v.LeaderID == nil || int(*v.LeaderID) == not || int(*v.LeaderID) != nd.id {
			continue
		}
		return nd.id
	}
	return 0
}

// pollUntil calls f every 20 ms until it succeeds, returns a stop, or
// limit passes.
func pollUntil(limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if s, ok := err.(stop); ok {
			return s.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// portCount is how many ports a campaign's nodes may listen on.
const portCount = 1000

// freeAddr is a loopback address free for TCP and UDP, not handed out
// before. Its port is below the kernel's ephemeral ports
// (ip_local_port_range, 32768-60999 by default): a port the harness found
// free there could be taken, before the node bound it or while a killed
// node was down, as the source port of any outgoing connection, and the
// node's start failed with "address already in use" (a churn's fresh node,
// seed 1796467775035433492, fault 66).
func (c *cluster) freeAddr() string {
	c.t.Helper()
	if c.portFirst == 0 {
		c.portFirst = *portBaseFlag
		if c.portFirst == 0 {
			c.portFirst = 20000 + rand.Intn(12)*portCount // 20000-31999
		}
		c.portNext = c.portFirst
	}
	for range portCount {
		port := c.portNext
		if c.portNext++; c.portNext == c.portFirst+portCount {
			c.portNext = c.portFirst
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if c.used[addr] {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		c.used[addr] = true
		return addr
	}
	c.t.Fatalf("no free TCP+UDP port on 127.0.0.1 in %d-%d", c.portFirst, c.portFirst+portCount-1)
	return ""
}

// kgateBinary is $KGATE_BIN, or bin/kgate built from the repository.
func kgateBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KGATE_BIN"); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
	bin := filepath.Join(dir, "bin", "kgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kgate")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -o bin/kgate ./cmd/kgate: %v\n%s", err, out)
	}
	return bin
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// digestsPart compares the "applied log digest" lines of the nodes' logs
// and describes the first window of Raft indexes in which two nodes
// applied different commands, or "" if none did.
func (c *cluster) digestsPart() string {
	type line struct {
		node     int
		crc      string
		outcomes string // "": not logged (the node replayed part of the window)
		stamp    string
	}
	byFirst := map[uint64][]line{}
	for _, nd := range c.all() {
		b, err := os.ReadFile(nd.logPath)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.Contains(l, `msg="applied log digest"`) {
				continue
			}
			var first uint64
			var crc, outcomes, stamp string
			for _, f := range strings.Fields(l) {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "first_index":
					first, _ = strconv.ParseUint(v, 10, 64)
				case "crc32c":
					crc = v
				case "outcomes_crc32c":
					outcomes = v
				case "time":
					stamp = v
				}
			}
			if first > 0 && crc != "" {
				byFirst[first] = append(byFirst[first], line{nd.id, crc, outcomes, stamp})
			}
		}
	}
	for _, first := range slices.Sorted(maps.Keys(byFirst)) {
		ls := byFirst[first]
		for _, l := range ls[1:] {
			if l.crc != ls[0].crc {
				var parts []string
				for _, l := range ls {
					parts = append(parts, fmt.Sprintf("node %d %s (logged %s)", l.node, l.crc, l.stamp))
				}
				return fmt.Sprintf("the nodes applied different commands at Raft indexes from %d: %s", first, strings.Join(parts, ", "))
			}
		}
		// The same commands: were they answered alike (offsets, codes)?
		var known []line
		for _, l := range ls {
			if l.outcomes != "" {
				known = append(known, l)
			}
		}
		for _, l := range known[min(1, len(known)):] {
			if l.outcomes != known[0].outcomes {
				var parts []string
				for _, l := range known {
					parts = append(parts, fmt.Sprintf("node %d %s (logged %s)", l.node, l.outcomes, l.stamp))
				}
				return fmt.Sprintf("the nodes applied the same commands at Raft indexes from %d but answered them differently (offsets or codes): %s",
					first, strings.Join(parts, ", "))
			}
		}
	}
	return ""
}
