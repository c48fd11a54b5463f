package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
)

// Every node a test starts gets a Raft transport whose network the test can
// cut, found by the node's Raft address.
var testStreams sync.Map // Raft address -> *cutStream

// testStartCut: Raft addresses whose next transport starts cut off. The
// mark is used up by that transport: ports are reused, and a later test's
// node on the same address must not start cut.
var testStartCut sync.Map

func cuttableTransport(bind string, advertise net.Addr, log hclog.Logger, connClosed func()) (*raftTransport, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s := &cutStream{ln: ln, adv: advertise, conns: map[net.Conn]struct{}{}, connClosed: connClosed}
	_, s.cut = testStartCut.LoadAndDelete(bind)
	testStreams.Store(bind, s)
	return newRaftTransport(s, log), nil
}

// Every node a test starts gets a gossip transport the test can cut off,
// found by the node's gossip address.
var testGossip sync.Map // gossip address -> *cutGossip

// testDeaf holds the gossip addresses nothing reaches: other nodes' sends
// to them are dropped and their dials refused, while the node there sends,
// dials and is answered on its own streams. Keyed by address, so it holds
// across a restart of the node (whose transport is new).
var testDeaf sync.Map // gossip address -> struct{}

func deafAt(addr string) bool {
	_, ok := testDeaf.Load(addr)
	return ok
}

// cutGossip is memberlist's transport with a switch that cuts the node off
// gossip: while isolated, nothing it sends and nothing sent to it by the
// other test nodes gets through (each side drops what it would send).
// Embedding the Transport interface (not the NetTransport) hides the
// node-aware methods, so memberlist sends everything through these two.
type cutGossip struct {
	memberlist.Transport
	isolated     atomic.Bool
	blockedDials atomic.Int64 // TCP exchanges refused by the cut
	// holed: a black hole around the node: nothing it sends and nothing
	// sent to it arrives, and nothing is refused either: a TCP stream to
	// or from it connects, takes what is written and never answers.
	holed     atomic.Bool
	holeDials atomic.Int64 // streams into the hole
	holeMu    sync.Mutex
	holeConns []net.Conn // the hole's ends of those streams, closed by unhole
	// mute: what the node sends is lost (its datagrams, its dials
	// refused); what others send it, and its answers on their streams,
	// get through.
	mute atomic.Bool
}

func (g *cutGossip) holedTo(to string) bool {
	if g.holed.Load() {
		return true
	}
	v, ok := testGossip.Load(to)
	return ok && v.(*cutGossip).holed.Load()
}

func cuttableGossip(advertise string) func(string, int, *log.Logger) (memberlist.Transport, error) {
	return func(bind string, port int, logger *log.Logger) (memberlist.Transport, error) {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{bind}, BindPort: port, Logger: logger})
		if err != nil {
			return nil, err
		}
		g := &cutGossip{Transport: nt}
		testGossip.Store(advertise, g)
		return g, nil
	}
}

func (g *cutGossip) blocked(to string) bool {
	if g.isolated.Load() {
		return true
	}
	v, ok := testGossip.Load(to)
	return ok && v.(*cutGossip).isolated.Load()
}

func (g *cutGossip) WriteTo(b []byte, addr string) (time.Time, error) {
	if g.blocked(addr) || g.holedTo(addr) || g.mute.Load() || deafAt(addr) {
		return time.Now(), nil
	}
	return g.Transport.WriteTo(b, addr)
}

func (g *cutGossip) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if g.blocked(addr) || g.mute.Load() || deafAt(addr) {
		g.blockedDials.Add(1)
		return nil, errors.New("test: gossip cut")
	}
	if g.holedTo(addr) {
		g.holeDials.Add(1)
		ours, far := net.Pipe()
		g.holeMu.Lock()
		g.holeConns = append(g.holeConns, far)
		g.holeMu.Unlock()
		go func() { // the hole takes every byte until the stream is closed
			defer far.Close()
			_, _ = io.Copy(io.Discard, far)
		}()
		return ours, nil
	}
	return g.Transport.DialTimeout(addr, timeout)
}

// unhole ends the black hole and closes the streams it held, so that
// nothing waits out memberlist's 10 s stream timeout on them (the test's
// nodes stop sooner).
func (g *cutGossip) unhole() {
	g.holed.Store(false)
	g.holeMu.Lock()
	defer g.holeMu.Unlock()
	for _, c := range g.holeConns {
		c.Close()
	}
	g.holeConns = nil
}

