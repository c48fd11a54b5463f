package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

// TestBindAllAdvertise runs three nodes whose Kafka, Raft, gossip and admin
// listeners all bind 0.0.0.0, each advertising its own loopback address
// 127.0.0.N (as containers advertise their pod or service address), with
// JSON logs. The cluster forms over the advertised addresses, clients are
// sent to them, and every line each node writes to stderr is one JSON
// object, Raft's and gossip's lines included.
func TestBindAllAdvertise(t *testing.T) {
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			n.bind = map[string]string{}
			host := fmt.Sprintf("127.0.0.%d", n.id)
			for _, f := range clusterAddrFlags {
				_, port, _ := net.SplitHostPort(n.addrs[f])
				n.bind[f] = "0.0.0.0:" + port
				n.addrs[f] = net.JoinHostPort(host, port)
			}
			n.args = append(n.args, "--log-format", "json",
				"--advertise-kafka-addr", n.addrs["kafka-addr"],
				"--advertise-raft-addr", n.addrs["raft-addr"],
				"--advertise-gossip-addr", n.addrs["gossip-addr"])
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	v, err := c.view(ctx, c.node(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		m, ok := v.member(n.id)
		if !ok {
			t.Fatalf("node %d missing from /v1/cluster: %+v", n.id, v)
		}
		if m.RaftAddr != n.addrs["raft-addr"] || m.KafkaAddr != n.addrs["kafka-addr"] || !m.Voter {
			t.Errorf("node %d: raft %s kafka %s voter %v, want the advertised %s and %s", n.id, m.RaftAddr, m.KafkaAddr, m.Voter,
				n.addrs["raft-addr"], n.addrs["kafka-addr"])
		}
		if host, _, _ := net.SplitHostPort(m.GossipAddr); host != fmt.Sprintf("127.0.0.%d", n.id) {
			t.Errorf("node %d gossips as %s, want 127.0.0.%d", n.id, m.GossipAddr, n.id)
		}
	}

	// A client bootstrapped on one node is sent to the advertised leader.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.node(1).kafka()), kgo.DefaultProduceTopic("bind-all"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// Kill the leader: the survivors log Raft's complaints, in JSON.
	old := c.leader()
	c.node(old).kill9()
	if nl := c.leader(); nl == old {
		t.Fatalf("node %d still leads after kill -9", old)
	}

	parts := map[string]int{}
	for _, n := range c.nodes {
		f, err := os.Open(n.logPath)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			// The harness's own start line, and the ready banner kgate
			// prints on stdout (the harness sends both streams to one file).
			if strings.HasPrefix(line, "=== ") || strings.HasPrefix(line, "kgate node ") {
				continue
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("node %d: a log line that is not JSON: %q", n.id, line)
				continue
			}
			if rec["level"] == nil || rec["msg"] == nil || rec["time"] == nil {
				t.Errorf("node %d: JSON log line without time, level or msg: %q", n.id, line)
			}
			if p, ok := rec["part"].(string); ok {
				parts[p]++
			}
		}
		f.Close()
	}
	if parts["raft"] == 0 {
		t.Errorf("no Raft line in the logs (an election and a killed leader log Raft warnings): %v", parts)
	}
	t.Logf("JSON log lines by part: %v", parts)
}

// TestReadyzIggy: with --backend iggy, /readyz is 503 while Iggy cannot be
// reached, naming Iggy and the error in its body, and 200 again once Iggy
// is back, without a restart of kgate.
func TestReadyzIggy(t *testing.T) {
	double, err := iggytest.Start(iggytest.Config{Dialect: iggy.Current})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { double.Close() })
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			n.args = append(n.args, "--backend", "iggy", "--iggy-addr", double.Addr(), "--iggy-timeout", "500ms")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := c.node(1)
	readyz := func() (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addrs["admin-addr"]+"/readyz", nil)
		resp, err := c.http.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	waitFor(t, ctx, "ready with Iggy up", func() error {
		code, body, err := readyz()
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d %s", code, body)
		}
		return err
	})
	if err := double.Close(); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, ctx, "not ready with Iggy down", func() error {
		code, b, err := readyz()
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable {
			return fmt.Errorf("%d %s", code, b)
		}
		body = b
		return nil
	})
	var v struct{ Status, Reason string }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	if v.Status != "not ready" || !strings.Contains(v.Reason, "iggy at "+double.Addr()+": ") {
		t.Fatalf("/readyz body %q: want the status and a reason naming Iggy and its address", body)
	}
	t.Logf("/readyz with Iggy down: %s", strings.TrimSpace(body))
	if err := double.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "ready again with Iggy back", func() error {
		code, b, err := readyz()
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d %s", code, b)
		}
		return err
	})
}

// waitFor polls check every 100 ms until it returns nil or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, check func() error) {
	t.Helper()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
