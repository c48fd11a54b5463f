package coordinator

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
)

// run follows the test Raft's leadership as the cluster's leader
// lifecycle does: Lead runs while the test Raft says this node is the
// serving leader, and a loss waits for Lead to return before anything else.
func (h *harness) run() {
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var endTerm func()
		defer func() {
			if endTerm != nil {
				endTerm()
			}
		}()
		for {
			changed := h.raft.LeaderChanged()
			switch leader := h.raft.IsLeader(); {
			case leader && endTerm == nil:
				termCtx, stop := context.WithCancel(ctx)
				ended := make(chan struct{})
				go func() { h.c.Lead(termCtx); close(ended) }()
				endTerm = func() { stop(); <-ended }
			case !leader && endTerm != nil:
				endTerm()
				endTerm = nil
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			h.t.Error("Lead did not return after its context ended")
		}
	})
	synctest.Wait()
}

// switchLeader changes the test Raft's leadership and lets Run follow.
func (h *harness) switchLeader(leader, raftLeader bool) {
	h.raft.set(leader, raftLeader)
	synctest.Wait()
}

func TestLoadInProgressAndNotCoordinator(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		h.raft.set(false, true) // Raft leader, FSM still catching up
		h.run()
		check := func(want, wantHeartbeat int16) {
			t.Helper()
			if r := h.joinNow(jreq("g", "", "c")); r.Code != want {
				t.Errorf("join: %d, want %d", r.Code, want)
			}
			if r := h.syncNow(SyncRequest{Group: "g", MemberID: "m", Generation: 1}); r.Code != want {
				t.Errorf("sync: %d, want %d", r.Code, want)
			}
			if _, code := h.c.CommitOffsets(h.ctx, "g", "", "", -1, []fsm.OffsetCommit{{Topic: "t"}}); code != want {
				t.Errorf("commit: %d, want %d", code, want)
			}
			if _, code := h.c.FetchOffsets("g"); code != want {
				t.Errorf("fetch: %d, want %d", code, want)
			}
			if _, code := h.c.Leave(h.ctx, "g", []LeaveMember{{MemberID: "m"}}); code != want {
				t.Errorf("leave: %d, want %d", code, want)
			}
			if _, code := h.c.DescribeGroup("g"); code != want {
				t.Errorf("describe: %d, want %d", code, want)
			}
			if codes := h.c.DeleteGroups(h.ctx, []string{"g"}); len(codes) != 1 || codes[0] != want {
				t.Errorf("delete: %v, want [%d]", codes, want)
			}
			if code := h.hb("g", "m", "", 1); code != wantHeartbeat {
				t.Errorf("heartbeat: %d, want %d", code, wantHeartbeat)
			}
		}
		check(codeLoadInProgress, codeNone)
		if _, code := h.c.ListGroups(); code != codeLoadInProgress {
			t.Errorf("list groups while loading: %d", code)
		}

		h.switchLeader(false, false)
		check(codeNotCoordinator, codeNotCoordinator)
		if groups, code := h.c.ListGroups(); code != 0 || len(groups) != 0 {
			t.Errorf("list groups on a follower: %v %d, want none", groups, code)
		}

		h.switchLeader(true, true)
		if code := h.c.Status(); code != 0 {
			t.Fatalf("status on the serving leader: %d", code)
		}
		if g := h.fsm.Group("g"); g != nil {
			t.Fatalf("refused requests created group state: %+v", g)
		}
	})
}

func TestLeadershipLossAnswersParkedRequests(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		h.run()
		// Group "s": a follower parked in SyncGroup.
		ca := h.join(jreq("s", "", "ca"))
		cb := h.join(jreq("s", "", "cb"))
		h.advance(initialDelay)
		ra, rb := ready(t, ca, "join"), ready(t, cb, "join")
		follower := ra.MemberID
		if follower == ra.Leader {
			follower = rb.MemberID
		}
		sync := h.sync(SyncRequest{Group: "s", MemberID: follower, Generation: 1})
		parked(t, sync, "follower sync")
		// Group "j": a member parked in JoinGroup.
		join := h.join(jreq("j", "", "cj"))
		parked(t, join, "join")

		start := h.clk.Now()
		h.switchLeader(false, false)
		if r := ready(t, join, "parked join after leadership loss"); r.Code != codeNotCoordinator {
			t.Fatalf("parked join: code %d, want NOT_COORDINATOR", r.Code)
		}
		if r := ready(t, sync, "parked sync after leadership loss"); r.Code != codeNotCoordinator {
			t.Fatalf("parked sync: code %d, want NOT_COORDINATOR", r.Code)
		}
		if !h.clk.Now().Equal(start) {
			t.Fatal("the clock moved")
		}
		if code := h.hb("s", follower, "", 1); code != codeNotCoordinator {
			t.Fatalf("heartbeat on a follower: %d", code)
		}
		// Timers of the lost term do nothing: the join window of "j" and
		// the sync window of "s" pass without a state change.
		h.advance(time.Minute)
		if g := h.fsm.Group("j"); g.State != fsm.GroupPreparingRebalance || len(g.Members) != 1 {
			t.Fatalf("group j changed while not leader: %s %v", g.State, memberIDs(g))
		}
		if g := h.fsm.Group("s"); g.State != fsm.GroupCompletingRebalance || len(g.Members) != 2 {
			t.Fatalf("group s changed while not leader: %s %v", g.State, memberIDs(g))
		}
	})
}

