package coordinator

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kgate/kgate/fsm"
)

// holdRemovals makes the harness's Raft hold the first RemoveMembers before
// it reaches the log: decided receives it, and it goes on when release is
// closed.
func holdRemovals(h *harness) (decided chan *fsm.RemoveMembers, release chan struct{}) {
	decided, release = make(chan *fsm.RemoveMembers, 1), make(chan struct{})
	held := false
	h.raft.mu.Lock()
	h.raft.proposing = func(cmd fsm.Command) {
		if rm, ok := cmd.(*fsm.RemoveMembers); ok && !held {
			held = true
			decided <- rm
			<-release
		}
	}
	h.raft.mu.Unlock()
	return decided, release
}

// raiseLevel sets the cluster's feature level, as the leader's feature
// service does once every voter supports it.
func (h *harness) raiseLevel(l fsm.Level) {
	h.t.Helper()
	if _, err := h.raft.Propose(h.ctx, fsm.Encode(&fsm.SetFeatureLevel{Level: l}), true); err != nil {
		h.t.Fatal(err)
	}
}

// A member's session expires on a decision made at generation 1; before the
// removal reaches the log, the member rejoins (a Stable group answers it at
// once). From LevelGuardedRemoval the removal then leaves the member alone,
// and its session goes on; below it, the coordinator still writes version 1
// (which every voter reads) and the member is removed as before.
func TestExpiryDecidedBeforeRejoinDoesNotRemoveMember(t *testing.T) {
	for _, tc := range []struct {
		level fsm.Level
		kept  bool
	}{{fsm.LevelGuardedRemoval, true}, {fsm.LevelGuardedRemoval - 1, false}} {
		t.Run(fmt.Sprintf("level %d", tc.level), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				h := activeHarness(t, Config{})
				h.raiseLevel(tc.level)
				ids, leader := h.stable(jreq("g", "", "ca"), jreq("g", "", "cb"))
				b := ids[0]
				if b == leader {
					b = ids[1]
				}
				decided, release := holdRemovals(h)
				letGo := sync.OnceFunc(func() { close(release) })
				defer letGo()

				// The leader heartbeats; b falls silent and its session expires.
				h.advance(testSession / 2)
				if code := h.hb("g", leader, "", 1); code != codeNone {
					t.Fatalf("leader heartbeat: %d", code)
				}
				expired := make(chan struct{})
				go func() { h.clk.Advance(testSession/2 + time.Millisecond); close(expired) }()
				rm := <-decided
				if !slices.Equal(rm.MemberIDs, []string{b}) {
					t.Fatalf("removal of %v, want %s", rm.MemberIDs, b)
				}
				if rm.Guard != nil && rm.Guard.Generation != 1 {
					t.Fatalf("removal decided at generation %d, want 1", rm.Guard.Generation)
				}

				// b rejoins before the removal lands.
				r := h.joinNow(JoinRequest{Group: "g", MemberID: b, ClientID: "cb", ClientHost: "/10.0.0.1", ProtocolType: "consumer",
					SessionTimeout: testSession, RebalanceTimeout: testRebalance,
					Protocols: []fsm.Protocol{{Name: "range", Metadata: []byte("md-cb")}}})
				if r.Code != codeNone || r.Generation != 1 || r.MemberID != b {
					t.Fatalf("rejoin: %+v", r)
				}
				letGo()
				<-expired
				synctest.Wait()

				g := h.describe("g")
				if !tc.kept {
					if hasMember(g, b) || g.State != fsm.GroupPreparingRebalance {
						t.Fatalf("below the level: members %v in %s, want %s removed and a rebalance", memberIDs(g), g.State, b)
					}
					return
				}
				if !hasMember(g, b) || g.State != fsm.GroupStable || g.Generation != 1 {
					t.Fatalf("members %v in %s generation %d: the rejoined member was removed", memberIDs(g), g.State, g.Generation)
				}
				// b's session goes on from its rejoin, and still ends when b
				// falls silent again.
				for i := range 4 {
					if i > 0 {
						h.advance(testSession / 2)
					}
					for _, m := range []string{leader, b} {
						if code := h.hb("g", m, "", 1); code != codeNone {
							t.Fatalf("heartbeat of %s: %d", m, code)
						}
					}
				}
				h.advance(testSession / 2)
				h.hb("g", leader, "", 1)
				h.advance(testSession/2 + time.Millisecond)
				if g := h.describe("g"); hasMember(g, b) {
					t.Fatalf("b stayed a member after its session expired again: %v", memberIDs(g))
				}
			})
		})
	}
}

