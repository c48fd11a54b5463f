package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterJoinFourthNode starts a fourth node whose --join names a single
// node of a running three-node cluster, a follower. Within 5 s it must be
// listed in Metadata by every node and be an alive voter in every node's
// /v1/cluster; then a client that knows only the new node can produce and
// consume through it.
func TestClusterJoinFourthNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		// The flags of the original nodes, --join changed.
		{"same-flags", []string{"--bootstrap-expect", strconv.Itoa(clusterSize)}},
		// --bootstrap-expect left at its default.
		{"join-only", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t)
			leader := c.leader()
			via := c.nodes[0]
			if via.id == leader {
				via = c.nodes[1]
			}
			n4 := c.newNode()
			n4.args = append(append([]string{}, tc.args...), "--join", via.addrs["gossip-addr"])
			begin := time.Now()
			n4.start()
			t.Logf("node %d started with --join %s (node %d, a follower; node %d leads)", n4.id, via.addrs["gossip-addr"], via.id, leader)

			const within = 5 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			var last error
			for {
				last = fourthNodeVisible(ctx, c, n4)
				if last == nil {
					break
				}
				if !n4.running() {
					t.Fatalf("node %d exited (%s)\nlog tail:\n%s", n4.id, n4.exitStatus(), tailFile(n4.logPath, 40))
				}
				select {
				case <-ctx.Done():
					t.Fatalf("node %d not a listed broker and alive voter everywhere within %v of its start: %v", n4.id, within, last)
				case <-time.After(100 * time.Millisecond):
				}
			}
			t.Logf("node %d in Metadata and an alive voter on every node %v after its start",
				n4.id, time.Since(begin).Round(time.Millisecond))

			c.waitFormed(c.ids()...)
			step(t, fmt.Sprintf("produce and consume through node %d only", n4.id), time.Minute,
				func(ctx context.Context) error { return roundTripVia(ctx, n4.kafka()) })
		})
	}
}

// fourthNodeVisible checks that every running node lists n in Metadata at
// its Kafka address and as an alive voter in /v1/cluster.
func fourthNodeVisible(ctx context.Context, c *kgateCluster, n *clusterNode) error {
	for _, at := range c.running() {
		v, err := c.view(ctx, at)
		if err != nil {
			return err
		}
		m, ok := v.member(n.id)
		if !ok || !m.Voter || m.GossipState != "alive" {
			return fmt.Errorf("node %d /v1/cluster shows node %d as %+v (listed %v), want an alive voter", at.id, n.id, m, ok)
		}
		brokers, err := metadataBrokersOf(ctx, at.kafka())
		if err != nil {
			return fmt.Errorf("Metadata from node %d: %w", at.id, err)
		}
		if brokers[n.id] != n.kafka() {
			return fmt.Errorf("Metadata from node %d lists brokers %v, want node %d at %s", at.id, brokers, n.id, n.kafka())
		}
	}
	return nil
}

// metadataBrokersOf asks one node (and only it) for Metadata through kadm
// and returns node id -> host:port.
func metadataBrokersOf(ctx context.Context, addr string) (map[int32]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int32]string{}
	for _, b := range md.Brokers {
		out[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return out, nil
}

// roundTripVia creates a topic, produces a record and reads it back with a
// client whose only bootstrap address is addr.
func roundTripVia(ctx context.Context, addr string) error {
	topic := fmt.Sprintf("cl-join-%d", time.Now().UnixNano()%1e9)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	want := "via-" + addr
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(want)}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("record not read back: %w", err)
		}
		var got []string
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) > 0 {
			if strings.Join(got, ",") != want {
				return fmt.Errorf("read %q, want %q", got, want)
			}
			return nil
		}
	}
}