func TestRegainedLeadershipRearmsSessionsFromNow(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		h.run()
		ids, _ := h.stable(jreq("g", "", "ca"), jreq("g", "", "cb"))
		h.advance(testSession - 2*time.Second) // both have 2s left

		h.switchLeader(false, false)
		h.advance(time.Minute) // long enough to expire everyone, were timers running
		if g := h.fsm.Group("g"); len(g.Members) != 2 {
			t.Fatalf("members removed while not leader: %v", memberIDs(g))
		}

		h.switchLeader(true, true)
		h.advance(testSession - time.Millisecond)
		g := h.describe("g")
		if g.State != fsm.GroupStable || len(g.Members) != 2 {
			t.Fatalf("a session shorter than a full session after re-election: %s %v", g.State, memberIDs(g))
		}
		// The fresh sessions are real: without heartbeats they run out.
		h.advance(time.Millisecond)
		g = h.describe("g")
		if g.State != fsm.GroupEmpty || len(g.Members) != 0 {
			t.Fatalf("sessions did not expire a full session after re-election: %s %v", g.State, memberIDs(g))
		}
		if code := h.hb("g", ids[0], "", 1); code != codeUnknownMember {
			t.Fatalf("heartbeat of an expired member: %d", code)
		}
	})
}

func TestJoinRetryAfterReelection(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		h.run()
		join := h.join(jreq("g", "", "ca"))
		parked(t, join, "join")
		h.switchLeader(false, false)
		if r := ready(t, join, "join"); r.Code != codeNotCoordinator {
			t.Fatalf("parked join: %d", r.Code)
		}
		id := h.fsm.Group("g").Members[0].ID
		h.switchLeader(true, true)
		// The client retries with its member id and gets the generation
		// the new term's join window produced.
		again := h.join(jreq("g", id, "ca"))
		h.advance(testRebalance)
		if r := ready(t, again, "join after re-election"); r.Code != 0 || r.Generation != 1 || r.Leader != id {
			t.Fatalf("join after re-election: %+v", r)
		}
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls cond (real time, bounded).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer", what)
	}
	var zero T
	return zero
}

// TestWithSingleNodeCluster checks the wiring with a real Raft node.
func TestWithSingleNodeCluster(t *testing.T) {
	discard := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	f, err := fsm.Open(fsm.Options{Dir: dir, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	node, err := cluster.Start(cluster.Config{NodeID: 1, DataDir: dir, RaftAddr: freeAddr(t), KafkaAddr: "127.0.0.1:9092",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, Logger: discard}, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := node.WaitLeader(ctx); err != nil {
		t.Fatalf("no leader: %v", err)
	}

	clk := newFakeClock()
	c := New(Config{Clock: clk, Logger: discard}, node, f)
	node.RunWhileLeader("group coordinator", c.Lead)
	eventually(t, "the coordinator to serve", func() bool { return c.Status() == 0 })

	// hasSession reports whether n members of g have joined and their
	// Join calls have armed their soft state.
	hasSessions := func(n int) func() bool {
		return func() bool {
			g := f.Group("g")
			if g == nil || len(g.Members) != n {
				return false
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			sg := c.groups["g"]
			if sg == nil || sg.joinTimer == nil {
				return false
			}
			for _, m := range g.Members {
				if sg.sessions[m.ID] == nil {
					return false
				}
			}
			return true
		}
	}
	join := func(r JoinRequest) <-chan JoinResult {
		ch := make(chan JoinResult, 1)
		go func() { ch <- c.Join(ctx, r) }()
		return ch
	}
	ca := join(jreq("g", "", "ca"))
	eventually(t, "first join", hasSessions(1))
	cb := join(jreq("g", "", "cb"))
	eventually(t, "second join", hasSessions(2))
	clk.Advance(initialDelay)
	ra, rb := recv(t, ca, "join a"), recv(t, cb, "join b")
	if ra.Code != 0 || rb.Code != 0 || ra.Generation != 1 || ra.Leader != rb.Leader {
		t.Fatalf("joins: %+v %+v", ra, rb)
	}
	leader, follower := ra, rb
	if rb.MemberID == rb.Leader {
		leader, follower = rb, ra
	}
	fch := make(chan SyncResult, 1)
	go func() { fch <- c.Sync(ctx, SyncRequest{Group: "g", MemberID: follower.MemberID, Generation: 1}) }()
	ls := c.Sync(ctx, SyncRequest{Group: "g", MemberID: leader.MemberID, Generation: 1, Assignments: []fsm.Assignment{
		{MemberID: leader.MemberID, Assignment: []byte("L")}, {MemberID: follower.MemberID, Assignment: []byte("F")}}})
	if ls.Code != 0 || string(ls.Assignment) != "L" {
		t.Fatalf("leader sync: %+v", ls)
	}
	if fs := recv(t, fch, "follower sync"); fs.Code != 0 || string(fs.Assignment) != "F" {
		t.Fatalf("follower sync: %+v", fs)
	}
	if code := c.Heartbeat("g", follower.MemberID, "", 1); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	codes, code := c.CommitOffsets(ctx, "g", leader.MemberID, "", 1, []fsm.OffsetCommit{{Topic: "t", Partition: 3, Offset: 77}})
	if code != 0 || len(codes) != 1 || codes[0] != 0 {
		t.Fatalf("commit: %v %d", codes, code)
	}
	offs, code := c.FetchOffsets("g")
	if code != 0 || offs[fsm.TopicPartition{Topic: "t", Partition: 3}].Offset != 77 {
		t.Fatalf("fetch: %v %d", offs, code)
	}
	if f.ClusterID() == "" {
		t.Fatal("the leader did not set a cluster id")
	}
}