// A static member falls silent. Its session expires (decided at generation
// 1) just as a rebalance's join window closes and keeps it, as static
// members are kept, into generation 2. The removal then finds the group in
// another generation and leaves it alone; the member's session, dropped by
// the decision, starts again, so the member is still removed once it has
// been silent for a session timeout in the new generation.
func TestExpiryOvertakenByRebalanceRestartsSession(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		h.raiseLevel(fsm.LevelGuardedRemoval)
		ra, rb := jreq("g", "", "ca"), jreq("g", "", "cb")
		rb.InstanceID = "instance-b"
		ids, leader := h.stable(ra, rb)
		if leader != ids[0] {
			t.Fatalf("leader %s, want the first member %s", leader, ids[0])
		}
		a, b := ids[0], ids[1]
		decided, release := holdRemovals(h)
		letGo := sync.OnceFunc(func() { close(release) })
		defer letGo()

		h.advance(testSession / 2)
		h.hb("g", a, "", 1)
		expired := make(chan struct{})
		go func() { h.clk.Advance(testSession/2 + time.Millisecond); close(expired) }()
		if rm := <-decided; !slices.Equal(rm.MemberIDs, []string{b}) || rm.Guard == nil || rm.Guard.Generation != 1 {
			t.Fatalf("removal %+v, want %s at generation 1", rm, b)
		}

		// Meanwhile a rejoins with new metadata: a rebalance, whose window
		// closes at the rebalance timeout with b kept as a static member.
		ra.MemberID = a
		ra.Protocols = []fsm.Protocol{{Name: "range", Metadata: []byte("md-ca-2")}}
		ja := h.join(ra)
		h.advance(testRebalance)
		if r := ready(t, ja, "JoinGroup of a"); r.Code != codeNone || r.Generation != 2 || r.Leader != a {
			t.Fatalf("rejoin of a: %+v", r)
		}
		letGo()
		<-expired
		synctest.Wait()
		if g := h.describe("g"); !hasMember(g, b) || g.Generation != 2 {
			t.Fatalf("members %v at generation %d: the removal decided at generation 1 applied", memberIDs(g), g.Generation)
		}
		if r := h.syncNow(SyncRequest{Group: "g", MemberID: a, Generation: 2, Assignments: []fsm.Assignment{
			{MemberID: a, Assignment: assignmentFor(a)}, {MemberID: b, Assignment: assignmentFor(b)}}}); r.Code != codeNone {
			t.Fatalf("sync of a: %+v", r)
		}

		// b stays silent: its new session ends a session timeout later,
		// well before members that never synced would be dropped.
		h.advance(testSession / 2)
		h.hb("g", a, "", 2)
		h.advance(testSession/2 + time.Millisecond)
		if g := h.describe("g"); hasMember(g, b) {
			t.Fatalf("silent member %s still in the group a session timeout later: %v", b, memberIDs(g))
		}
	})
}

// A LeaveGroup holds in any generation, but a JoinGroup of the member
// applied after the leave was resolved wins: the member stays, and the
// leave is answered NONE (it took effect, and the join after it).
func TestLeaveOvertakenByRejoin(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		h.raiseLevel(fsm.LevelGuardedRemoval)
		ra, rb := jreq("g", "", "ca"), jreq("g", "", "cb")
		ids, _ := h.stable(ra, rb)
		b := ids[1]
		decided, release := holdRemovals(h)
		letGo := sync.OnceFunc(func() { close(release) })
		defer letGo()

		left := make(chan []int16, 1)
		go func() {
			codes, code := h.c.Leave(h.ctx, "g", []LeaveMember{{MemberID: b}})
			if code != codeNone {
				t.Errorf("leave: group code %d", code)
			}
			left <- codes
		}()
		if rm := <-decided; rm.Guard == nil || rm.Guard.Generation != fsm.AnyGeneration {
			t.Fatalf("leave proposed %+v, want a removal valid in any generation", rm)
		}
		rb.MemberID = b
		if r := h.joinNow(rb); r.Code != codeNone || r.Generation != 1 {
			t.Fatalf("rejoin of b: %+v", r)
		}
		letGo()
		if codes := get(t, left, "LeaveGroup"); !slices.Equal(codes, []int16{codeNone}) {
			t.Fatalf("leave codes %v", codes)
		}
		if g := h.describe("g"); !hasMember(g, b) || g.State != fsm.GroupStable {
			t.Fatalf("members %v in %s, want %s kept in a Stable group", memberIDs(g), g.State, b)
		}
		if code := h.hb("g", b, "", 1); code != codeNone {
			t.Fatalf("heartbeat of b after its overtaken leave: %d", code)
		}
	})
}
