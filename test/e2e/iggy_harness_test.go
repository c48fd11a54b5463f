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
// on a fresh data directory with the root credentials of
// IGGY_ROOT_USERNAME / IGGY_ROOT_PASSWORD (default iggy/iggy).
const (
	envBackend      = "KGATE_E2E_BACKEND"
	envIggyDialect  = "KGATE_E2E_IGGY_DIALECT"
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
	double   *iggytest.Server // nil for a real server
}

func startIggyBackend(t *testing.T) *iggyBackend {
	t.Helper()
	if bin := os.Getenv(envIggyServer); bin != "" {
		tierOnce.Do(func() { fmt.Fprintf(os.Stderr, "e2e: Iggy tier against the real server %s\n", bin) })
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
	return &iggyBackend{addr: srv.Addr(), user: "iggy", password: "iggy", dialect: d, double: srv}
}

func startRealIggy(t *testing.T, bin string) *iggyBackend {
	t.Helper()
	r, err := iggytest.StartReal(bin, t.TempDir())
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
	conn, err := iggy.Dial(ctx, iggy.Options{Addr: r.Addr(), Username: r.Username, Password: r.Password})
	if err != nil {
		t.Fatalf("iggy-server: %v", err)
	}
	conn.Close()
	return &iggyBackend{addr: r.Addr(), user: r.Username, password: r.Password, dialect: conn.Dialect()}
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
		n.args = []string{"--bootstrap-expect", strconv.Itoa(clusterSize), "--join", strings.Join(seeds, ","),
			"--backend", "iggy", "--iggy-addr", ib.addr, "--iggy-user", ib.user, "--iggy-password", ib.password,
			"--iggy-poll-interval", iggyPollForTest}
	}
	t.Cleanup(c.cleanup)
	for _, n := range c.nodes {
		n.start()
	}
	leader := c.waitFormed(c.ids()...)
	t.Logf("kgate cluster of %d on Iggy %s formed, Raft leader node %d", clusterSize, ib.addr, leader)
	ic := &iggyCluster{backend: ib, c: c}
	return &kgateServer{t: t, iggy: ic, addrs: map[string]string{"kafka-addr": c.node(1).kafka()}}
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