func gossipOf(t *testing.T, tn *testNode) *cutGossip {
	t.Helper()
	v, ok := testGossip.Load(tn.gossipAddr)
	if !ok {
		t.Fatalf("no test gossip transport on %s", tn.gossipAddr)
	}
	return v.(*cutGossip)
}

// cutStream is a TCP stream layer that can drop off the network: while cut,
// it refuses to dial, closes every connection it accepts, and the
// connections it had are closed.
type cutStream struct {
	ln  net.Listener
	adv net.Addr

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	// self holds the local addresses of the node's connections to itself:
	// a cut leaves them alone, as a partition leaves loopback alone (a
	// follower standing for election sends itself TimeoutNow).
	self map[string]bool
	// stalled: what the node sends is lost, its connections stay open (a
	// frozen process, a link that drops without a reset).
	stalled atomic.Bool
	// stallAt, when set, stalls the node (as setStalled) once one of its
	// connections to that peer has carried that many bytes.
	stallAt atomic.Pointer[stallTrigger]
	// thaw, while the node is frozen, holds every read and write on its
	// connections until it is closed (see setFrozen); nil: not frozen.
	thaw atomic.Pointer[chan struct{}]
	// connClosed is told when an accepted connection ends, as the TCP
	// transport's watched connections tell the node.
	connClosed func()
	// cutPeers: the Raft addresses this node's links to are cut (one link
	// of a partition; cutLink cuts both ends): dials to them are refused,
	// and the connections dialled to them closed. dialed: where each
	// connection this node dialled goes.
	cutPeers map[string]bool
	dialed   map[net.Conn]string
}

type trackedConn struct {
	net.Conn
	s       *cutStream
	written atomic.Int64
}

// stallTrigger: see cutStream.stallAt.
type stallTrigger struct {
	peer  string // a Raft address
	after int64
}

func (c *trackedConn) Read(p []byte) (int, error) {
	c.s.waitThawed()
	return c.Conn.Read(p)
}

func (c *trackedConn) Write(p []byte) (int, error) {
	c.s.waitThawed()
	if trig := c.s.stallAt.Load(); trig != nil && c.RemoteAddr().String() == trig.peer &&
		c.written.Add(int64(len(p))) > trig.after {
		c.s.stalled.Store(true)
	}
	if c.s.stalled.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *trackedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c.Conn)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

func (s *cutStream) track(c net.Conn) (net.Conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.self[c.RemoteAddr().String()] {
		return c, true
	}
	if s.cut {
		c.Close()
		return nil, false
	}
	s.conns[c] = struct{}{}
	return &trackedConn{Conn: c, s: s}, true
}

func (s *cutStream) Accept() (net.Conn, error) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := s.track(c); ok {
			return &watchedConn{Conn: tc, closed: s.connClosed}, nil
		}
	}
}

func (s *cutStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if string(addr) == s.Addr().String() {
		// Held across the dial: the accept side (track) must find the
		// connection marked.
		s.mu.Lock()
		defer s.mu.Unlock()
		c, err := net.DialTimeout("tcp", string(addr), timeout)
		if err == nil {
			if s.self == nil {
				s.self = map[string]bool{}
			}
			s.self[c.LocalAddr().String()] = true
		}
		return c, err
	}
	s.mu.Lock()
	cut := s.cut || s.cutPeers[string(addr)]
	s.mu.Unlock()
	if cut {
		return nil, errors.New("test: network cut")
	}
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := s.track(c); ok {
		s.mu.Lock()
		if s.dialed == nil {
			s.dialed = map[net.Conn]string{}
		}
		s.dialed[c] = string(addr)
		s.mu.Unlock()
		return tc, nil
	}
	return nil, errors.New("test: network cut")
}

// setPeerCut cuts this node's link to the node at the Raft address peer
// (closing the connections it dialled there) or restores it.
func (s *cutStream) setPeerCut(peer string, cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutPeers == nil {
		s.cutPeers = map[string]bool{}
	}
	s.cutPeers[peer] = cut
	if !cut {
		return
	}
	for c, to := range s.dialed {
		if to == peer {
			c.Close()
			delete(s.dialed, c)
		}
	}
}

