package coordinator

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kgate/kgate/fsm"
)

func TestKIP394MemberIDRequired(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		v4 := func(group, member, client string) JoinRequest {
			r := jreq(group, member, client)
			r.RequireKnownMemberID = true
			return r
		}

		first := h.joinNow(v4("g", "", "c1"))
		if first.Code != codeMemberIDRequired || first.MemberID == "" {
			t.Fatalf("v4 join without member id: %+v, want MEMBER_ID_REQUIRED with an id", first)
		}
		if g := h.describe("g"); g != nil && len(g.Members) != 0 {
			t.Fatalf("a handed-out member id made a member: %v", memberIDs(g))
		}
		if r := h.joinNow(v4("g", "made-up-id", "c2")); r.Code != codeUnknownMember {
			t.Fatalf("join with an unknown member id: code %d, want UNKNOWN_MEMBER_ID", r.Code)
		}

		ch := h.join(v4("g", first.MemberID, "c1"))
		parked(t, ch, "rejoin with the handed-out id")
		h.advance(initialDelay)
		r := ready(t, ch, "rejoin")
		if r.Code != 0 || r.MemberID != first.MemberID || r.Generation != 1 || r.Leader != first.MemberID {
			t.Fatalf("rejoin with the handed-out id: %+v", r)
		}

		// Pending ids expire after the session timeout (the sweep runs every second in Run).
		a := h.joinNow(v4("g2", "", "ca"))
		b := h.joinNow(v4("g2", "", "cb"))
		if a.Code != codeMemberIDRequired || b.Code != codeMemberIDRequired {
			t.Fatalf("codes %d %d", a.Code, b.Code)
		}
		h.advance(testSession)
		h.c.expirePending()
		chB := h.join(v4("g2", b.MemberID, "cb"))
		parked(t, chB, "join with a pending id at its expiry time")
		h.advance(time.Millisecond)
		h.c.expirePending()
		if r := h.joinNow(v4("g2", a.MemberID, "ca")); r.Code != codeUnknownMember {
			t.Fatalf("join with an expired pending id: code %d, want UNKNOWN_MEMBER_ID", r.Code)
		}
		h.advance(initialDelay)
		if r := ready(t, chB, "join of b"); r.Code != 0 || r.MemberID != b.MemberID || r.Generation != 1 {
			t.Fatalf("join with a pending id: %+v", r)
		}
	})
}

func TestNewGroupWaitsInitialDelayAndLeaderGetsMembers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ca := h.join(jreq("g", "", "ca"))
		cb := h.join(jreq("g", "", "cb"))
		synctest.Wait()
		h.advance(initialDelay - time.Millisecond)
		parked(t, ca, "join a")
		parked(t, cb, "join b")
		if g := h.describe("g"); g.State != fsm.GroupPreparingRebalance || g.Generation != 0 {
			t.Fatalf("group during the initial delay: %s gen %d", g.State, g.Generation)
		}
		h.advance(time.Millisecond)
		ra, rb := ready(t, ca, "join a"), ready(t, cb, "join b")
		for _, r := range []JoinResult{ra, rb} {
			if r.Code != 0 || r.Generation != 1 || r.Protocol != "range" || r.ProtocolType != "consumer" {
				t.Fatalf("join result %+v", r)
			}
		}
		if ra.MemberID == rb.MemberID || ra.Leader != rb.Leader || (ra.Leader != ra.MemberID && ra.Leader != rb.MemberID) {
			t.Fatalf("member ids %q %q, leaders %q %q", ra.MemberID, rb.MemberID, ra.Leader, rb.Leader)
		}
		leader, follower := ra, rb
		if rb.Leader == rb.MemberID {
			leader, follower = rb, ra
		}
		if len(follower.Members) != 0 {
			t.Fatalf("a follower got the member list: %+v", follower.Members)
		}
		want := map[string]string{ra.MemberID: "md-ca", rb.MemberID: "md-cb"}
		if len(leader.Members) != 2 {
			t.Fatalf("leader got %d members, want 2", len(leader.Members))
		}
		for _, m := range leader.Members {
			if want[m.MemberID] != string(m.Metadata) {
				t.Fatalf("leader's member list entry %s has metadata %q, want %q", m.MemberID, m.Metadata, want[m.MemberID])
			}
		}
		if g := h.describe("g"); g.State != fsm.GroupCompletingRebalance || g.Generation != 1 || g.Leader != leader.MemberID {
			t.Fatalf("group after join: %s gen %d leader %s", g.State, g.Generation, g.Leader)
		}
	})
}

// group.initial.rebalance.delay.ms=0 (a negative delay here): the first
// rebalance of a new group completes as soon as its first member joined.
func TestNoInitialDelay(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{InitialRebalanceDelay: -1})
		ca := h.join(jreq("g", "", "ca"))
		synctest.Wait()
		if r := ready(t, ca, "join a"); r.Code != 0 || r.Generation != 1 {
			t.Fatalf("join result %+v", r)
		}
	})
}

