//go:build chaos && linux

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Membership churn: a node leaves the way docs/operations.md says to
// decommission one (POST /v1/leave, then stop the process) and a fresh
// node, with a new node id and an empty data directory, joins through one
// member, as an operator replaces a machine.

// leave asks node id to leave, waits until the other members no longer
// count it as a voter and name a leader other than it, then stops its
// process (SIGTERM) and moves it from the members to c.gone.
func (c *cluster) leave(id int) error {
	nd := c.node(id)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+nd.admin+"/v1/leave", nil)
	if err != nil {
		return err
	}
	// Leave waits for gossip to spread the news: longer than the
	// cluster's 2 s admin client allows.
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("POST /v1/leave on node %d: %w", id, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/leave on node %d: %s", id, resp.Status)
	}
	err = pollUntil(30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, o := range c.nodes {
			if o.id == id {
				continue
			}
			v, err := c.view(ctx, o)
			if err != nil {
				return err
			}
			if v.LeaderID == nil {
				return fmt.Errorf("node %d names no leader", o.id)
			}
			if int(*v.LeaderID) == id {
				return fmt.Errorf("node %d names the leaving node %d its leader", o.id, id)
			}
			for _, m := range v.Nodes {
				if int(m.ID) == id && m.Voter {
					return fmt.Errorf("node %d still counts node %d as a voter (gossip %s)", o.id, id, m.GossipState)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node %d left: %w", id, err)
	}
	if err := nd.stop(30 * time.Second); err != nil {
		return err
	}
	c.nodes = slices.DeleteFunc(c.nodes, func(o *node) bool { return o == nd })
	nd.left = time.Now()
	c.gone = append(c.gone, nd)
	c.nw.Forget(id)
	return nil
}

// stop ends the process with SIGTERM (SIGKILL after limit) and waits.
func (nd *node) stop(limit time.Duration) error {
	nd.mu.Lock()
	cmd, ch := nd.cmd, nd.exited
	nd.killing = true
	nd.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch:
		return nil
	case <-time.After(limit):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-ch
		return fmt.Errorf("node %d did not stop within %v of SIGTERM", nd.id, limit)
	}
}

// joinFresh starts a node with the next unused id and an empty data
// directory that joins through the member via (its gossip proxy).
func (c *cluster) joinFresh(via int) *node {
	next := 0
	for _, nd := range c.all() {
		next = max(next, nd.id)
	}
	nd := c.newNode(next + 1)
	nd.args = append(nd.args, "--join", c.node(via).gossipProxy.Addr)
	c.nodes = append(c.nodes, nd)
	sort.Slice(c.nodes, func(i, j int) bool { return c.nodes[i].id < c.nodes[j].id })
	nd.start()
	return nd
}

// departedIn returns a node that had left by the time by whose Kafka
// address s names (0: none). A node that left later was a member when
// the client dialled it: a loss at that address is no departed node's.
func (c *cluster) departedIn(s string, by time.Time) int {
	for _, nd := range c.gone {
		if nd.left.After(by) {
			continue // it left later: its address named a member then
		}
		if namesAddr(s, nd.kafka) {
			return nd.id
		}
	}
	return 0
}

// namesAddr reports whether s names the address addr (not one with a
// longer port that starts the same).
func namesAddr(s, addr string) bool {
	for rest := s; ; {
		i := strings.Index(rest, addr)
		if i < 0 {
			return false
		}
		rest = rest[i+len(addr):]
		if rest == "" || rest[0] < '0' || rest[0] > '9' {
			return true
		}
	}
}

// bootstrapList is what a client configured around the last churn would
// name: the node that left last (first, so that the first dial fails),
// then the members.
func (c *cluster) bootstrapList() []string {
	var out []string
	if len(c.gone) > 0 {
		out = append(out, c.gone[len(c.gone)-1].kafka)
	}
	return append(out, c.kafkaAddrs()...)
}

// clientsReach checks that a new client whose bootstrap list names the
// departed nodes (first) reaches the cluster through the others and is
// told exactly the current members as brokers.
func (c *cluster) clientsReach(limit time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrapList()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	// The first request must get through on the client's own retries.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	cancel()
	if err != nil {
		return fmt.Errorf("metadata through %v: %w", c.bootstrapList(), err)
	}
	want := c.ids()
	return pollUntil(limit, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("metadata through %v: %w", c.bootstrapList(), err)
		}
		var got []int
		for _, b := range resp.Brokers {
			got = append(got, int(b.NodeID))
		}
		sort.Ints(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("metadata names brokers %v, want the members %v", got, want)
		}
		return nil
	})
}

// generationMovedOn reports whether a member's loss, as its client told
// it, came from the group's generation having moved on under it (a
// rebalance it had not joined yet), rather than from its own session.
func generationMovedOn(why string) bool {
	for _, s := range []string{"ILLEGAL_GENERATION", "IllegalGeneration"} {
		if strings.Contains(why, s) {
			return true
		}
	}
	return false
}