// cutLink cuts the Raft link between a and b, both ends, or restores it.
func cutLink(t *testing.T, a, b *testNode, cut bool) {
	t.Helper()
	streamOf(t, a.raftAddr).setPeerCut(b.raftAddr, cut)
	streamOf(t, b.raftAddr).setPeerCut(a.raftAddr, cut)
}

func (s *cutStream) Close() error { return s.ln.Close() }

func (s *cutStream) Addr() net.Addr {
	if s.adv != nil {
		return s.adv
	}
	return s.ln.Addr()
}

// setCut cuts the node off (closing its connections) or restores it.
func (s *cutStream) setCut(cut bool) {
	if cut {
		s.setFrozen(false) // what waits to read or write meets the closed connection
	}
	s.mu.Lock()
	s.cut = cut
	var open []net.Conn
	if cut {
		for c := range s.conns {
			open = append(open, c)
		}
		s.conns = map[net.Conn]struct{}{}
	}
	s.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// setStalled makes what the node sends vanish (or flow again) without
// closing a connection: its peers hear nothing and see no connection end.
func (s *cutStream) setStalled(stalled bool) { s.stalled.Store(stalled) }

// setFrozen holds (or lets go) every read and write on the node's Raft
// connections, as a paused process would: its peers hear nothing and see
// no connection end, and on thaw what was queued flows, in order. Unlike a
// paused process, the node's own timers go on running.
func (s *cutStream) setFrozen(frozen bool) {
	if frozen {
		ch := make(chan struct{})
		s.thaw.CompareAndSwap(nil, &ch)
		return
	}
	if ch := s.thaw.Swap(nil); ch != nil {
		close(*ch)
	}
}

func (s *cutStream) waitThawed() {
	if ch := s.thaw.Load(); ch != nil {
		<-*ch
	}
}

// closeAll closes the connections, as the end of a process would.
func (s *cutStream) closeAll() {
	s.setCut(true)
}

func streamOf(t *testing.T, raftAddr string) *cutStream {
	t.Helper()
	v, ok := testStreams.Load(raftAddr)
	if !ok {
		t.Fatalf("no test transport on %s", raftAddr)
	}
	return v.(*cutStream)
}

// crashForTest stops the node as a crash would: no leadership transfer, no
// gossip leave, connections dropped.
func (n *Node) crashForTest() {
	select {
	case <-n.stop:
		return
	default:
	}
	close(n.stop)
	// As Shutdown: a Raft goroutine held in a failed write of the store
	// is let go once Raft was told to stop (untilRaftShutdown).
	stopping := n.raft.Shutdown()
	close(n.raftStopped)
	stopping.Error()
	n.wg.Wait()
	n.setLeader(false)
	if n.gossip != nil {
		n.gossip.shutdown(false)
	}
	n.trans.Close()
	n.rpcs.Wait()
	n.store.Close()
}

// logSink collects one node run's log lines.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *logSink) contains(sub string) bool { return strings.Contains(s.String(), sub) }

// testNode is one node's identity and data dir, across restarts.
type testNode struct {
	id         int32
	dir        string
	raftAddr   string
	gossipAddr string
	kafkaAddr  string
	adminAddr  string
	join       []string
	expect     int
	tune       func(*Config)
	// references: its partitions name batches in Raft entries
	// (--partition-storage=raft-log) instead of copying them.
	references bool
	// fsmSegmentBytes is the partition segment size (0: 16 KiB, so that
	// small tests roll segments).
	fsmSegmentBytes int64

	logs []*logSink // one per run; the last is the current one
	f    *fsm.FSM
	n    *Node
}

func (tn *testNode) log() *logSink { return tn.logs[len(tn.logs)-1] }

func (tn *testNode) running() bool { return tn.n != nil }

func (tn *testNode) start(t *testing.T) {
	t.Helper()
	if tn.n != nil {
		t.Fatalf("node %d already running", tn.id)
	}
	sink := &logSink{}
	tn.logs = append(tn.logs, sink)
	logger := slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", tn.id)
	if err := tn.open(logger); err != nil {
		t.Fatalf("node %d: %v", tn.id, err)
	}
}

// open opens the node's FSM and starts the node on it, logging to logger
// (start, and the child processes of kill tests, which have no testing.T).
func (tn *testNode) open(logger *slog.Logger) error {
	segment := tn.fsmSegmentBytes
	if segment == 0 {
		segment = 16 << 10
	}
	f, err := fsm.Open(fsm.Options{Dir: tn.dir, SegmentBytes: segment, Logger: logger, References: tn.references})
	if err != nil {
		return fmt.Errorf("open fsm: %w", err)
	}
	cfg := Config{
		NodeID:              tn.id,
		DataDir:             tn.dir,
		RaftAddr:            tn.raftAddr,
		KafkaAddr:           tn.kafkaAddr,
		GossipAddr:          tn.gossipAddr,
		AdminAddr:           tn.adminAddr,
		Join:                tn.join,
		BootstrapExpect:     tn.expect,
		HeartbeatTimeout:    250 * time.Millisecond,
		ElectionTimeout:     250 * time.Millisecond,
		GossipProbeInterval: 200 * time.Millisecond,
		Logger:              logger,
		transport:           cuttableTransport,
		gossipTransport:     cuttableGossip(tn.gossipAddr),
	}
	if tn.tune != nil {
		tn.tune(&cfg)
	}
	n, err := Start(cfg, f)
	if err != nil {
		f.Close()
		return fmt.Errorf("start: %w", err)
	}
	tn.f, tn.n = f, n
	return nil
}

// stop shuts the node down gracefully (a leader hands over leadership).
func (tn *testNode) stop(t *testing.T) {
	t.Helper()
	if tn.n == nil {
		return
	}
	var err error
	if within(t, fmt.Sprintf("node %d's shutdown", tn.id), func() { err = tn.n.Shutdown() }) && err != nil {
		t.Errorf("node %d: shutdown: %v", tn.id, err)
	}
	streamOf(t, tn.raftAddr).closeAll()
	tn.f.Close()
	tn.n, tn.f = nil, nil
}

// crash stops the node as a crash would.
func (tn *testNode) crash(t *testing.T) {
	t.Helper()
	if tn.n == nil {
		return
	}
	streamOf(t, tn.raftAddr).closeAll()
	within(t, fmt.Sprintf("node %d's crash", tn.id), tn.n.crashForTest)
	tn.f.Close()
	tn.n, tn.f = nil, nil
}

// stopLimit bounds a node's shutdown in a test: one that hangs fails the
// test with the stacks of the node's goroutines, where the package's
// timeout would end the whole run with a dump of every test's.
const stopLimit = 2 * time.Minute

// within runs stop and reports whether it returned; if it has not within
// stopLimit, the test fails and stop is left running.
func within(t *testing.T, what string, stop func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() { // ends with stop; left behind only on a failed test
		defer close(done)
		stop()
	}()
	select {
	case <-done:
		return true
	case <-time.After(stopLimit):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var ours []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "kgate/kgate/cluster.") || strings.Contains(g, "hashicorp/raft.") {
				ours = append(ours, g)
			}
		}
		t.Errorf("%s did not end within %v; goroutines in cluster and Raft code:\n%s", what, stopLimit, strings.Join(ours, "\n\n"))
		return false
	}
}

