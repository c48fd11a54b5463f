package coordinator

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
)

const (
	testSession   = 10 * time.Second
	testRebalance = 20 * time.Second
	initialDelay  = 3 * time.Second // Config default, group.initial.rebalance.delay.ms
)

// Kafka error codes as a client sees them.
var (
	codeNone                  = int16(0)
	codeOffsetMetadataTooBig  = kerr.OffsetMetadataTooLarge.Code    // 12
	codeLoadInProgress        = kerr.CoordinatorLoadInProgress.Code // 14
	codeNotAvailable          = kerr.CoordinatorNotAvailable.Code   // 15
	codeNotCoordinator        = kerr.NotCoordinator.Code            // 16
	codeIllegalGeneration     = kerr.IllegalGeneration.Code         // 22
	codeInconsistentProtocol  = kerr.InconsistentGroupProtocol.Code // 23
	codeInvalidGroupID        = kerr.InvalidGroupID.Code            // 24
	codeUnknownMember         = kerr.UnknownMemberID.Code           // 25
	codeInvalidSessionTimeout = kerr.InvalidSessionTimeout.Code     // 26
	codeRebalanceInProgress   = kerr.RebalanceInProgress.Code       // 27
	codeInvalidRequest        = kerr.InvalidRequest.Code            // 42
	codeNonEmptyGroup         = kerr.NonEmptyGroup.Code             // 68
	codeGroupNotFound         = kerr.GroupIDNotFound.Code           // 69
	codeMemberIDRequired      = kerr.MemberIDRequired.Code          // 79
	codeGroupMaxSize          = kerr.GroupMaxSizeReached.Code       // 81
	codeFencedInstance        = kerr.FencedInstanceID.Code          // 82
)

// jreq is a consumer JoinGroup (v3 style: no KIP-394) with one "range"
// protocol whose metadata names the client.
func jreq(group, member, client string) JoinRequest {
	return JoinRequest{Group: group, MemberID: member, ClientID: client, ClientHost: "/10.0.0.1",
		ProtocolType: "consumer", SessionTimeout: testSession, RebalanceTimeout: testRebalance,
		Protocols: []fsm.Protocol{{Name: "range", Metadata: []byte("md-" + client)}}}
}

func (h *harness) join(r JoinRequest) <-chan JoinResult {
	ch := make(chan JoinResult, 1)
	go func() { ch <- h.c.Join(h.ctx, r) }()
	return ch
}

func (h *harness) sync(r SyncRequest) <-chan SyncResult {
	ch := make(chan SyncResult, 1)
	go func() { ch <- h.c.Sync(h.ctx, r) }()
	return ch
}

// joinNow runs a Join that must be answered without the clock moving.
func (h *harness) joinNow(r JoinRequest) JoinResult {
	h.t.Helper()
	return ready(h.t, h.join(r), "JoinGroup")
}

func (h *harness) syncNow(r SyncRequest) SyncResult {
	h.t.Helper()
	return ready(h.t, h.sync(r), "SyncGroup")
}

func (h *harness) hb(group, member, instance string, gen int32) int16 {
	return h.c.Heartbeat(group, member, instance, gen)
}

// get waits (bounded) for a result.
func get[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer", what)
	}
	var zero T
	return zero
}

// ready returns a result that must already be there once every goroutine
// has settled, without the fake clock moving.
func ready[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	synctest.Wait()
	select {
	case v := <-ch:
		return v
	default:
		t.Fatalf("%s: not answered, still parked", what)
	}
	var zero T
	return zero
}

// parked asserts a request is still waiting.
func parked[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case v := <-ch:
		t.Fatalf("%s: answered early with %+v", what, v)
	default:
	}
}

func (h *harness) describe(group string) *fsm.GroupView {
	h.t.Helper()
	g, code := h.c.DescribeGroup(group)
	if code != 0 {
		h.t.Fatalf("DescribeGroup(%s) = code %d", group, code)
	}
	return g
}

func memberIDs(g *fsm.GroupView) []string {
	if g == nil {
		return nil
	}
	var ids []string
	for _, m := range g.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

func hasMember(g *fsm.GroupView, id string) bool {
	for _, m := range memberIDs(g) {
		if m == id {
			return true
		}
	}
	return false
}

func assignmentFor(id string) []byte { return []byte("assignment-of-" + id) }

// stable takes a new group through its first rebalance: every request
// joins (in order), the initial delay passes, the followers sync and park,
// the leader syncs assignmentFor(each member). It returns the member ids in
// join order and the leader; the group is Stable at generation 1.
func (h *harness) stable(reqs ...JoinRequest) (ids []string, leader string) {
	t := h.t
	t.Helper()
	group := reqs[0].Group
	chans := make([]<-chan JoinResult, len(reqs))
	for i, r := range reqs {
		chans[i] = h.join(r)
		synctest.Wait() // keep join order
	}
	h.advance(initialDelay)
	instance := map[string]string{}
	for i, ch := range chans {
		res := ready(t, ch, "JoinGroup of "+reqs[i].ClientID)
		if res.Code != 0 || res.Generation != 1 {
			t.Fatalf("join %s: %+v", reqs[i].ClientID, res)
		}
		ids = append(ids, res.MemberID)
		instance[res.MemberID] = reqs[i].InstanceID
		leader = res.Leader
	}
	var assigns []fsm.Assignment
	followers := map[string]<-chan SyncResult{}
	for _, id := range ids {
		assigns = append(assigns, fsm.Assignment{MemberID: id, Assignment: assignmentFor(id)})
		if id != leader {
			followers[id] = h.sync(SyncRequest{Group: group, MemberID: id, InstanceID: instance[id], Generation: 1})
		}
	}
	for id, ch := range followers {
		parked(t, ch, "follower SyncGroup of "+id)
	}
	lr := h.syncNow(SyncRequest{Group: group, MemberID: leader, InstanceID: instance[leader], Generation: 1, Assignments: assigns})
	if lr.Code != 0 || !bytes.Equal(lr.Assignment, assignmentFor(leader)) {
		t.Fatalf("leader sync: %+v", lr)
	}
	for id, ch := range followers {
		if r := ready(t, ch, "follower SyncGroup"); r.Code != 0 || !bytes.Equal(r.Assignment, assignmentFor(id)) {
			t.Fatalf("follower %s sync: %+v", id, r)
		}
	}
	if g := h.describe(group); g.State != fsm.GroupStable || g.Generation != 1 {
		t.Fatalf("group after first rebalance: %s generation %d", g.State, g.Generation)
	}
	return ids, leader
}