func TestProtocolChosenByVoteAndInconsistentProtocols(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		withProtocols := func(client string, names ...string) JoinRequest {
			r := jreq("g", "", client)
			r.Protocols = nil
			for _, n := range names {
				r.Protocols = append(r.Protocols, fsm.Protocol{Name: n, Metadata: []byte(client + "/" + n)})
			}
			return r
		}
		// The first member prefers range, the two others roundrobin: the vote picks roundrobin.
		a := h.join(withProtocols("ca", "range", "roundrobin"))
		synctest.Wait()
		b := h.join(withProtocols("cb", "roundrobin", "range"))
		c := h.join(withProtocols("cc", "roundrobin", "range", "sticky"))
		synctest.Wait()
		if r := h.joinNow(withProtocols("cd", "sticky")); r.Code != codeInconsistentProtocol {
			t.Fatalf("join with no protocol in common: code %d, want INCONSISTENT_GROUP_PROTOCOL", r.Code)
		}
		other := withProtocols("ce", "range")
		other.ProtocolType = "connect"
		if r := h.joinNow(other); r.Code != codeInconsistentProtocol {
			t.Fatalf("join with another protocol type: code %d, want INCONSISTENT_GROUP_PROTOCOL", r.Code)
		}
		empty := withProtocols("cf")
		if r := h.joinNow(empty); r.Code != codeInconsistentProtocol {
			t.Fatalf("join with no protocols: code %d, want INCONSISTENT_GROUP_PROTOCOL", r.Code)
		}
		h.advance(initialDelay)
		var leader JoinResult
		for _, ch := range []<-chan JoinResult{a, b, c} {
			r := ready(t, ch, "join")
			if r.Code != 0 || r.Protocol != "roundrobin" {
				t.Fatalf("join result %+v, want protocol roundrobin", r)
			}
			if r.MemberID == r.Leader {
				leader = r
			}
		}
		if len(leader.Members) != 3 {
			t.Fatalf("leader got %d members, want 3 (the refused ones must not be members)", len(leader.Members))
		}
		for _, m := range leader.Members {
			if !strings.HasSuffix(string(m.Metadata), "/roundrobin") {
				t.Fatalf("member %s metadata %q is not its roundrobin metadata", m.MemberID, m.Metadata)
			}
		}
	})
}

func TestSyncGivesEachMemberItsAssignment(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ca := h.join(jreq("g", "", "ca"))
		cb := h.join(jreq("g", "", "cb"))
		h.advance(initialDelay)
		ra, rb := ready(t, ca, "join"), ready(t, cb, "join")
		leader, follower := ra.Leader, ra.MemberID
		if follower == leader {
			follower = rb.MemberID
		}
		if h.hb("g", follower, "", 1) != codeNone {
			t.Fatal("heartbeat while completing the rebalance is not NONE")
		}
		if r := h.syncNow(SyncRequest{Group: "g", MemberID: follower, Generation: 0}); r.Code != codeIllegalGeneration {
			t.Fatalf("sync with a wrong generation: code %d, want ILLEGAL_GENERATION", r.Code)
		}
		if r := h.syncNow(SyncRequest{Group: "g", MemberID: "nobody", Generation: 1}); r.Code != codeUnknownMember {
			t.Fatalf("sync of an unknown member: code %d, want UNKNOWN_MEMBER_ID", r.Code)
		}
		rr := "roundrobin"
		if r := h.syncNow(SyncRequest{Group: "g", MemberID: follower, Generation: 1, Protocol: &rr}); r.Code != codeInconsistentProtocol {
			t.Fatalf("v5 sync naming another protocol: code %d, want INCONSISTENT_GROUP_PROTOCOL", r.Code)
		}

		fs := h.sync(SyncRequest{Group: "g", MemberID: follower, Generation: 1})
		parked(t, fs, "follower sync before the leader's")
		h.advance(testSession / 2)
		parked(t, fs, "follower sync before the leader's")
		ls := h.syncNow(SyncRequest{Group: "g", MemberID: leader, Generation: 1, Assignments: []fsm.Assignment{
			{MemberID: leader, Assignment: []byte("L")}, {MemberID: follower, Assignment: []byte("F")}}})
		if ls.Code != 0 || string(ls.Assignment) != "L" || ls.Protocol != "range" || ls.ProtocolType != "consumer" {
			t.Fatalf("leader sync: %+v", ls)
		}
		if r := ready(t, fs, "follower sync"); r.Code != 0 || string(r.Assignment) != "F" || r.Protocol != "range" {
			t.Fatalf("follower sync: %+v", r)
		}
		// A late SyncGroup in the Stable group gets the stored assignment at once.
		if r := h.syncNow(SyncRequest{Group: "g", MemberID: follower, Generation: 1}); r.Code != 0 || string(r.Assignment) != "F" {
			t.Fatalf("repeated follower sync: %+v", r)
		}
		if g := h.describe("g"); g.State != fsm.GroupStable {
			t.Fatalf("state %s, want Stable", g.State)
		}
		for _, id := range []string{leader, follower} {
			if code := h.hb("g", id, "", 1); code != codeNone {
				t.Fatalf("heartbeat of %s in a Stable group: %d", id, code)
			}
		}
		if code := h.hb("g", leader, "", 2); code != codeIllegalGeneration {
			t.Fatalf("heartbeat with a wrong generation: %d, want ILLEGAL_GENERATION", code)
		}
		if code := h.hb("g", "nobody", "", 1); code != codeUnknownMember {
			t.Fatalf("heartbeat of an unknown member: %d, want UNKNOWN_MEMBER_ID", code)
		}
		if code := h.hb("unknown-group", "nobody", "", 1); code != codeUnknownMember {
			t.Fatalf("heartbeat in an unknown group: %d, want UNKNOWN_MEMBER_ID", code)
		}
	})
}

func TestNewMemberRebalancesAndWindowClosesWhenAllRejoined(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ids, leader := h.stable(jreq("g", "", "ca"), jreq("g", "", "cb"))
		start := h.clk.Now()
		cc := h.join(jreq("g", "", "cc"))
		parked(t, cc, "join of a third member")
		for _, id := range ids {
			if code := h.hb("g", id, "", 1); code != codeRebalanceInProgress {
				t.Fatalf("heartbeat of %s after a new member joined: %d, want REBALANCE_IN_PROGRESS", id, code)
			}
		}
		ca := h.join(jreq("g", ids[0], "ca"))
		parked(t, ca, "rejoin while another member has not rejoined")
		cb := h.join(jreq("g", ids[1], "cb"))
		var results []JoinResult
		for _, ch := range []<-chan JoinResult{ca, cb, cc} {
			results = append(results, ready(t, ch, "join once all rejoined"))
		}
		if !h.clk.Now().Equal(start) {
			t.Fatal("the clock moved")
		}
		for _, r := range results {
			if r.Code != 0 || r.Generation != 2 || r.Leader != leader {
				t.Fatalf("join result %+v, want generation 2 led by %s", r, leader)
			}
		}
		for _, r := range results {
			if r.MemberID == leader && len(r.Members) != 3 {
				t.Fatalf("leader got %d members, want 3", len(r.Members))
			}
		}
		if g := h.describe("g"); g.State != fsm.GroupCompletingRebalance || g.Generation != 2 || len(g.Members) != 3 {
			t.Fatalf("group: %s gen %d members %v", g.State, g.Generation, memberIDs(g))
		}
	})
}

