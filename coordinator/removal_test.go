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