type testCluster struct {
	t     *testing.T
	nodes []*testNode
	used  map[string]bool
	// references: nodes made keep partitions as references to Raft
	// entries (testNode.references).
	references bool
}

// newCluster starts size nodes with bootstrap-expect size, all joining
// through the first node's gossip address.
func newCluster(t *testing.T, size int, tune func(*Config)) *testCluster {
	t.Helper()
	return newClusterOf(t, size, false, tune)
}

// newClusterOf is newCluster, its nodes keeping partitions as references
// to Raft entries when references is set.
func newClusterOf(t *testing.T, size int, references bool, tune func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, used: map[string]bool{}, references: references}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	var seed string
	for i := 1; i <= size; i++ {
		tn := c.newNode(int32(i), nil, size, tune)
		if i == 1 {
			seed = tn.gossipAddr
		}
		tn.join = []string{seed}
	}
	for _, tn := range c.nodes {
		tn.start(t)
	}
	return c
}

// newNode makes (but does not start) a node with fresh addresses and dir.
func (c *testCluster) newNode(id int32, join []string, expect int, tune func(*Config)) *testNode {
	tn := &testNode{
		id:         id,
		dir:        c.t.TempDir(),
		raftAddr:   c.freeAddr(),
		gossipAddr: c.freeAddr(),
		kafkaAddr:  fmt.Sprintf("127.0.0.1:%d", 29090+id),
		adminAddr:  fmt.Sprintf("127.0.0.1:%d", 28080+id),
		join:       join,
		expect:     expect,
		tune:       tune,
		references: c.references,
	}
	c.nodes = append(c.nodes, tn)
	// Registered after TempDir, so it runs before the dir is removed.
	c.t.Cleanup(func() { tn.crash(c.t) })
	return tn
}