func TestSessionExpiryRemovesMemberAndRebalances(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ids, _ := h.stable(jreq("g", "", "ca"), jreq("g", "", "cb"))
		alive, dead := ids[0], ids[1]
		// dead's last sign of life was its SyncGroup, now.
		for range 4 {
			h.advance(2 * time.Second)
			if code := h.hb("g", alive, "", 1); code != codeNone {
				t.Fatalf("heartbeat: %d", code)
			}
		}
		h.advance(testSession - 8*time.Second - time.Millisecond)
		if g := h.describe("g"); !hasMember(g, dead) || g.State != fsm.GroupStable {
			t.Fatalf("member removed before its session timeout: %s %v", g.State, memberIDs(g))
		}
		h.advance(time.Millisecond)
		g := h.describe("g")
		if hasMember(g, dead) || !hasMember(g, alive) || g.State != fsm.GroupPreparingRebalance {
			t.Fatalf("after the session timeout: %s %v", g.State, memberIDs(g))
		}
		if code := h.hb("g", alive, "", 1); code != codeRebalanceInProgress {
			t.Fatalf("heartbeat of the survivor: %d, want REBALANCE_IN_PROGRESS", code)
		}
		r := h.joinNow(jreq("g", alive, "ca"))
		if r.Code != 0 || r.Generation != 2 || r.Leader != alive || len(r.Members) != 1 {
			t.Fatalf("rejoin of the survivor: %+v", r)
		}
		if code := h.hb("g", dead, "", 1); code != codeUnknownMember {
			t.Fatalf("heartbeat of the expired member: %d, want UNKNOWN_MEMBER_ID", code)
		}
		if r := h.joinNow(jreq("g", dead, "cb")); r.Code != codeUnknownMember {
			t.Fatalf("rejoin of the expired member: %d, want UNKNOWN_MEMBER_ID", r.Code)
		}
	})
}

func TestRebalanceTimeoutDropsMembersThatDidNotRejoin(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ids, _ := h.stable(jreq("g", "", "ca"), jreq("g", "", "cb"))
		a, b := ids[0], ids[1]
		cc := h.join(jreq("g", "", "cc"))
		ca := h.join(jreq("g", a, "ca"))
		synctest.Wait()
		// b keeps heartbeating but never rejoins.
		for range 6 {
			h.advance(3 * time.Second)
			if code := h.hb("g", b, "", 1); code != codeRebalanceInProgress {
				t.Fatalf("heartbeat of b: %d", code)
			}
		}
		h.advance(testRebalance - 18*time.Second - time.Millisecond)
		parked(t, ca, "rejoin before the rebalance timeout")
		parked(t, cc, "join before the rebalance timeout")
		h.advance(time.Millisecond)
		ra, rc := ready(t, ca, "rejoin"), ready(t, cc, "join")
		for _, r := range []JoinResult{ra, rc} {
			if r.Code != 0 || r.Generation != 2 {
				t.Fatalf("join result %+v", r)
			}
		}
		if g := h.describe("g"); hasMember(g, b) || len(g.Members) != 2 || g.Generation != 2 {
			t.Fatalf("after the rebalance timeout: gen %d members %v", g.Generation, memberIDs(g))
		}
		if code := h.hb("g", b, "", 1); code != codeUnknownMember {
			t.Fatalf("heartbeat of the dropped member: %d, want UNKNOWN_MEMBER_ID", code)
		}
	})
}

func TestSyncTimeoutRemovesMembersThatDidNotSync(t *testing.T) {
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
		leader, follower := ra.Leader, ra.MemberID
		if follower == leader {
			follower = rb.MemberID
		}
		fs := h.sync(SyncRequest{Group: "g", MemberID: follower, Generation: 1})
		h.advance(10*time.Second - time.Millisecond)
		parked(t, fs, "follower sync before the rebalance timeout")
		if code := h.hb("g", leader, "", 1); code != codeNone {
			t.Fatalf("leader heartbeat while completing: %d", code)
		}
		h.advance(time.Millisecond)
		if r := ready(t, fs, "follower sync"); r.Code != codeRebalanceInProgress {
			t.Fatalf("parked sync after the leader missed SyncGroup: code %d, want REBALANCE_IN_PROGRESS", r.Code)
		}
		g := h.describe("g")
		if hasMember(g, leader) || !hasMember(g, follower) || g.State != fsm.GroupPreparingRebalance {
			t.Fatalf("after the sync timeout: %s %v", g.State, memberIDs(g))
		}
		if code := h.hb("g", leader, "", 1); code != codeUnknownMember {
			t.Fatalf("heartbeat of the removed leader: %d, want UNKNOWN_MEMBER_ID", code)
		}
		r := h.joinNow(jreq("g", follower, "cb"))
		if r.Code != 0 || r.Generation != 2 || r.Leader != follower {
			t.Fatalf("rejoin: %+v", r)
		}
	})
}

