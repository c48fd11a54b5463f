package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterRaftMutualTLS: with --raft-tls-cert/--raft-tls-key/--raft-tls-ca
// the three nodes form a cluster whose Raft traffic and forwarded requests
// use mutual TLS; a follower still forwards what needs the leader. A
// connection without a certificate gets nothing from the Raft port (not even
// a forwarded Kafka request, which would skip client authentication), and a
// node whose certificate another CA signed gossips in but is never made a
// voter; restarted with a certificate of the cluster's CA, it is.
func TestClusterRaftMutualTLS(t *testing.T) {
	bin := kgateBinary(t)
	dir := t.TempDir()
	certsDir, foreignDir := filepath.Join(dir, "certs"), filepath.Join(dir, "foreign")
	for _, args := range [][]string{
		{"certs", "-dir", certsDir, "-names", "node-1,node-2,node-3,node-4"},
		{"certs", "-dir", foreignDir, "-names", "node-4"},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("kgate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	tlsArgs := func(dir string, id int32) []string {
		return []string{"--raft-tls-cert", filepath.Join(dir, fmt.Sprintf("node-%d.pem", id)),
			"--raft-tls-key", filepath.Join(dir, fmt.Sprintf("node-%d-key.pem", id)),
			"--raft-tls-ca", filepath.Join(dir, "ca.pem")}
	}
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			n.args = append(n.args, tlsArgs(certsDir, n.id)...)
		}
	})
	leader := c.leader()
	var follower *clusterNode
	for _, n := range c.nodes {
		if n.id != leader {
			follower = n
			break
		}
	}

	step(t, fmt.Sprintf("CreateTopics sent to follower node %d is forwarded to leader node %d", follower.id, leader), 30*time.Second,
		func(ctx context.Context) error {
			cl, err := kgo.NewClient(kgo.SeedBrokers(follower.kafka()))
			if err != nil {
				return err
			}
			defer cl.Close()
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "over-tls", 2, -1
			req.Topics = append(req.Topics, rt)
			req.TimeoutMillis = 10000
			resp, err := req.RequestWith(ctx, cl.Broker(int(follower.id)))
			if err != nil {
				return err
			}
			if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
				return err
			}
			return roundTripVia(ctx, follower.kafka())
		})

	step(t, "a connection without a certificate gets no answer on the Raft port", 15*time.Second, func(ctx context.Context) error {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", c.node(leader).addrs["raft-addr"])
		if err != nil {
			return err
		}
		defer nc.Close()
		// The forwarding tag, then an ApiVersions v0 request frame.
		frame := binary.BigEndian.AppendUint32([]byte{0xF0}, 10)
		frame = append(frame, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0)
		if _, err := nc.Write(frame); err != nil {
			return nil // already refused
		}
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(nc)
		if len(got) > 0 {
			return fmt.Errorf("the Raft port answered %d bytes to a client without a certificate", len(got))
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return fmt.Errorf("the Raft port kept the connection open instead of closing it")
		}
		return nil
	})

	n4 := c.newNode()
	n4.args = append([]string{"--join", follower.addrs["gossip-addr"]}, tlsArgs(foreignDir, n4.id)...)
	n4.start()
	step(t, "a node with another CA's certificate gossips in but is refused as a voter", 30*time.Second, func(ctx context.Context) error {
		const refused = "not adding a voter: its Raft port does not prove it is a node of this cluster"
		for {
			b, _ := os.ReadFile(c.node(leader).logPath)
			if strings.Contains(string(b), refused) && strings.Contains(string(b), "node_id=4") {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("leader never logged %q for node 4", refused)
			case <-time.After(100 * time.Millisecond):
			}
		}
		v, err := c.view(ctx, c.node(leader))
		if err != nil {
			return err
		}
		if m, ok := v.member(n4.id); !ok || m.GossipState != "alive" || m.Voter {
			return fmt.Errorf("node 4 as the leader sees it: %+v (listed %v), want alive and not a voter", m, ok)
		}
		return nil
	})

	n4.stop()
	n4.args = append([]string{"--join", follower.addrs["gossip-addr"]}, tlsArgs(certsDir, n4.id)...)
	n4.start()
	step(t, "restarted with the cluster CA's certificate, node 4 becomes a voter and serves", time.Minute, func(ctx context.Context) error {
		for {
			err := fourthNodeVisible(ctx, c, n4)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(100 * time.Millisecond):
			}
		}
		return roundTripVia(ctx, n4.kafka())
	})
}
