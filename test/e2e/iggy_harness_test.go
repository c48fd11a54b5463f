package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

// The Iggy tier: with KGATE_E2E_BACKEND=iggy, startKgate gives a
// three-node kgate cluster run with --backend iggy, all nodes sharing one
// Iggy server, instead of one embedded node. The client scenarios and the
// consumer-group tests then run unchanged against it (`make test` runs
// them a second time this way):
//
//   - bootstrap() is node 1; clients find the others through Metadata, and
//     partition leadership is spread over the three;
//   - restart() restarts the nodes one after another (SIGTERM, start, ready);
//   - kill9() / start() kill and restart node 1, whose partitions move to
//     the two others meanwhile.
//
// The Iggy server is the in-process test double (gateway/iggy/iggytest),
// speaking KGATE_E2E_IGGY_DIALECT (current, the default, or legacy). When
// IGGY_SERVER_BIN names a real iggy-server binary, it is started instead
// (each test its own, on a free port and a fresh data directory) with the
// root credentials of IGGY_ROOT_USERNAME / IGGY_ROOT_PASSWORD (default
// iggy/iggy); KGATE_E2E_IGGY_DIALECT (current, legacy or auto) is then
// kgate's --iggy-protocol, and KGATE_E2E_IGGY_EXPECT, when set, the dialect
// the server must turn out to speak (scripts/iggy-real-tier.sh sets both).
const (
	envBackend      = "KGATE_E2E_BACKEND"
	envIggyDialect  = "KGATE_E2E_IGGY_DIALECT"
	envIggyExpect   = "KGATE_E2E_IGGY_EXPECT"
	envIggyServer   = iggytest.EnvServerBin
	iggyPollForTest = "50ms"
)

func iggyMode() bool { return os.Getenv(envBackend) == "iggy" }

var tierOnce sync.Once

// iggyBackend is the Iggy server of one test.
type iggyBackend struct {
	addr     string
	user     string
	password string
	dialect  iggy.Dialect
	protocol string               // kgate's --iggy-protocol
	double   *iggytest.Server     // nil for a real server
	real     *iggytest.RealServer // nil for the double
}

