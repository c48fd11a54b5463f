package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Leader failover under load: an idempotent acks=all producer and a group of
// three consumers of one client library run against a three-node cluster;
// the leader (group coordinator and leader of every partition) is killed
// with SIGKILL, or stopped with SIGTERM. The group must carry on through the
// new leader without a rebalance (same member ids and generation, no
// revoked/lost/assigned callback), consume every acknowledged record and
// never see its committed offsets go backwards.

func TestClusterLeaderKill9FranzGo(t *testing.T) { runClusterFailover(t, clFranzGoMembers, false) }

func TestClusterLeaderKill9ConfluentKafkaPython(t *testing.T) {
	runClusterFailover(t, clConfluentPythonMembers, false)
}

func TestClusterLeaderKill9Java(t *testing.T) { runClusterFailover(t, clJavaMembers, false) }

func TestClusterLeaderSIGTERMFranzGo(t *testing.T) { runClusterFailover(t, clFranzGoMembers, true) }

func TestClusterLeaderSIGTERMConfluentKafkaPython(t *testing.T) {
	runClusterFailover(t, clConfluentPythonMembers, true)
}

func TestClusterLeaderSIGTERMJava(t *testing.T) { runClusterFailover(t, clJavaMembers, true) }

const (
	loadBeforeFailover = 2 * time.Second
	loadAfterFailover  = 4 * time.Second
)

func runClusterFailover(t *testing.T, kind clMemberKind, sigterm bool) {
	kind.require(t)
	begin := time.Now()
	c := startCluster(t)
	_, adm := c.adminClient()
	suffix := time.Now().UnixNano() % 1e9
	topic := fmt.Sprintf("cl-failover-%d", suffix)
	group := fmt.Sprintf("cl-group-%s-%d", kind.client, suffix)
	createClusterTopic(t, c, topic)

	prod := startClusterProducer(t, c, topic)
	w := newClGroupWatch()
	members, names := kind.startMembers(t, c, topic, group, kind.client, w, clMemberOpts{})
	before := clWaitGroupStable(t, c, adm, group, topic, names, w)
	w.arm()
	t.Logf("group stable %v after start: %s", time.Since(begin).Round(time.Millisecond), before)
	kgoBefore := clKgoGroupMeta(members)
	offsets := clWatchOffsets(c, group, topic)

	time.Sleep(loadBeforeFailover)
	old := c.leader()
	ackedBefore := prod.acked()
	if ackedBefore == 0 {
		t.Fatalf("nothing acknowledged before the failover: %s", prod.acks.summary())
	}
	how := "killed (SIGKILL)"
	at := time.Now()
	if sigterm {
		how = "stopped (SIGTERM)"
		c.node(old).stop()
	} else {
		c.node(old).kill9()
	}
	var survivors []int32
	for _, n := range c.running() {
		survivors = append(survivors, n.id)
	}
	leader := c.waitFormed(survivors...)
	t.Logf("leader node %d %s after %d acknowledged records; node %d leads %v later",
		old, how, ackedBefore, leader, time.Since(at).Round(time.Millisecond))
	if err := prod.waitAcked(prod.acked(), 30*time.Second); err != nil {
		t.Fatalf("producer makes no progress through the new leader: %v", err)
	}
	t.Logf("producer acknowledged again %v after the failover", time.Since(at).Round(time.Millisecond))
	time.Sleep(loadAfterFailover)
	_, adm = clDrain(t, c, prod, w, group, topic)

	after := clDescribeGroupWithin(t, c, adm, group, topic, 30*time.Second)
	t.Logf("group after the failover: %s", after)
	clGroupKept(t, "the failover", before, after, kgoBefore, members, w)
	offsets.finish(t)
	clCloseMembers(t, w, members)
	t.Logf("%s leader failover (%s) scenario done in %v", kind.client, how, time.Since(begin).Round(time.Millisecond))
}

// clGroupKept fails t unless the group is Stable after what happened
// (named by what) with the members and generation it had before, and the
// franz-go members still hold the member ids and generation they had. A
// group session a client ended on its own (clGroupWatch.endedByClient) made
// its member rejoin under the same member id: the generation may have moved
// on by one for each.
func clGroupKept(t *testing.T, what string, before, after clGroupSnapshot, kgoBefore map[string]string, members []clMember, w *clGroupWatch) {
	t.Helper()
	ended := int32(w.endedByClient())
	if after.state != "Stable" {
		t.Errorf("group state %s after %s, want Stable", after.state, what)
	}
	if fmt.Sprint(after.members) != fmt.Sprint(before.members) {
		t.Errorf("group members changed across %s:\nbefore %v\nafter  %v", what, before.members, after.members)
	}
	if after.generation != before.generation+ended {
		t.Errorf("group generation %d after %s, %d before and %d sessions ended by a client", after.generation, what, before.generation, ended)
	}
	kgoAfter := clKgoGroupMeta(members)
	for name, b := range kgoBefore {
		id, gen := splitGroupMeta(b)
		idAfter, genAfter := splitGroupMeta(kgoAfter[name])
		if idAfter != id || genAfter < gen || genAfter-gen > ended {
			t.Errorf("franz-go members' own member id/generation changed:\nbefore %v\nafter  %v", kgoBefore, kgoAfter)
			break
		}
	}
}

// clKgoGroupMeta is "member id/generation" of every franz-go member by name.
// clCloseMembers stops watching the group, closes every member and reports
// what the watch saw (failing t on what it must not have seen).
func clCloseMembers(t *testing.T, w *clGroupWatch, members []clMember) {
	t.Helper()
	w.disarm()
	for _, m := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := m.close(ctx); err != nil {
			t.Errorf("closing %s: %v", m.name(), err)
		}
		cancel()
	}
	w.report(t)
}

func clKgoGroupMeta(members []clMember) map[string]string {
	out := map[string]string{}
	for _, m := range members {
		if km, ok := m.(*clKgoMember); ok {
			id, gen := km.groupMeta()
			out[m.name()] = fmt.Sprintf("%s/%d", id, gen)
		}
	}
	return out
}

// clDescribeGroupWithin retries clDescribeGroup until it succeeds.
func clDescribeGroupWithin(t *testing.T, c *kgateCluster, adm *kadm.Client, group, topic string, timeout time.Duration) clGroupSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		s, err := clDescribeGroup(ctx, c, adm, group, topic)
		if err == nil {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("describing group %s: %v", group, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// splitGroupMeta splits clKgoGroupMeta's "member id/generation".
func splitGroupMeta(s string) (string, int32) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return s, -1
	}
	gen, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return s, -1
	}
	return s[:i], int32(gen)
}