// freeAddr finds a loopback port free for both TCP and UDP (gossip uses both).
func (c *testCluster) freeAddr() string {
	c.t.Helper()
	for try := 0; try < 100; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		if c.used[addr] {
			continue
		}
		c.used[addr] = true
		return addr
	}
	c.t.Fatal("no free loopback port")
	return ""
}

func (c *testCluster) dumpLogs() {
	for _, tn := range c.nodes {
		for run, s := range tn.logs {
			out := s.String()
			if len(out) > 12000 && os.Getenv("KGATE_TEST_FULL_LOGS") == "" {
				out = "…" + out[len(out)-12000:]
			}
			c.t.Logf("---- node %d, run %d ----\n%s", tn.id, run+1, out)
		}
	}
}

func (c *testCluster) running() []*testNode {
	var out []*testNode
	for _, tn := range c.nodes {
		if tn.running() {
			out = append(out, tn)
		}
	}
	return out
}

func without(nodes []*testNode, drop ...*testNode) []*testNode {
	var out []*testNode
next:
	for _, tn := range nodes {
		for _, d := range drop {
			if tn == d {
				continue next
			}
		}
		out = append(out, tn)
	}
	return out
}

// eventually polls cond until it returns nil, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// liveNodes is the running nodes as goroutines beside the test see them;
// the test updates it around each stop and start.
type liveNodes struct{ p atomic.Pointer[[]*Node] }

// update stores c's running nodes.
func (l *liveNodes) update(c *testCluster) {
	var ns []*Node
	for _, tn := range c.running() {
		ns = append(ns, tn.n)
	}
	l.p.Store(&ns)
}

// drop stores the nodes but tn's, before tn stops.
func (l *liveNodes) drop(tn *testNode) {
	var kept []*Node
	for _, n := range l.nodes() {
		if n != tn.n {
			kept = append(kept, n)
		}
	}
	l.p.Store(&kept)
}

func (l *liveNodes) nodes() []*Node { return *l.p.Load() }

// servingLeaders lists the nodes among nodes that serve as leader.
func servingLeaders(nodes []*testNode) []*testNode {
	var out []*testNode
	for _, tn := range nodes {
		if tn.running() && tn.n.IsLeader() {
			out = append(out, tn)
		}
	}
	return out
}

// leaderAmong waits until exactly one of nodes serves as leader.
func leaderAmong(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	var l *testNode
	eventually(t, 20*time.Second, "exactly one serving leader", func() error {
		ls := servingLeaders(nodes)
		if len(ls) != 1 {
			return fmt.Errorf("%d serving leaders", len(ls))
		}
		l = ls[0]
		return nil
	})
	return l
}

func anyFollower(t *testing.T, nodes []*testNode, leader *testNode) *testNode {
	t.Helper()
	for _, tn := range nodes {
		if tn != leader && tn.running() {
			return tn
		}
	}
	t.Fatal("no follower")
	return nil
}

// stopsLeading waits until tn, cut off from the others, no longer takes
// itself for the leader.
func stopsLeading(t *testing.T, tn *testNode) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("node %d stops leading", tn.id), func() error {
		if tn.n.RaftLeader() || tn.n.IsLeader() {
			return errors.New("still leader")
		}
		return nil
	})
}

// propose commits cmd through whichever of nodes is the leader, retrying
// through elections. Retried commands must be idempotent.
func propose(t *testing.T, nodes []*testNode, cmd []byte) any {
	t.Helper()
	var res any
	eventually(t, 20*time.Second, "proposal committed", func() error {
		ls := servingLeaders(nodes)
		if len(ls) == 0 {
			return errors.New("no serving leader")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := ls[0].n.Propose(ctx, cmd, false)
		if err != nil {
			return err
		}
		res = r
		return nil
	})
	return res
}

func createTopic(t *testing.T, nodes []*testNode, name string, partitions int32) {
	t.Helper()
	var id [16]byte
	copy(id[:], name)
	res := propose(t, nodes, fsm.Encode(&fsm.CreateTopic{Name: name, ID: id, Partitions: partitions}))
	// A retry after an indeterminate first attempt finds the topic there.
	if cr := res.(*fsm.CodeResult); cr.Code != fsm.ErrNone && cr.Code != fsm.ErrTopicAlreadyExists {
		t.Fatalf("create topic %s: code %d", name, cr.Code)
	}
}

// fakeBatch is shaped like a magic-2 record batch: the FSM reads only the
// 61-byte header (length, magic, last offset delta, max timestamp, count).
func fakeBatch(records int32, maxTs int64, payload []byte) []byte {
	b := make([]byte, 61+len(payload))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(records-1))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTs))
	binary.BigEndian.PutUint32(b[57:], uint32(records))
	copy(b[61:], payload)
	return b
}