func startIggyBackend(t *testing.T) *iggyBackend {
	t.Helper()
	if bin := os.Getenv(envIggyServer); bin != "" {
		return startRealIggy(t, bin)
	}
	tierOnce.Do(func() {
		fmt.Fprintf(os.Stderr, "e2e: real-server tier SKIPPED (%s not set); the Iggy tier runs against the Iggy test double\n", envIggyServer)
	})
	d := iggy.Current
	switch os.Getenv(envIggyDialect) {
	case "", "current":
	case "legacy":
		d = iggy.Legacy
	default:
		t.Fatalf("%s=%q: want current or legacy", envIggyDialect, os.Getenv(envIggyDialect))
	}
	srv, err := iggytest.Start(iggytest.Config{Dialect: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Logf("Iggy test double (%s dialect) on %s", d, srv.Addr())
	return &iggyBackend{addr: srv.Addr(), user: "iggy", password: "iggy", dialect: d, protocol: "auto", double: srv}
}

func startRealIggy(t *testing.T, bin string) *iggyBackend {
	t.Helper()
	protocol := os.Getenv(envIggyDialect)
	opts := iggy.Options{}
	switch protocol {
	case "", "auto":
		protocol = "auto"
	case "current":
		opts.Dialect = iggy.Current
	case "legacy":
		opts.Dialect = iggy.Legacy
	default:
		t.Fatalf("%s=%q: want current, legacy or auto", envIggyDialect, protocol)
	}
	// Iggy acknowledges messages it still holds in memory until 1,024 of
	// them or 1 MiB have gathered; a kill -9 loses those. The tier kills
	// the server, so it asks for every batch to be written before the
	// answer (a server setting before 0.9, and kgate's
	// --iggy-messages-required-to-save for the topics it creates).
	r, err := iggytest.StartRealDurable(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("iggy-server log, last lines:\n%s", r.LogTail(40))
		}
		r.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts.Addr, opts.Username, opts.Password = r.Addr(), r.Username, r.Password
	conn, err := iggy.Dial(ctx, opts)
	if err != nil {
		t.Fatalf("iggy-server (--iggy-protocol %s): %v", protocol, err)
	}
	conn.Close()
	if want := os.Getenv(envIggyExpect); want != "" && conn.Dialect().String() != want {
		t.Fatalf("iggy-server %s speaks the %s dialect, %s=%s", bin, conn.Dialect(), envIggyExpect, want)
	}
	tierOnce.Do(func() {
		fmt.Fprintf(os.Stderr, "e2e: Iggy tier against the real server %s (%s dialect, --iggy-protocol %s)\n", bin, conn.Dialect(), protocol)
	})
	return &iggyBackend{addr: r.Addr(), user: r.Username, password: r.Password, dialect: conn.Dialect(),
		protocol: protocol, real: r}
}

// kill stops the Iggy server as a crash would (the double just closes).
func (ib *iggyBackend) kill(t *testing.T) {
	t.Helper()
	if ib.real != nil {
		ib.real.Kill()
		return
	}
	if err := ib.double.Close(); err != nil {
		t.Fatal(err)
	}
}

// restart starts the Iggy server again on the same address and data; the
// double keeps its messages in memory across a restart.
func (ib *iggyBackend) restart(t *testing.T) {
	t.Helper()
	var err error
	if ib.real != nil {
		err = ib.real.Restart(false)
	} else {
		err = ib.double.Restart()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// iggyCluster is the three kgate nodes of the Iggy tier.
type iggyCluster struct {
	backend *iggyBackend
	c       *kgateCluster
}

// startIggyCluster starts the Iggy server and three kgate nodes on it.
func startIggyCluster(t *testing.T) *kgateServer {
	t.Helper()
	ib := startIggyBackend(t)
	c := &kgateCluster{t: t, bin: kgateBinary(t), dir: t.TempDir(), http: &http.Client{Timeout: 2 * time.Second},
		used: map[string]bool{}}
	for range clusterSize {
		c.newNode()
	}
	seeds := c.gossipAddrs()
	for _, n := range c.nodes {
		n.args = append([]string{"--bootstrap-expect", strconv.Itoa(clusterSize), "--join", strings.Join(seeds, ",")},
			ib.nodeArgs()...)
	}
	t.Cleanup(c.cleanup)
	for _, n := range c.nodes {
		n.start()
	}
	leader := c.waitFormed(c.ids()...)
	t.Logf("kgate cluster of %d on Iggy %s formed, Raft leader node %d", clusterSize, ib.addr, leader)
	c.awaitFeatureLevel()
	ic := &iggyCluster{backend: ib, c: c}
	return &kgateServer{t: t, iggy: ic, addrs: map[string]string{"kafka-addr": c.node(1).kafka()}}
}

// nodeArgs are the flags that put a kgate node on this Iggy server.
func (ib *iggyBackend) nodeArgs() []string {
	args := []string{"--backend", "iggy", "--iggy-addr", ib.addr, "--iggy-user", ib.user, "--iggy-password", ib.password,
		"--iggy-protocol", ib.protocol, "--iggy-poll-interval", iggyPollForTest}
	if ib.real != nil {
		args = append(args, "--iggy-messages-required-to-save", "1")
	}
	return args
}

func (ic *iggyCluster) waitReady(n *clusterNode) {
	t := ic.c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if !n.running() {
			t.Fatalf("node %d exited (%s)\nlog tail:\n%s", n.id, n.exitStatus(), tailFile(n.logPath, 40))
		}
		if err := ic.c.ready(ctx, n); err == nil {
			return
		} else if ctx.Err() != nil {
			t.Fatalf("node %d not ready within %v: %v", n.id, startTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rollingRestart restarts every node in turn.
func (ic *iggyCluster) rollingRestart() {
	for _, n := range ic.c.nodes {
		n.stop()
		n.start()
		ic.waitReady(n)
	}
	ic.c.waitFormed(ic.c.ids()...)
}
