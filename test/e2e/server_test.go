package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// envBin names a prebuilt kgate binary; without it the harness runs
	// `go build -o bin/kgate ./cmd/kgate` in the repo root (a no-op when the
	// binary is up to date).
	envBin = "KGATE_BIN"
	// envExternal points the client scenarios at an already running broker
	// (for example scripts/kafka-broker.sh on 127.0.0.1:19092) instead of
	// starting kgate. Restarts are then skipped. For developing the client
	// programs only.
	envExternal = "KGATE_E2E_BOOTSTRAP"

	startTimeout = 30 * time.Second
	stopTimeout  = 20 * time.Second
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// repoRoot is the directory holding go.mod, found upwards from the package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("cannot find the repository root (go.mod) above the working directory")
		}
		dir = parent
	}
}

// kgateBinary builds (once per test binary) or locates bin/kgate.
func kgateBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", envBin, p, err)
		}
		return p
	}
	root := repoRoot(t)
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		buildPath = filepath.Join(root, "bin", "kgate")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", buildPath, "./cmd/kgate")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -o bin/kgate ./cmd/kgate: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// kgateServer is one kgate node run as a child process. Its ports and data
// directory stay the same across restarts.
type kgateServer struct {
	t       *testing.T
	bin     string
	dataDir string
	logPath string
	addrs   map[string]string // flag name -> host:port
	// external is set when the scenarios run against envExternal.
	external bool
	// iggy is set in the Iggy tier (envBackend=iggy): a three-node cluster
	// on --backend iggy stands in for the single node; see
	// iggy_harness_test.go.
	iggy *iggyCluster

	cmd      *exec.Cmd
	stopping bool          // the harness signalled cmd
	exited   chan struct{} // closed when cmd has exited
	runErr   error         // cmd.Wait's result, valid after exited is closed
	exitedAt time.Time     // valid after exited is closed
}

// startKgate starts kgate (or uses the broker named by envExternal) and
// stops it when the test ends.
func startKgate(t *testing.T) *kgateServer {
	t.Helper()
	if ext := os.Getenv(envExternal); ext != "" {
		t.Logf("using external broker %s (%s is set): restarts are skipped", ext, envExternal)
		return &kgateServer{t: t, external: true, addrs: map[string]string{"kafka-addr": ext}}
	}
	if iggyMode() {
		return startIggyCluster(t)
	}
	dir := t.TempDir()
	s := &kgateServer{
		t:       t,
		bin:     kgateBinary(t),
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "kgate.log"),
		addrs:   map[string]string{},
	}
	for _, flag := range []string{"kafka-addr", "raft-addr", "gossip-addr", "admin-addr"} {
		s.addrs[flag] = freeAddr(t)
	}
	t.Cleanup(func() {
		if s.running() {
			s.kill9()
		} else if s.cmd != nil && !s.stopping {
			t.Errorf("kgate pid %d exited on its own at %s (%s) without a signal from the harness",
				s.cmd.Process.Pid, s.exitedAt.Format("15:04:05.000"), s.exitStatus())
		}
		if t.Failed() {
			t.Logf("kgate log (%s), last lines:\n%s", s.logPath, tailFile(s.logPath, 60))
		}
	})
	s.start()
	return s
}

func (s *kgateServer) bootstrap() string { return s.addrs["kafka-addr"] }

// coordinator is the node id FindCoordinator names: the only node, or the
// Raft leader of the Iggy tier's cluster.
func (s *kgateServer) coordinator() int {
	if s.iggy != nil {
		return int(s.iggy.c.leader())
	}
	return 1
}

