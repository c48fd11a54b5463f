package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestClusterListeners: three nodes, each with a plaintext INTERNAL
// listener (--kafka-addr) and a SASL_SSL EXTERNAL one (--listeners). A
// client on either listener, asking any node, is given every node's
// address on that listener (Metadata, DescribeCluster, FindCoordinator)
// and produces and consumes through it; INTERNAL asks for no
// authentication and refuses a SASL handshake, EXTERNAL requires it.
func TestClusterListeners(t *testing.T) {
	bin := kgateBinary(t)
	work := t.TempDir()
	certs := filepath.Join(work, "certs")
	if out, err := runTool(work, bin, "certs", "-dir", certs, "-names", "node-1,node-2,node-3"); err != nil {
		t.Fatalf("kgate certs: %v\n%s", err, out)
	}
	users := writeFile(t, filepath.Join(work, "users"), "alice:alice-secret\n")
	external := map[int32]string{}
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			external[n.id] = c.freeAddr()
			n.args = append(n.args, "--kafka-listener-name", "INTERNAL",
				"--listeners", "EXTERNAL://"+external[n.id],
				"--listener-security-protocol-map", "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
				"--kafka-tls-cert", filepath.Join(certs, fmt.Sprintf("node-%d.pem", n.id)),
				"--kafka-tls-key", filepath.Join(certs, fmt.Sprintf("node-%d-key.pem", n.id)),
				"--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", users)
		}
	})
	internal := c.kafkaAddrs()
	pool := caPool(certs)
	secure := []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}
	leader := c.leader()

	for _, l := range []struct {
		name  string
		addrs map[int32]string
		opts  []kgo.Opt
	}{{"INTERNAL", internal, nil}, {"EXTERNAL", external, secure}} {
		for _, via := range c.nodes {
			step(t, fmt.Sprintf("%s listener of node %d (leader %d) names every node by its %s address", l.name, via.id, leader, l.name), 30*time.Second,
				func(ctx context.Context) error { return checkListenerAddrs(ctx, l.addrs[via.id], l.addrs, l.opts) })
		}
		step(t, fmt.Sprintf("produce and consume with a group through %s only", l.name), time.Minute, func(ctx context.Context) error {
			return groupRoundTrip(ctx, l.addrs[c.nodes[0].id], "listener-"+l.name, l.opts)
		})
	}

	step(t, "EXTERNAL refuses a client that does not authenticate", 30*time.Second, func(ctx context.Context) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(external[1]), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}))
		if err != nil {
			return err
		}
		defer cl.Close()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err == nil {
			return fmt.Errorf("Metadata without SASL answered")
		}
		return nil
	})
	step(t, "INTERNAL answers a SASL handshake with ILLEGAL_SASL_STATE", 30*time.Second, func(ctx context.Context) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(internal[1]))
		if err != nil {
			return err
		}
		defer cl.Close()
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, "PLAIN"
		resp, err := req.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			return err
		}
		if !errorIs(resp.ErrorCode, kerr.IllegalSaslState) {
			return fmt.Errorf("SaslHandshake on a plaintext listener: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		return nil
	})
}

func errorIs(code int16, want *kerr.Error) bool { return kerr.ErrorForCode(code) == want }

// checkListenerAddrs asks the node at seed for Metadata, DescribeCluster
// and FindCoordinator and checks that every node appears at want[id].
func checkListenerAddrs(ctx context.Context, seed string, want map[int32]string, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// The seed broker, whatever its node id: franz-go numbers seeds from
	// math.MinInt32.
	seedBroker := cl.Broker(-2147483648)
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, seedBroker)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	got := map[int32]string{}
	for _, b := range md.Brokers {
		got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if err := sameAddrs("Metadata", got, want); err != nil {
		return err
	}
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, seedBroker)
	if err != nil {
		return fmt.Errorf("describe cluster: %w", err)
	}
	got = map[int32]string{}
	for _, b := range dc.Brokers {
		got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if err := sameAddrs("DescribeCluster", got, want); err != nil {
		return err
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"listener-group"}
	fr, err := fc.RequestWith(ctx, seedBroker)
	if err != nil {
		return fmt.Errorf("find coordinator: %w", err)
	}
	co := fr.Coordinators[0]
	if err := kerr.ErrorForCode(co.ErrorCode); err != nil {
		return fmt.Errorf("find coordinator: %w", err)
	}
	if addr := net.JoinHostPort(co.Host, strconv.Itoa(int(co.Port))); addr != want[co.NodeID] {
		return fmt.Errorf("FindCoordinator names node %d at %s, want %s", co.NodeID, addr, want[co.NodeID])
	}
	return nil
}

func sameAddrs(what string, got, want map[int32]string) error {
	ids := make([]int32, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if got[id] != want[id] {
			return fmt.Errorf("%s names node %d at %q, want %q (all: %v)", what, id, got[id], want[id], got)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%s lists %v, want %v", what, got, want)
	}
	return nil
}

// groupRoundTrip produces ten records and reads them back in a consumer
// group, with clients whose only bootstrap address is seed.
func groupRoundTrip(ctx context.Context, seed, topic string, opts []kgo.Opt) error {
	topic = fmt.Sprintf("%s-%d", topic, time.Now().UnixNano()%1e9)
	base := append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.AllowAutoTopicCreation()}, opts...)
	p, err := kgo.NewClient(base...)
	if err != nil {
		return err
	}
	defer p.Close()
	for i := range 10 {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	g, err := kgo.NewClient(append(base, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(topic+"-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer g.Close()
	seen := 0
	for seen < 10 {
		fs := g.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %d of 10 records: %w", seen, err)
		}
		seen += fs.NumRecords()
	}
	return g.CommitUncommittedOffsets(ctx)
}