// producer appends batches of two records with an idempotent producer id,
// so a retried append is recognised as a duplicate rather than written twice.
type producer struct {
	topic     string
	partition int32
	id        int64
	seq       int32
	now       int64
}

func newProducer(topic string, id int64) *producer {
	return &producer{topic: topic, id: id, now: 1_700_000_000_000}
}

// produce appends n batches and returns the base offset of each.
func (p *producer) produce(t *testing.T, nodes []*testNode, n, payloadBytes int) []int64 {
	t.Helper()
	var bases []int64
	for i := 0; i < n; i++ {
		p.now++
		word := []byte(fmt.Sprintf("%s/%d/%d;", p.topic, p.id, p.seq))
		payload := bytes.Repeat(word, payloadBytes/len(word)+1)[:payloadBytes]
		cmd := fsm.EncodeAppend(&fsm.Append{NowMs: p.now, Batches: []fsm.Batch{{
			Topic: p.topic, Partition: p.partition, Data: fakeBatch(2, p.now, payload),
			LastOffsetDelta: 1, MaxTimestamp: p.now, ProducerID: p.id, BaseSequence: p.seq,
		}}})
		res := propose(t, nodes, cmd).(*fsm.AppendResults)
		if r := res.Results[0]; r.Code != fsm.ErrNone {
			t.Fatalf("append to %s/%d: code %d", p.topic, p.partition, r.Code)
		}
		bases = append(bases, res.Results[0].BaseOffset)
		p.seq += 2
	}
	return bases
}

// commitOffset stores a standalone consumer's offset (generation -1, no member).
func commitOffset(t *testing.T, nodes []*testNode, group, topic string, partition int32, offset int64) {
	t.Helper()
	res := propose(t, nodes, fsm.Encode(&fsm.CommitOffsets{Group: group, Generation: -1, NowMs: 1_700_000_000_000,
		Offsets: []fsm.OffsetCommit{{Topic: topic, Partition: partition, Offset: offset, LeaderEpoch: -1}}}))
	gr := res.(*fsm.GroupResult)
	if gr.Code != fsm.ErrNone || len(gr.Codes) != 1 || gr.Codes[0] != fsm.ErrNone {
		t.Fatalf("commit offset: %+v", gr)
	}
}

// nodeState is what a client can observe of a node's replicated data.
type nodeState struct {
	ClusterID string
	Topics    []string
	Logs      map[string][2]int64 // "topic/partition" -> start, next
	Offsets   map[string]map[fsm.TopicPartition]fsm.Offset
}

func stateOf(tn *testNode, groups ...string) nodeState {
	s := nodeState{ClusterID: tn.f.ClusterID(), Logs: map[string][2]int64{}, Offsets: map[string]map[fsm.TopicPartition]fsm.Offset{}}
	for _, ti := range tn.f.Topics() {
		s.Topics = append(s.Topics, ti.Name)
		for p := int32(0); p < ti.Partitions; p++ {
			if part := tn.f.Partition(ti.Name, p); part != nil {
				start, next := part.Log.Bounds()
				s.Logs[fmt.Sprintf("%s/%d", ti.Name, p)] = [2]int64{start, next}
			}
		}
	}
	for _, g := range groups {
		if o, ok := tn.f.CommittedOffsets(g); ok {
			s.Offsets[g] = o
		}
	}
	return s
}

// converged waits until every node shows the same state as want.
func converged(t *testing.T, nodes []*testNode, want nodeState, groups ...string) {
	t.Helper()
	for _, tn := range nodes {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d has the cluster's data", tn.id), func() error {
			if got := stateOf(tn, groups...); !reflect.DeepEqual(got, want) {
				return fmt.Errorf("has %+v, want %+v", got, want)
			}
			return nil
		})
	}
}