func (s *kgateServer) running() bool {
	if s.iggy != nil {
		return s.iggy.c.node(1).running()
	}
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

func (s *kgateServer) start() {
	s.t.Helper()
	if s.external {
		return
	}
	if s.iggy != nil {
		n := s.iggy.c.node(1)
		n.start()
		s.iggy.waitReady(n)
		return
	}
	if s.running() {
		s.t.Fatal("kgate is already running")
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	args := []string{"serve", "--node-id", "1", "--data-dir", s.dataDir}
	for _, flag := range []string{"kafka-addr", "raft-addr", "gossip-addr", "admin-addr"} {
		args = append(args, "--"+flag, s.addrs[flag])
	}
	fmt.Fprintf(logf, "=== %s harness: %s %s\n", time.Now().Format(time.RFC3339Nano), s.bin, strings.Join(args, " "))
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting kgate: %v", err)
	}
	s.cmd = cmd
	s.stopping = false
	exited := make(chan struct{})
	s.exited = exited
	go func() {
		s.runErr = cmd.Wait()
		s.exitedAt = time.Now()
		close(exited)
	}()
	if err := s.waitReady(); err != nil {
		s.t.Fatalf("kgate did not become ready: %v\nlog tail:\n%s", err, tailFile(s.logPath, 40))
	}
}

// waitReady waits until a Metadata request succeeds and names node 1 at the
// Kafka address.
func (s *kgateServer) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var last error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("kgate exited during startup (%s)", s.exitStatus())
		default:
		}
		last = s.metadataOnce(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no successful Metadata within %v: %v", startTimeout, last)
		case <-s.exited:
			return fmt.Errorf("kgate exited during startup (%s)", s.exitStatus())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *kgateServer) metadataOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrap()), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	want := s.bootstrap()
	var seen []string
	for _, b := range resp.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if b.NodeID == 1 && addr == want {
			return nil
		}
		seen = append(seen, fmt.Sprintf("%d@%s", b.NodeID, addr))
	}
	return fmt.Errorf("metadata brokers %v do not include node 1 at %s", seen, want)
}

// stop sends SIGTERM and expects a clean exit (status 0) within stopTimeout.
func (s *kgateServer) stop() {
	s.t.Helper()
	if s.iggy != nil {
		for _, n := range s.iggy.c.nodes {
			n.stop()
		}
		return
	}
	if s.external || !s.running() {
		return
	}
	s.stopping = true
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.kill9()
		s.t.Fatalf("kgate did not exit within %v of SIGTERM (killed it)", stopTimeout)
	}
	if s.runErr != nil {
		s.t.Errorf("kgate exited uncleanly after SIGTERM: %v\nlog tail:\n%s", s.runErr, tailFile(s.logPath, 40))
	}
}

// kill9 sends SIGKILL and waits for the process to go.
func (s *kgateServer) kill9() {
	if s.iggy != nil {
		s.iggy.c.node(1).kill9()
		return
	}
	if s.external || !s.running() {
		return
	}
	s.stopping = true
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.t.Errorf("kgate pid %d still running %v after SIGKILL", s.cmd.Process.Pid, stopTimeout)
	}
}

// exitStatus describes how the exited process ended.
func (s *kgateServer) exitStatus() string {
	if s.runErr != nil {
		return s.runErr.Error()
	}
	return "exit status 0"
}

// restart stops kgate with SIGTERM and starts it again on the same data.
func (s *kgateServer) restart() {
	s.t.Helper()
	if s.external {
		s.t.Log("external broker: restart skipped")
		return
	}
	begin := time.Now()
	if s.iggy != nil {
		s.iggy.rollingRestart()
		s.t.Logf("restarted the three kgate nodes one by one (SIGTERM) in %v", time.Since(begin).Round(time.Millisecond))
		return
	}
	s.stop()
	s.start()
	s.t.Logf("restarted kgate (SIGTERM) in %v", time.Since(begin).Round(time.Millisecond))
}

// handedOut holds every address freeAddr returned in this test process: a
// port just closed can be handed out again, and a CI run got one port for
// a node's Raft and gossip addresses (gossip's bind then failed).
var handedOut sync.Map

// freeAddr returns a loopback address whose port is free for TCP and UDP
// (memberlist gossip uses both), never one it returned before.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		if _, again := handedOut.LoadOrStore(addr, true); again {
			continue
		}
		return addr
	}
	t.Fatal("no free TCP+UDP port on 127.0.0.1")
	return ""
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		lines = append(lines, fmt.Sprintf("(reading log: %v)", err))
	}
	return strings.Join(lines, "\n")
}