func TestLeaveGroup(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		rb, rc := jreq("g", "", "cb"), jreq("g", "", "cc")
		rb.InstanceID, rc.InstanceID = "instance-b", "instance-c"
		ids, _ := h.stable(jreq("g", "", "ca"), rb, rc, jreq("g", "", "cd"))
		a, c, d := ids[0], ids[2], ids[3]

		codes, code := h.c.Leave(h.ctx, "g", []LeaveMember{{MemberID: a}})
		if code != 0 || !slices.Equal(codes, []int16{0}) {
			t.Fatalf("leave by member id: %v %d", codes, code)
		}
		if code := h.hb("g", d, "", 1); code != codeRebalanceInProgress {
			t.Fatalf("heartbeat after a member left: %d, want REBALANCE_IN_PROGRESS", code)
		}
		codes, code = h.c.Leave(h.ctx, "g", []LeaveMember{
			{InstanceID: "instance-b"},                           // v3+: by instance id
			{MemberID: "someone-else", InstanceID: "instance-c"}, // instance id held by another member id
			{MemberID: "nobody"},
		})
		if code != 0 || !slices.Equal(codes, []int16{0, codeFencedInstance, codeUnknownMember}) {
			t.Fatalf("leave codes %v %d, want [0 %d %d]", codes, code, codeFencedInstance, codeUnknownMember)
		}
		if g := h.describe("g"); !slices.Equal(memberIDs(g), []string{c, d}) {
			t.Fatalf("members %v, want [%s %s]", memberIDs(g), c, d)
		}
		codes, code = h.c.Leave(h.ctx, "g", []LeaveMember{{MemberID: c, InstanceID: "instance-c"}, {MemberID: d}})
		if code != 0 || !slices.Equal(codes, []int16{0, 0}) {
			t.Fatalf("leave of the last members: %v %d", codes, code)
		}
		if g := h.describe("g"); g.State != fsm.GroupEmpty || len(g.Members) != 0 {
			t.Fatalf("after the last member left: %s %v", g.State, memberIDs(g))
		}
		if code := h.hb("g", d, "", 1); code != codeUnknownMember {
			t.Fatalf("heartbeat after leaving: %d", code)
		}
	})
}

func TestLeaveAnswersParkedJoin(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		r := jreq("g", "", "ca")
		r.InstanceID = "instance-a"
		ch := h.join(r)
		parked(t, ch, "join")
		codes, code := h.c.Leave(h.ctx, "g", []LeaveMember{{InstanceID: "instance-a"}})
		if code != 0 || !slices.Equal(codes, []int16{0}) {
			t.Fatalf("leave: %v %d", codes, code)
		}
		if res := ready(t, ch, "parked join of the leaver"); res.Code != codeUnknownMember {
			t.Fatalf("parked join of a member that left: code %d, want UNKNOWN_MEMBER_ID", res.Code)
		}
		if g := h.describe("g"); g.State != fsm.GroupEmpty {
			t.Fatalf("state %s, want Empty", g.State)
		}
	})
}

func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ra, rb := jreq("g", "", "ca"), jreq("g", "", "cb")
		ra.InstanceID, rb.InstanceID = "instance-a", "instance-b"
		ids, leader := h.stable(ra, rb)
		oldA, b := ids[0], ids[1]

		// a restarts: same instance id, no member id. Static members skip
		// KIP-394's MEMBER_ID_REQUIRED round trip.
		ra.RequireKnownMemberID = true
		r := h.joinNow(ra)
		if r.Code != 0 || r.MemberID == "" || r.MemberID == oldA || r.Generation != 1 || r.Protocol != "range" {
			t.Fatalf("static rejoin: %+v, want a new member id in generation 1", r)
		}
		newA := r.MemberID
		wantLeader := leader
		if leader == oldA {
			wantLeader = newA
		}
		if r.Leader != wantLeader {
			t.Fatalf("leader %s, want %s", r.Leader, wantLeader)
		}
		if code := h.hb("g", b, "instance-b", 1); code != codeNone {
			t.Fatalf("heartbeat of the other member after a static rejoin: %d, want NONE (no rebalance)", code)
		}
		if g := h.describe("g"); g.State != fsm.GroupStable || g.Generation != 1 || !slices.Equal(memberIDs(g), []string{newA, b}) {
			t.Fatalf("group after static rejoin: %s gen %d %v", g.State, g.Generation, memberIDs(g))
		}
		s := h.syncNow(SyncRequest{Group: "g", MemberID: newA, InstanceID: "instance-a", Generation: 1})
		if s.Code != 0 || !bytes.Equal(s.Assignment, assignmentFor(oldA)) {
			t.Fatalf("sync of the restarted static member: %+v, want its old assignment", s)
		}
		if code := h.hb("g", oldA, "instance-a", 1); code != codeFencedInstance {
			t.Fatalf("heartbeat of the old member id: %d, want FENCED_INSTANCE_ID", code)
		}
		if _, code := h.c.CommitOffsets(h.ctx, "g", oldA, "instance-a", 1, []fsm.OffsetCommit{{Topic: "t", Offset: 1}}); code != codeFencedInstance {
			t.Fatalf("commit of the old member id: %d, want FENCED_INSTANCE_ID", code)
		}
		if r := h.syncNow(SyncRequest{Group: "g", MemberID: oldA, InstanceID: "instance-a", Generation: 1}); r.Code != codeFencedInstance {
			t.Fatalf("sync of the old member id: %d, want FENCED_INSTANCE_ID", r.Code)
		}
		// The old member id's session running out changes nothing.
		for range 4 {
			h.advance(3 * time.Second)
			for _, m := range [][2]string{{b, "instance-b"}, {newA, "instance-a"}} {
				if code := h.hb("g", m[0], m[1], 1); code != codeNone {
					t.Fatalf("heartbeat of %s after the old id's session ran out: %d", m[0], code)
				}
			}
		}
		if g := h.describe("g"); g.State != fsm.GroupStable || len(g.Members) != 2 {
			t.Fatalf("group: %s %v", g.State, memberIDs(g))
		}

		// b restarts with other metadata for the same protocol (consumer
		// metadata carries a generation, so it always differs): as in
		// Kafka, no rebalance while the selected protocol stays.
		rb.MemberID = ""
		rb.Protocols = []fsm.Protocol{{Name: "range", Metadata: []byte("md-cb, restarted")}}
		if r := h.joinNow(rb); r.Code != 0 || r.Generation != 1 {
			t.Fatalf("static rejoin with new metadata for the same protocol: %+v, want generation 1 at once", r)
		} else {
			b = r.MemberID
		}
		if code := h.hb("g", newA, "instance-a", 1); code != codeNone {
			t.Fatalf("heartbeat after a static rejoin with new metadata: %d, want NONE", code)
		}

		// b restarts supporting only a protocol a does not: refused, and
		// the group stays as it is.
		rb.MemberID = ""
		rb.Protocols = []fsm.Protocol{{Name: "roundrobin", Metadata: []byte("rr-b")}}
		if r := h.joinNow(rb); r.Code != codeInconsistentProtocol {
			t.Fatalf("static rejoin with no common protocol: %+v, want INCONSISTENT_GROUP_PROTOCOL", r)
		}
		if code := h.hb("g", newA, "instance-a", 1); code != codeNone {
			t.Fatalf("heartbeat after a refused static rejoin: %d, want NONE", code)
		}
		if code := h.hb("g", b, "instance-b", 1); code != codeNone {
			t.Fatalf("the refused rejoin fenced the running incarnation: %d", code)
		}
	})
}

