package coordinator

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// TestMemberThatNeverSyncsIsRemovedOnceStable: as in Kafka, a member that
// sends no SyncGroup within the rebalance timeout is removed even though the
// leader's sync made the group Stable meanwhile; one that synced stays.
func TestMemberThatNeverSyncsIsRemovedOnceStable(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		req := func(client string) JoinRequest {
			r := jreq("g", "", client)
			r.SessionTimeout, r.RebalanceTimeout = 30*time.Second, 10*time.Second
			return r
		}
		ca := h.join(req("ca"))
		cb := h.join(req("cb"))
		h.advance(initialDelay)
		ra, rb := ready(t, ca, "join"), ready(t, cb, "join")
		leader, silent := ra.Leader, ra.MemberID
		if silent == leader {
			silent = rb.MemberID
		}
		assigns := []fsm.Assignment{{MemberID: leader, Assignment: assignmentFor(leader)}, {MemberID: silent, Assignment: assignmentFor(silent)}}
		if r := h.syncNow(SyncRequest{Group: "g", MemberID: leader, Generation: 1, Assignments: assigns}); r.Code != 0 {
			t.Fatalf("leader sync: %+v", r)
		}
		if g := h.describe("g"); g.State != fsm.GroupStable {
			t.Fatalf("after the leader's sync: %s", g.State)
		}
		// Both keep their sessions alive; only the leader ever synced.
		h.advance(5 * time.Second)
		for _, id := range []string{leader, silent} {
			if code := h.hb("g", id, "", 1); code != codeNone {
				t.Fatalf("heartbeat of %s: %d", id, code)
			}
		}
		h.advance(5 * time.Second)
		g := h.describe("g")
		if hasMember(g, silent) || !hasMember(g, leader) || g.State != fsm.GroupPreparingRebalance {
			t.Fatalf("after the rebalance timeout: %s %v; want the member that never synced removed and a rebalance", g.State, memberIDs(g))
		}
	})
}

// TestMembersThatSyncedStayStable: with every member synced, the sync
// timer removes nobody.
func TestMembersThatSyncedStayStable(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ids, _ := h.stable(jreq("g", "", "ca"), jreq("g", "", "cb"))
		for range 2 * testRebalance / (testSession / 2) {
			h.advance(testSession / 2)
			for _, id := range ids {
				if code := h.hb("g", id, "", 1); code != codeNone {
					t.Fatalf("heartbeat of %s: %d", id, code)
				}
			}
		}
		if g := h.describe("g"); g.State != fsm.GroupStable || len(g.Members) != 2 || g.Generation != 1 {
			t.Fatalf("after the rebalance timeout: %s generation %d %v", g.State, g.Generation, memberIDs(g))
		}
	})
}

// TestStaticMemberStaysUntilSessionTimeout (KIP-345): a static member that
// does not rejoin a rebalance within the rebalance timeout stays in the
// group, in the new generation (until its session times out or it misses
// SyncGroup); a dynamic member that does not rejoin is dropped when the
// window closes.
func TestStaticMemberStaysUntilSessionTimeout(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		req := func(client, instance string) JoinRequest {
			r := jreq("g", "", client)
			r.InstanceID = instance
			r.SessionTimeout, r.RebalanceTimeout = 30*time.Second, 10*time.Second
			return r
		}
		ids, leader := h.stable(req("lead", ""), req("static", "inst-s"), req("dyn", ""))
		static, dyn := ids[1], ids[2]
		if leader != ids[0] {
			t.Fatalf("leader %s, want the first member %s", leader, ids[0])
		}
		// A new member starts a rebalance; only the leader rejoins.
		cc := h.join(req("new", ""))
		synctest.Wait()
		lr := req("lead", "")
		lr.MemberID = leader
		lj := h.join(lr)
		h.advance(10 * time.Second)
		if r := ready(t, lj, "leader rejoin"); r.Code != 0 || r.Generation != 2 {
			t.Fatalf("leader rejoin: %+v", r)
		}
		ready(t, cc, "new member join")
		g := h.describe("g")
		if !hasMember(g, static) || hasMember(g, dyn) || g.Generation != 2 {
			t.Fatalf("after the join window: generation %d %v; want the static member kept, the dynamic one dropped", g.Generation, memberIDs(g))
		}
		// A member that never comes back is still not kept forever: it
		// sends no SyncGroup either, and goes at the sync timeout.
		h.advance(10 * time.Second)
		if g := h.describe("g"); hasMember(g, static) {
			t.Fatalf("after the sync timeout: %v", memberIDs(g))
		}
	})
}

// TestFailoverDuringInitialDelayRestartsIt (KIP-134): a new leader finds a
// new group in its initial rebalance delay; the delay starts again instead
// of the join window closing at once on the members that joined before.
func TestFailoverDuringInitialDelayRestartsIt(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ca := h.join(jreq("g", "", "ca"))
		h.advance(time.Second)
		h.c.deactivate() // leadership lost: the parked join is answered NOT_COORDINATOR
		if r := ready(t, ca, "join before the failover"); r.Code != codeNotCoordinator {
			t.Fatalf("parked join on losing leadership: %+v", r)
		}
		h.c.activate()
		synctest.Wait()
		if g := h.describe("g"); g.State != fsm.GroupPreparingRebalance {
			t.Fatalf("right after the failover the group is %s, want PreparingRebalance for a fresh initial delay", g.State)
		}
		// Both members (re)join after the failover and land in one generation.
		ra := h.join(jreq("g", "", "ca"))
		h.advance(time.Second)
		rb := h.join(jreq("g", "", "cb"))
		h.advance(initialDelay)
		a, b := ready(t, ra, "join of ca"), ready(t, rb, "join of cb")
		if a.Code != 0 || b.Code != 0 || a.Generation != 1 || b.Generation != 1 {
			t.Fatalf("joins after the failover: %+v %+v; want both in generation 1", a, b)
		}
	})
}

// TestUnsubscribedOffsetsExpireInStableGroup (KIP-496): in a Stable
// consumer group, offsets of a topic no member subscribes to expire once
// the retention has passed since their commit; subscribed ones stay.
func TestUnsubscribedOffsetsExpireInStableGroup(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{OffsetsRetention: 5 * time.Second})
		md := kmsg.NewConsumerMemberMetadata()
		md.Topics = []string{"a"}
		r := jreq("g", "", "ca")
		r.Protocols = []fsm.Protocol{{Name: "range", Metadata: md.AppendTo(nil)}}
		ids, _ := h.stable(r)
		if _, code := h.c.CommitOffsets(h.ctx, "g", ids[0], "", 1, []fsm.OffsetCommit{{Topic: "a", Offset: 1}, {Topic: "b", Offset: 2}}); code != 0 {
			t.Fatalf("commit: %d", code)
		}
		h.advance(5 * time.Second)
		h.c.expireOffsets(h.ctx)
		if offs, _ := h.c.FetchOffsets("g"); len(offs) != 2 {
			t.Fatalf("offsets at the retention: %v, want both", offs)
		}
		h.advance(time.Millisecond)
		h.c.expireOffsets(h.ctx)
		offs, _ := h.c.FetchOffsets("g")
		if _, ok := offs[fsm.TopicPartition{Topic: "a"}]; !ok || len(offs) != 1 {
			t.Fatalf("offsets past the retention: %v, want only the subscribed topic a", offs)
		}
	})
}
