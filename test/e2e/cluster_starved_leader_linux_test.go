//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterStarvedLeaderKeepsLeading: a leader whose process gets no CPU
// for a while shorter than the heartbeat timeout (a loaded machine, a long
// GC pause) still leads when it runs again, in the same Raft term: no
// step-down, no election, no retries for its clients. Its Raft lease was
// half the heartbeat timeout, and every such pause longer than that made
// it step down ("failed to contact quorum of nodes, stepping down"), as a
// CI dry run on a loaded machine did with no fault injected at all.
//
// The pause is SIGSTOP then SIGCONT. Its length and the heartbeat timeout
// are chosen so that the outcome does not depend on the machine's load:
// the pause is well past half the heartbeat timeout (the old lease), so
// the leader's first lease check after it always failed before; and a
// pause that came out longer than meant (the test itself waited for a
// CPU) is not counted, so what stays below the heartbeat timeout is the
// leader's heartbeat interval (at most a fifth of it) and 0.7 s to spare.
func TestClusterStarvedLeaderKeepsLeading(t *testing.T) {
	const (
		heartbeat = 5 * time.Second
		pause     = 3 * time.Second        // the old lease was 2.5 s
		overrun   = 300 * time.Millisecond // a pause longer by more is tried again
		pauses    = 3
		attempts  = 8
	)
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			n.args = append(n.args, "--raft-heartbeat-timeout", heartbeat.String(), "--raft-election-timeout", heartbeat.String())
		}
	})
	_, adm := c.adminClient()
	counted := 0
	for attempt := 1; counted < pauses; attempt++ {
		if attempt > attempts {
			t.Fatalf("only %d of %d pauses lasted within %v of %v in %d attempts: the test process itself is starved", counted, pauses, overrun, pause, attempts)
		}
		leader := c.leader()
		n := c.node(leader)
		before := c.terms()
		stepDowns := strings.Count(readFile(t, n.logPath), "stepping down")

		took := stopFor(t, n, pause)
		// The leader's first lease check runs as soon as it runs again
		// (its timer expired meanwhile). A change through it, committed
		// after the pause, shows it ran: by then a step-down would have
		// happened and started an election.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		topic := fmt.Sprintf("after-pause-%d", attempt)
		resp, err := adm.CreateTopics(ctx, 1, 1, nil, topic)
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("creating %s after the pause: %v", topic, err)
		}
		after := c.leader()
		terms := c.terms()
		if took > pause+overrun {
			t.Logf("attempt %d: node %d paused %v, longer than meant; not counted", attempt, leader, took.Round(time.Millisecond))
			continue
		}
		counted++
		if got := strings.Count(readFile(t, n.logPath), "stepping down"); got != stepDowns {
			t.Errorf("attempt %d: leader %d stepped down after a pause of %v (heartbeat timeout %v)", attempt, leader, took.Round(time.Millisecond), heartbeat)
		}
		if after != leader || fmt.Sprint(terms) != fmt.Sprint(before) {
			t.Errorf("attempt %d: after a pause of %v of leader %d (term %v) the leader is %d, terms %v: an election with no fault", attempt, took.Round(time.Millisecond), leader, before, after, terms)
		}
		t.Logf("attempt %d: leader %d paused %v; leader %d, terms %v -> %v", attempt, leader, took.Round(time.Millisecond), after, before, terms)
	}
}

// stopFor stops the node's process (SIGSTOP) for d and continues it, and
// returns how long it was stopped as far as the test can tell.
func stopFor(t *testing.T, n *clusterNode, d time.Duration) time.Duration {
	t.Helper()
	p := n.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP node %d: %v", n.id, err)
	}
	stopped := time.Now()
	// Never leave it stopped: the cleanup's SIGKILL works on a stopped
	// process, but a failing test's log tail should come from a running one.
	defer func() {
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Errorf("SIGCONT node %d: %v", n.id, err)
		}
	}()
	time.Sleep(d) // the fault itself: how long the process gets no CPU
	return time.Since(stopped)
}

// terms reads every running node's Raft term (kgate_raft_term), in node
// order.
func (c *kgateCluster) terms() []int {
	c.t.Helper()
	var out []int
	for _, n := range c.running() {
		resp, err := c.http.Get("http://" + n.addrs["admin-addr"] + "/metrics")
		if err != nil {
			c.t.Fatalf("node %d /metrics: %v", n.id, err)
		}
		term := -1
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "kgate_raft_term "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err == nil {
					term = int(f)
				}
			}
		}
		resp.Body.Close()
		if term < 0 {
			c.t.Fatalf("node %d /metrics has no kgate_raft_term", n.id)
		}
		out = append(out, term)
	}
	return out
}