func TestJoinValidation(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		for _, d := range []time.Duration{6*time.Second - time.Millisecond, 30*time.Minute + time.Millisecond} {
			r := jreq("g", "", "c")
			r.SessionTimeout = d
			if res := h.joinNow(r); res.Code != codeInvalidSessionTimeout {
				t.Fatalf("session timeout %v: code %d, want INVALID_SESSION_TIMEOUT", d, res.Code)
			}
		}
		if res := h.joinNow(jreq("", "", "c")); res.Code != codeInvalidGroupID {
			t.Fatalf("empty group id: code %d, want INVALID_GROUP_ID", res.Code)
		}
		if _, code := h.c.CommitOffsets(h.ctx, "", "", "", -1, nil); code != 0 {
			t.Fatalf("standalone commit with an empty group id: code %d, want NONE (Kafka takes it)", code)
		}
		long := jreq("g", "", "long")
		long.SessionTimeout, long.RebalanceTimeout = 6*time.Second, time.Hour
		none := jreq("g", "", "none")
		none.SessionTimeout, none.RebalanceTimeout = 30*time.Minute, 0
		cl, cn := h.join(long), h.join(none)
		synctest.Wait()
		byClient := map[string]fsm.Member{}
		for _, m := range h.describe("g").Members {
			byClient[m.ClientID] = m
		}
		if got := byClient["long"]; got.SessionTimeoutMs != 6000 || got.RebalanceTimeoutMs != int32((5*time.Minute).Milliseconds()) {
			t.Fatalf("rebalance timeout of 1h stored as %dms, want the 5min maximum", got.RebalanceTimeoutMs)
		}
		if got := byClient["none"]; got.RebalanceTimeoutMs != int32((30 * time.Minute).Milliseconds()) {
			t.Fatalf("rebalance timeout 0 stored as %dms, want the session timeout", got.RebalanceTimeoutMs)
		}
		h.advance(initialDelay)
		ready(t, cl, "join")
		ready(t, cn, "join")
	})
}

func TestGroupMaxSizeCountsPendingMemberIDs(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{MaxGroupMembers: 3})
		v3 := func(member, client string) JoinRequest {
			r := jreq("g", member, client)
			r.SessionTimeout = 30 * time.Second
			return r
		}
		v4 := func(member, client string) JoinRequest {
			r := jreq("g", member, client)
			r.RequireKnownMemberID = true
			return r
		}
		ca := h.join(v3("", "ca"))
		cb := h.join(v3("", "cb"))
		synctest.Wait()
		if r := h.joinNow(v4("", "cc")); r.Code != codeMemberIDRequired {
			t.Fatalf("third member: code %d, want MEMBER_ID_REQUIRED", r.Code)
		}
		if r := h.joinNow(v4("", "cd")); r.Code != codeGroupMaxSize {
			t.Fatalf("fourth member (2 members + 1 pending id): code %d, want GROUP_MAX_SIZE_REACHED", r.Code)
		}
		h.advance(initialDelay)
		ra, rb := ready(t, ca, "join"), ready(t, cb, "join")
		if ra.Code != 0 || rb.Code != 0 || ra.Generation != 1 {
			t.Fatalf("joins %+v %+v", ra, rb)
		}
		// The pending id runs out: room again.
		h.advance(testSession - initialDelay + time.Millisecond)
		h.c.expirePending()
		again := h.joinNow(v4("", "cd"))
		if again.Code != codeMemberIDRequired {
			t.Fatalf("join after the pending id expired: code %d, want MEMBER_ID_REQUIRED", again.Code)
		}
		cd := h.join(v4(again.MemberID, "cd"))
		parked(t, cd, "join of the third member")
		if g := h.describe("g"); len(g.Members) != 3 {
			t.Fatalf("members %v", memberIDs(g))
		}
		// Full with members: refused with or without KIP-394.
		if r := h.joinNow(v3("", "ce")); r.Code != codeGroupMaxSize {
			t.Fatalf("v3 join into a full group: code %d, want GROUP_MAX_SIZE_REACHED", r.Code)
		}
		if r := h.joinNow(v4("", "ce")); r.Code != codeGroupMaxSize {
			t.Fatalf("v4 join into a full group: code %d, want GROUP_MAX_SIZE_REACHED", r.Code)
		}
		// Members of a full group still rejoin.
		ca = h.join(v3(ra.MemberID, "ca"))
		cb = h.join(v3(rb.MemberID, "cb"))
		for _, ch := range []<-chan JoinResult{ca, cb, cd} {
			if r := ready(t, ch, "rejoin"); r.Code != 0 || r.Generation != 2 {
				t.Fatalf("rejoin: %+v", r)
			}
		}
	})
}