// convergedOnLeader waits until every node shows the state of the serving
// leader among them. After leadership moved, the node that led a moment
// ago may not have applied the last writes, made through its successor;
// the serving leader has.
func convergedOnLeader(t *testing.T, nodes []*testNode, groups ...string) {
	t.Helper()
	eventually(t, 20*time.Second, "every node has the serving leader's data", func() error {
		ls := servingLeaders(nodes)
		if len(ls) != 1 {
			return fmt.Errorf("%d serving leaders", len(ls))
		}
		want := stateOf(ls[0], groups...)
		for _, tn := range nodes {
			if got := stateOf(tn, groups...); !reflect.DeepEqual(got, want) {
				return fmt.Errorf("node %d has %+v, leader node %d %+v", tn.id, got, ls[0].id, want)
			}
		}
		return nil
	})
}

// readAll reads a partition's batches from its start through Log.Read.
func readAll(t *testing.T, tn *testNode, topic string, partition int32) [][]byte {
	t.Helper()
	p := tn.f.Partition(topic, partition)
	if p == nil {
		t.Fatalf("node %d: no partition %s/%d", tn.id, topic, partition)
	}
	var out [][]byte
	off := p.Log.Start()
	for off < p.Log.Next() {
		buf, err := p.Log.Read(off, 64<<10)
		if err != nil {
			t.Fatalf("node %d: read %s/%d at %d: %v", tn.id, topic, partition, off, err)
		}
		if len(buf) == 0 {
			t.Fatalf("node %d: read %s/%d at %d returned nothing before next %d", tn.id, topic, partition, off, p.Log.Next())
		}
		for len(buf) > 0 {
			if len(buf) < 61 {
				t.Fatalf("node %d: torn batch at %d", tn.id, off)
			}
			size := int(binary.BigEndian.Uint32(buf[8:12])) + 12
			if size > len(buf) {
				t.Fatalf("node %d: batch at %d runs past the read", tn.id, off)
			}
			out = append(out, buf[:size])
			off = int64(binary.BigEndian.Uint64(buf[0:8])) + int64(int32(binary.BigEndian.Uint32(buf[23:27]))) + 1
			buf = buf[size:]
		}
	}
	return out
}

func voterIDs(tn *testNode) []int32 {
	var ids []int32
	for _, v := range tn.n.Voters() {
		ids = append(ids, v.ID)
	}
	return ids
}

// votersAre waits until every node reports exactly the voters of want.
func votersAre(t *testing.T, nodes []*testNode, want []*testNode) {
	t.Helper()
	var wantVoters []Voter
	for _, w := range want {
		wantVoters = append(wantVoters, Voter{ID: w.id, Address: w.raftAddr})
	}
	sort.Slice(wantVoters, func(i, j int) bool { return wantVoters[i].ID < wantVoters[j].ID })
	for _, tn := range nodes {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d reports the voters", tn.id), func() error {
			if got := tn.n.Voters(); !reflect.DeepEqual(got, wantVoters) {
				return fmt.Errorf("voters %+v, want %+v", got, wantVoters)
			}
			return nil
		})
	}
}

// brokersAre waits until every node lists exactly want as brokers.
func brokersAre(t *testing.T, nodes []*testNode, want []*testNode) {
	t.Helper()
	var wantInfo []NodeInfo
	for _, w := range want {
		wantInfo = append(wantInfo, NodeInfo{ID: w.id, KafkaAddr: w.kafkaAddr, RaftAddr: w.raftAddr})
	}
	sort.Slice(wantInfo, func(i, j int) bool { return wantInfo[i].ID < wantInfo[j].ID })
	for _, tn := range nodes {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d lists the brokers", tn.id), func() error {
			if got := tn.n.Brokers(); !reflect.DeepEqual(got, wantInfo) {
				return fmt.Errorf("brokers %+v, want %+v", got, wantInfo)
			}
			return nil
		})
	}
}

func readyAll(t *testing.T, nodes []*testNode) {
	t.Helper()
	for _, tn := range nodes {
		eventually(t, 20*time.Second, fmt.Sprintf("node %d ready", tn.id), func() error {
			if !tn.n.Ready() {
				return errors.New("not ready")
			}
			return nil
		})
	}
}

func memberState(tn *testNode, id int32) (MemberInfo, bool) {
	for _, m := range tn.n.Members() {
		if m.ID == id {
			return m, true
		}
	}
	return MemberInfo{}, false
}