func TestMaxGroupsReclaimsEmptyGroupsWithoutOffsets(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{MaxGroups: 2})
		v4 := jreq("g1", "", "ca")
		v4.RequireKnownMemberID = true
		id := h.joinNow(v4).MemberID
		v4.MemberID = id
		c1 := h.join(v4)
		parked(t, c1, "join g1")
		if codes, code := h.c.CommitOffsets(h.ctx, "g2", "", "", -1, []fsm.OffsetCommit{{Topic: "t", Offset: 5}}); code != 0 || !slices.Equal(codes, []int16{0}) {
			t.Fatalf("standalone commit: %v %d", codes, code)
		}
		if r := h.joinNow(jreq("g3", "", "cx")); r.Code != codeNotAvailable {
			t.Fatalf("join of a third group at the cap: code %d, want COORDINATOR_NOT_AVAILABLE", r.Code)
		}
		if _, code := h.c.CommitOffsets(h.ctx, "g4", "", "", -1, []fsm.OffsetCommit{{Topic: "t", Offset: 5}}); code != codeNotAvailable {
			t.Fatalf("standalone commit to a third group at the cap: code %d, want COORDINATOR_NOT_AVAILABLE", code)
		}
		// g1 becomes Empty without offsets: it can be reclaimed.
		if codes, code := h.c.Leave(h.ctx, "g1", []LeaveMember{{MemberID: id}}); code != 0 || !slices.Equal(codes, []int16{0}) {
			t.Fatalf("leave: %v %d", codes, code)
		}
		if r := ready(t, c1, "parked join of the leaver"); r.Code != codeUnknownMember {
			t.Fatalf("parked join: %d", r.Code)
		}
		c3 := h.join(jreq("g3", "", "cx"))
		parked(t, c3, "join g3")
		groups, code := h.c.ListGroups()
		var names []string
		for _, g := range groups {
			names = append(names, g.ID)
		}
		if code != 0 || !slices.Equal(names, []string{"g2", "g3"}) {
			t.Fatalf("groups %v, want [g2 g3] (g1 reclaimed, g2 kept for its offsets)", names)
		}
		h.advance(initialDelay)
		if r := ready(t, c3, "join g3"); r.Code != 0 {
			t.Fatalf("join g3: %+v", r)
		}
	})
}

func TestMaxMetadataBytes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{MaxMetadataBytes: 16})
		r := jreq("g", "", "c")
		r.Protocols = []fsm.Protocol{{Name: "range", Metadata: bytes.Repeat([]byte{1}, 17)}}
		if res := h.joinNow(r); res.Code != codeInvalidRequest {
			t.Fatalf("17 bytes of metadata: code %d, want INVALID_REQUEST", res.Code)
		}
		r.Protocols[0].Metadata = r.Protocols[0].Metadata[:16]
		ch := h.join(r)
		h.advance(initialDelay)
		res := ready(t, ch, "join")
		if res.Code != 0 {
			t.Fatalf("16 bytes of metadata: %+v", res)
		}
		big := []fsm.Assignment{{MemberID: res.MemberID, Assignment: bytes.Repeat([]byte{1}, 17)}}
		if s := h.syncNow(SyncRequest{Group: "g", MemberID: res.MemberID, Generation: 1, Assignments: big}); s.Code != codeInvalidRequest {
			t.Fatalf("17 bytes of assignment: code %d, want INVALID_REQUEST", s.Code)
		}
		if g := h.describe("g"); g.State != fsm.GroupCompletingRebalance {
			t.Fatalf("refused sync changed the group: %s", g.State)
		}
	})
}

func TestCommitAndFetchOffsets(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ids, _ := h.stable(jreq("g", "", "ca"), jreq("g", "", "cb"))
		a := ids[0]
		commit := func(group, member string, gen int32, offs ...fsm.OffsetCommit) ([]int16, int16) {
			return h.c.CommitOffsets(h.ctx, group, member, "", gen, offs)
		}
		big := strings.Repeat("m", fsm.MaxOffsetMetadata+1)
		codes, code := commit("g", a, 1,
			fsm.OffsetCommit{Topic: "t", Partition: 0, Offset: 10, LeaderEpoch: 3, Metadata: "ok"},
			fsm.OffsetCommit{Topic: "t", Partition: 1, Offset: 20, Metadata: big},
			fsm.OffsetCommit{Topic: "u", Partition: 0, Offset: 30, Metadata: strings.Repeat("m", fsm.MaxOffsetMetadata)})
		if code != 0 || !slices.Equal(codes, []int16{0, codeOffsetMetadataTooBig, 0}) {
			t.Fatalf("commit codes %v %d", codes, code)
		}
		if _, code := commit("g", a, 2, fsm.OffsetCommit{Topic: "t", Offset: 99}); code != codeIllegalGeneration {
			t.Fatalf("commit with a wrong generation: %d, want ILLEGAL_GENERATION", code)
		}
		if _, code := commit("g", "nobody", 1, fsm.OffsetCommit{Topic: "t", Offset: 99}); code != codeUnknownMember {
			t.Fatalf("commit of an unknown member: %d, want UNKNOWN_MEMBER_ID", code)
		}
		if _, code := commit("g", "", -1, fsm.OffsetCommit{Topic: "t", Offset: 99}); code != codeUnknownMember {
			t.Fatalf("standalone commit into a group with members: %d, want UNKNOWN_MEMBER_ID", code)
		}
		offs, code := h.c.FetchOffsets("g")
		want := map[fsm.TopicPartition]fsm.Offset{
			{Topic: "t", Partition: 0}: {Offset: 10, LeaderEpoch: 3, Metadata: "ok"},
			{Topic: "u", Partition: 0}: {Offset: 30, Metadata: strings.Repeat("m", fsm.MaxOffsetMetadata)},
		}
		if code != 0 || len(offs) != len(want) {
			t.Fatalf("fetch: %v %d", offs, code)
		}
		for tp, w := range want {
			got := offs[tp]
			if got.Offset != w.Offset || got.LeaderEpoch != w.LeaderEpoch || got.Metadata != w.Metadata {
				t.Fatalf("fetch %v = %+v, want %+v", tp, got, w)
			}
		}

		// During CompletingRebalance commits wait for the new assignment.
		cc := h.join(jreq("c", "", "cc"))
		h.advance(initialDelay)
		rc := ready(t, cc, "join")
		if _, code := commit("c", rc.MemberID, 1, fsm.OffsetCommit{Topic: "t", Offset: 1}); code != codeRebalanceInProgress {
			t.Fatalf("commit while completing the rebalance: %d, want REBALANCE_IN_PROGRESS", code)
		}

		// Standalone consumers: generation -1, no member id, unknown or Empty group.
		if codes, code := commit("solo", "", -1, fsm.OffsetCommit{Topic: "t", Partition: 2, Offset: 7}); code != 0 || !slices.Equal(codes, []int16{0}) {
			t.Fatalf("standalone commit: %v %d", codes, code)
		}
		if offs, _ := h.c.FetchOffsets("solo"); offs[fsm.TopicPartition{Topic: "t", Partition: 2}].Offset != 7 {
			t.Fatalf("standalone fetch: %v", offs)
		}
		if _, code := h.c.Leave(h.ctx, "g", []LeaveMember{{MemberID: ids[0]}, {MemberID: ids[1]}}); code != 0 {
			t.Fatal(code)
		}
		if codes, code := commit("g", "", -1, fsm.OffsetCommit{Topic: "t", Partition: 0, Offset: 11}); code != 0 || !slices.Equal(codes, []int16{0}) {
			t.Fatalf("standalone commit into the now Empty group: %v %d", codes, code)
		}
		if offs, _ := h.c.FetchOffsets("g"); offs[fsm.TopicPartition{Topic: "t", Partition: 0}].Offset != 11 {
			t.Fatalf("fetch: %v", offs)
		}
		if offs, code := h.c.FetchOffsets("unknown"); code != 0 || len(offs) != 0 {
			t.Fatalf("fetch of an unknown group: %v %d", offs, code)
		}
	})
}

func TestOffsetsExpireAfterRetentionSinceGroupEmpty(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{OffsetsRetention: time.Hour})
		r := jreq("g", "", "ca")
		r.SessionTimeout = 30 * time.Minute
		ids, _ := h.stable(r)
		a := ids[0]
		tp := fsm.TopicPartition{Topic: "t", Partition: 0}
		if _, code := h.c.CommitOffsets(h.ctx, "g", a, "", 1, []fsm.OffsetCommit{{Topic: "t", Offset: 42}}); code != 0 {
			t.Fatal(code)
		}
		if _, code := h.c.CommitOffsets(h.ctx, "solo", "", "", -1, []fsm.OffsetCommit{{Topic: "t", Offset: 7}}); code != 0 {
			t.Fatal(code)
		}
		for range 6 { // two hours with a live member
			h.advance(20 * time.Minute)
			if code := h.hb("g", a, "", 1); code != 0 {
				t.Fatalf("heartbeat %d", code)
			}
		}
		h.c.expireOffsets(h.ctx)
		if offs, _ := h.c.FetchOffsets("g"); offs[tp].Offset != 42 {
			t.Fatalf("offsets of a group with members expired: %v", offs)
		}
		if offs, _ := h.c.FetchOffsets("solo"); len(offs) != 0 {
			t.Fatalf("standalone offsets two hours old were kept: %v", offs)
		}
		if _, code := h.c.Leave(h.ctx, "g", []LeaveMember{{MemberID: a}}); code != 0 {
			t.Fatal(code)
		}
		h.advance(time.Hour)
		h.c.expireOffsets(h.ctx)
		if offs, _ := h.c.FetchOffsets("g"); offs[tp].Offset != 42 {
			t.Fatalf("offsets expired one retention after the commit rather than after the group became Empty: %v", offs)
		}
		h.advance(time.Millisecond)
		h.c.expireOffsets(h.ctx)
		if offs, _ := h.c.FetchOffsets("g"); len(offs) != 0 {
			t.Fatalf("offsets kept past retention since the group became Empty: %v", offs)
		}
		if g := h.describe("g"); g != nil {
			t.Fatalf("group without members and offsets kept: %+v", g)
		}
	})
}

func TestDeleteGroups(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		h.stable(jreq("busy", "", "ca"))
		if _, code := h.c.CommitOffsets(h.ctx, "idle", "", "", -1, []fsm.OffsetCommit{{Topic: "t", Offset: 1}}); code != 0 {
			t.Fatal(code)
		}
		codes := h.c.DeleteGroups(h.ctx, []string{"busy", "nope", "idle"})
		if !slices.Equal(codes, []int16{codeNonEmptyGroup, codeGroupNotFound, 0}) {
			t.Fatalf("delete codes %v, want [%d %d 0]", codes, codeNonEmptyGroup, codeGroupNotFound)
		}
		if g := h.describe("idle"); g != nil {
			t.Fatal("deleted group still described")
		}
		if offs, _ := h.c.FetchOffsets("idle"); len(offs) != 0 {
			t.Fatalf("deleted group's offsets: %v", offs)
		}
		if g := h.describe("busy"); g == nil || g.State != fsm.GroupStable {
			t.Fatal("refused delete changed the group")
		}
	})
}

func TestDescribeAndListGroups(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ids, leader := h.stable(jreq("g", "", "ca"), jreq("g", "", "cb"))
		if _, code := h.c.CommitOffsets(h.ctx, "solo", "", "", -1, []fsm.OffsetCommit{{Topic: "t", Offset: 1}}); code != 0 {
			t.Fatal(code)
		}
		g := h.describe("g")
		if g.ID != "g" || g.State != fsm.GroupStable || g.ProtocolType != "consumer" || g.Protocol != "range" || g.Generation != 1 || g.Leader != leader {
			t.Fatalf("describe: %+v", g)
		}
		if !slices.Equal(memberIDs(g), ids) {
			t.Fatalf("members %v, want %v", memberIDs(g), ids)
		}
		for i, m := range g.Members {
			client := []string{"ca", "cb"}[i]
			if m.ClientID != client || m.ClientHost != "/10.0.0.1" || m.SessionTimeoutMs != 10000 || m.RebalanceTimeoutMs != 20000 ||
				!bytes.Equal(m.Assignment, assignmentFor(m.ID)) || len(m.Protocols) != 1 || string(m.Protocols[0].Metadata) != "md-"+client {
				t.Fatalf("member %d: %+v", i, m)
			}
		}
		if g := h.describe("nope"); g != nil {
			t.Fatalf("unknown group described: %+v", g)
		}
		list, code := h.c.ListGroups()
		want := []fsm.GroupSummary{{ID: "g", ProtocolType: "consumer", State: fsm.GroupStable}, {ID: "solo", State: fsm.GroupEmpty}}
		if code != 0 || !slices.Equal(list, want) {
			t.Fatalf("list %+v, want %+v", list, want)
		}
	})
}

// Kafka fences a static member's previous incarnation at once: its parked
// JoinGroup is answered FENCED_INSTANCE_ID when the instance id rejoins.
func TestStaticRejoinFencesParkedJoinOfOldMemberID(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		ra, rb := jreq("g", "", "ca"), jreq("g", "", "cb")
		ra.InstanceID = "instance-a"
		ids, _ := h.stable(ra, rb)
		cc := h.join(jreq("g", "", "cc")) // a rebalance starts
		ra.MemberID = ids[0]
		old := h.join(ra) // the old incarnation rejoins and parks
		parked(t, old, "rejoin of the old incarnation")
		ra.MemberID = ""
		restarted := h.join(ra) // the same instance id, restarted
		if r := ready(t, old, "parked join of the replaced member id"); r.Code != codeFencedInstance {
			t.Fatalf("parked join of the replaced member id: code %d, want FENCED_INSTANCE_ID", r.Code)
		}
		rb.MemberID = ids[1]
		cb := h.join(rb)
		for _, ch := range []<-chan JoinResult{restarted, cb, cc} {
			if r := ready(t, ch, "join"); r.Code != 0 || r.Generation != 2 {
				t.Fatalf("join: %+v", r)
			}
		}
	})
}

// A group deleted and created again waits out the initial delay like any
// new group, whatever its previous life left behind.
func TestRecreatedGroupWaitsInitialDelay(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		r := jreq("g", "", "ca")
		r.InstanceID = "instance-a"
		first := h.join(r)
		parked(t, first, "join")
		if _, code := h.c.Leave(h.ctx, "g", []LeaveMember{{InstanceID: "instance-a"}}); code != 0 {
			t.Fatal(code)
		}
		ready(t, first, "join of the member that left")
		h.advance(time.Minute)
		if codes := h.c.DeleteGroups(h.ctx, []string{"g"}); !slices.Equal(codes, []int16{0}) {
			t.Fatalf("delete: %v", codes)
		}
		ca := h.join(jreq("g", "", "ca"))
		parked(t, ca, "first join into the recreated group")
		cb := h.join(jreq("g", "", "cb"))
		h.advance(initialDelay - time.Millisecond)
		parked(t, ca, "first join into the recreated group")
		h.advance(time.Millisecond)
		ra, rb := ready(t, ca, "join a"), ready(t, cb, "join b")
		if ra.Code != 0 || rb.Code != 0 || ra.Generation != 1 || rb.Generation != 1 {
			t.Fatalf("joins: %+v %+v", ra, rb)
		}
	})
}

// Two consumers join a new group at the same moment: whichever request's
// bookkeeping runs first, the group waits out the initial delay.
func TestConcurrentFirstJoinsWaitInitialDelay(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		hold := make(chan struct{})
		release := sync.OnceFunc(func() { close(hold) })
		defer release()
		h.raft.applied = func(cmd fsm.Command) {
			if j, ok := cmd.(*fsm.JoinGroup); ok && j.ClientID == "ca" {
				<-hold // a's join is applied; its reply is slow
			}
		}
		ca := h.join(jreq("g", "", "ca"))
		synctest.Wait()
		if g := h.fsm.Group("g"); g == nil || len(g.Members) != 1 {
			t.Fatal("a's join not applied")
		}
		cb := h.join(jreq("g", "", "cb")) // finds the group already PreparingRebalance
		parked(t, cb, "join of b while a's join is in flight")
		release()
		parked(t, ca, "join of a")
		parked(t, cb, "join of b")
		h.advance(initialDelay - time.Millisecond)
		parked(t, cb, "join of b")
		h.advance(time.Millisecond)
		for _, ch := range []<-chan JoinResult{ca, cb} {
			if r := ready(t, ch, "join"); r.Code != 0 || r.Generation != 1 {
				t.Fatalf("join: %+v", r)
			}
		}
	})
}

// TestPendingMemberIDsCountAgainstMaxMembers: KIP-394 member ids handed out
// in any group count against MaxMembers with the members, so first joins to
// ever new groups (which keep only soft state until the member comes back)
// cannot grow the coordinator's memory without bound.
func TestPendingMemberIDsCountAgainstMaxMembers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{MaxMembers: 3})
		first := func(group string) JoinResult {
			r := jreq(group, "", "c-"+group)
			r.RequireKnownMemberID = true
			return h.joinNow(r)
		}
		var ids []string
		for i := range 3 {
			r := first(fmt.Sprintf("g%d", i))
			if r.Code != codeMemberIDRequired {
				t.Fatalf("first join %d: code %d, want MEMBER_ID_REQUIRED", i, r.Code)
			}
			ids = append(ids, r.MemberID)
		}
		for i := 3; i < 100; i++ {
			if r := first(fmt.Sprintf("g%d", i)); r.Code != codeNotAvailable {
				t.Fatalf("first join %d past 3 pending ids: code %d, want COORDINATOR_NOT_AVAILABLE", i, r.Code)
			}
		}
		h.c.expirePending()
		h.c.mu.Lock()
		soft := len(h.c.groups)
		h.c.mu.Unlock()
		if soft > 3 {
			t.Fatalf("soft state kept for %d groups, want at most the 3 with pending ids", soft)
		}
		// A pending id that comes back becomes a member: still 3 in all.
		r := jreq("g0", ids[0], "c-g0")
		r.RequireKnownMemberID = true
		parked(t, h.join(r), "join of g0's member")
		if r := first("g-more"); r.Code != codeNotAvailable {
			t.Fatalf("first join with 1 member and 2 pending ids: code %d, want COORDINATOR_NOT_AVAILABLE", r.Code)
		}
		// The other two pending ids run out: room for two more.
		h.advance(testSession + time.Millisecond)
		h.c.expirePending()
		for _, g := range []string{"g-a", "g-b"} {
			if r := first(g); r.Code != codeMemberIDRequired {
				t.Fatalf("first join to %s after pending ids expired: code %d, want MEMBER_ID_REQUIRED", g, r.Code)
			}
		}
		if r := first("g-c"); r.Code != codeNotAvailable {
			t.Fatalf("first join past the cap again: code %d, want COORDINATOR_NOT_AVAILABLE", r.Code)
		}
	})
}
