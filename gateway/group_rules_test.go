package gateway_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's classic group rules, request by request. Each test runs against
// an in-process kgate node and, when KGATE_COMPARE_KAFKA names a Kafka
// broker (scripts/kafka-broker.sh start prints one), against that broker
// too, so the expected codes are Kafka's own.
func groupTargets(t *testing.T, run func(t *testing.T, addr string)) {
	t.Run("kgate", func(t *testing.T) {
		n := startGroupNode(t)
		createTopic(t, n.addr, "a", 1, nil)
		createTopic(t, n.addr, "b", 1, nil)
		run(t, n.addr)
	})
	if addr := os.Getenv("KGATE_COMPARE_KAFKA"); addr != "" {
		t.Run("kafka", func(t *testing.T) {
			for _, name := range []string{"a", "b"} {
				c := dialRaw(t, addr)
				c.do(createTopicsReq(false, newTopic(name, 1))) // or it exists already
				awaitLeader(t, c, name)
			}
			run(t, addr)
		})
	}
}

// groupName is unique per test and target run, so a shared Kafka broker
// starts every test with fresh groups. It waits until the node c is
// connected to coordinates the group (Kafka creates its offsets topic on
// the first FindCoordinator).
func groupName(t *testing.T, c *rawConn, suffix string) string {
	t.Helper()
	group := t.Name() + "-" + suffix
	deadline := time.Now().Add(ioTimeout)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 3
		req.CoordinatorKey = group
		code := c.do(req).(*kmsg.FindCoordinatorResponse).ErrorCode
		if code == 0 { // and the coordinator has loaded the group's partition
			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.Version = 5
			dg.Groups = []string{group}
			code = c.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
		}
		if code == 0 {
			return group
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator of %s: code %d", group, code)
		}
		time.Sleep(100 * time.Millisecond) // a poll bounded by the deadline
	}
}

func consumerMetadata(topics ...string) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 0
	md.Topics = topics
	return md.AppendTo(nil)
}

func joinReq(version int16, group, member, instance, protocolType string, metadata []byte) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group, req.MemberID, req.ProtocolType = group, member, protocolType
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
	if instance != "" {
		req.InstanceID = kmsg.StringPtr(instance)
	}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", metadata
	req.Protocols = append(req.Protocols, p)
	return req
}

// joinFull joins, answering MEMBER_ID_REQUIRED with the id it gives.
func joinFull(t *testing.T, c *rawConn, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	t.Helper()
	resp := c.do(req).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode == kerr.MemberIDRequired.Code {
		req.MemberID = resp.MemberID
		resp = c.do(req).(*kmsg.JoinGroupResponse)
	}
	return resp
}

func syncReq(group, member, instance string, generation int32, assign map[string][]byte) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, member, generation
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if instance != "" {
		req.InstanceID = kmsg.StringPtr(instance)
	}
	for id, a := range assign {
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = id, a
		req.GroupAssignment = append(req.GroupAssignment, sa)
	}
	return req
}

// stableGroup makes a one-member group Stable at its first generation and
// returns the member id.
func stableGroup(t *testing.T, c *rawConn, group, instance, protocolType string, metadata []byte) string {
	t.Helper()
	jr := joinFull(t, c, joinReq(7, group, "", instance, protocolType, metadata))
	if jr.ErrorCode != 0 || jr.LeaderID != jr.MemberID {
		t.Fatalf("join %s: code %d, leader %q, member %q", group, jr.ErrorCode, jr.LeaderID, jr.MemberID)
	}
	sr := syncReq(group, jr.MemberID, instance, jr.Generation, map[string][]byte{jr.MemberID: []byte("assigned")})
	sr.ProtocolType = kmsg.StringPtr(protocolType)
	if resp := c.do(sr).(*kmsg.SyncGroupResponse); resp.ErrorCode != 0 {
		t.Fatalf("sync %s: code %d", group, resp.ErrorCode)
	}
	return jr.MemberID
}

func commitReq(version int16, group, member, instance string, generation int32, topic string, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group, req.MemberID, req.Generation = group, member, generation
	if instance != "" {
		req.InstanceID = kmsg.StringPtr(instance)
	}
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func commitCode(t *testing.T, c *rawConn, req *kmsg.OffsetCommitRequest) int16 {
	t.Helper()
	resp := c.do(req).(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("commit answer: %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestOffsetCommitChecksMemberBeforeGroupState: while a group completes a
// rebalance, a commit from an unknown member, of a stale generation or of
// a fenced instance gets that error; only a valid member of the current
// generation is told REBALANCE_IN_PROGRESS.
func TestOffsetCommitChecksMemberBeforeGroupState(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		group := groupName(t, c, "g")
		jr := joinFull(t, c, joinReq(7, group, "", "inst-1", "consumer", consumerMetadata("a")))
		if jr.ErrorCode != 0 {
			t.Fatalf("join: code %d", jr.ErrorCode)
		}
		// Joined, not synced: CompletingRebalance.
		for _, tc := range []struct {
			what             string
			member, instance string
			generation       int32
			want             *kerr.Error
		}{
			{"unknown member", "nobody", "", jr.Generation, kerr.UnknownMemberID},
			{"stale generation", jr.MemberID, "inst-1", jr.Generation + 5, kerr.IllegalGeneration},
			{"fenced instance", "other-id", "inst-1", jr.Generation, kerr.FencedInstanceID},
			{"valid member", jr.MemberID, "inst-1", jr.Generation, kerr.RebalanceInProgress},
		} {
			if got := commitCode(t, c, commitReq(8, group, tc.member, tc.instance, tc.generation, "a", 1)); got != tc.want.Code {
				t.Errorf("%s: code %d, want %s", tc.what, got, tc.want.Message)
			}
		}
	})
}

// TestOffsetCommitToUnknownGroup: a standalone commit (generation -1)
// creates the group; a member's commit to a group that does not exist gets
// GROUP_ID_NOT_FOUND from v9 and ILLEGAL_GENERATION before.
func TestOffsetCommitToUnknownGroup(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		if got := commitCode(t, c, commitReq(9, groupName(t, c, "v9"), "m", "", 3, "a", 1)); got != kerr.GroupIDNotFound.Code {
			t.Errorf("v9 commit to an unknown group: code %d, want GROUP_ID_NOT_FOUND", got)
		}
		if got := commitCode(t, c, commitReq(8, groupName(t, c, "v8"), "m", "", 3, "a", 1)); got != kerr.IllegalGeneration.Code {
			t.Errorf("v8 commit to an unknown group: code %d, want ILLEGAL_GENERATION", got)
		}
		solo := groupName(t, c, "solo")
		if got := commitCode(t, c, commitReq(9, solo, "", "", -1, "a", 42)); got != 0 {
			t.Fatalf("standalone commit: code %d", got)
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version = 5
		dg.Groups = []string{solo}
		if resp := c.do(dg).(*kmsg.DescribeGroupsResponse); resp.Groups[0].ErrorCode != 0 || resp.Groups[0].State != "Empty" {
			t.Fatalf("the standalone commit's group: code %d, state %q", resp.Groups[0].ErrorCode, resp.Groups[0].State)
		}
	})
}

// TestJoinKnownMemberWithOtherInstanceID: a known member id that comes
// with an instance id the group does not know is an unknown member, and a
// member's instance id never changes.
func TestJoinKnownMemberWithOtherInstanceID(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		group := groupName(t, c, "static")
		id := stableGroup(t, c, group, "inst-1", "consumer", consumerMetadata("a"))
		if resp := c.do(joinReq(7, group, id, "inst-2", "consumer", consumerMetadata("a"))).(*kmsg.JoinGroupResponse); resp.ErrorCode != kerr.UnknownMemberID.Code {
			t.Errorf("static member rejoining with another instance id: code %d, want UNKNOWN_MEMBER_ID", resp.ErrorCode)
		}
		// By member id without its instance id it is the same member, and
		// keeps its instance id.
		if resp := c.do(joinReq(7, group, id, "", "consumer", consumerMetadata("a"))).(*kmsg.JoinGroupResponse); resp.ErrorCode != 0 {
			t.Errorf("static member rejoining by member id without its instance id: code %d, want NONE", resp.ErrorCode)
		}
		dyn := groupName(t, c, "dynamic")
		did := stableGroup(t, c, dyn, "", "consumer", consumerMetadata("a"))
		if resp := c.do(joinReq(7, dyn, did, "inst-3", "consumer", consumerMetadata("a"))).(*kmsg.JoinGroupResponse); resp.ErrorCode != kerr.UnknownMemberID.Code {
			t.Errorf("dynamic member rejoining with an instance id: code %d, want UNKNOWN_MEMBER_ID", resp.ErrorCode)
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version = 5
		dg.Groups = []string{group, dyn}
		resp := c.do(dg).(*kmsg.DescribeGroupsResponse)
		want := map[string]string{group: "inst-1", dyn: ""}
		for _, g := range resp.Groups {
			if len(g.Members) != 1 {
				t.Fatalf("group %s: %d members", g.Group, len(g.Members))
			}
			got := ""
			if g.Members[0].InstanceID != nil {
				got = *g.Members[0].InstanceID
			}
			if got != want[g.Group] {
				t.Errorf("group %s: member's instance id %q, want %q", g.Group, got, want[g.Group])
			}
		}
	})
}

// TestStaticLeaderRejoinBeforeSkipAssignment: a static leader that comes
// back to a Stable group with JoinGroup v5-v8 (no SkipAssignment) is told
// its old member id leads and gets no member list, so its client syncs as
// a follower and receives the assignment in force; with v9 it gets
// SkipAssignment.
func TestStaticLeaderRejoinBeforeSkipAssignment(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		group := groupName(t, c, "g")
		md := consumerMetadata("a")
		old := stableGroup(t, c, group, "inst-1", "consumer", md)
		resp := c.do(joinReq(5, group, "", "inst-1", "consumer", md)).(*kmsg.JoinGroupResponse)
		if resp.ErrorCode != 0 || resp.MemberID == old || resp.LeaderID != old || len(resp.Members) != 0 {
			t.Fatalf("v5 rejoin of the static leader: code %d, member %q, leader %q (old id %q), %d members",
				resp.ErrorCode, resp.MemberID, resp.LeaderID, old, len(resp.Members))
		}
		sr := c.do(syncReq(group, resp.MemberID, "inst-1", resp.Generation, nil)).(*kmsg.SyncGroupResponse)
		if sr.ErrorCode != 0 || string(sr.MemberAssignment) != "assigned" {
			t.Fatalf("sync after the v5 rejoin: code %d, assignment %q", sr.ErrorCode, sr.MemberAssignment)
		}
		prev := resp.MemberID
		resp = c.do(joinReq(9, group, "", "inst-1", "consumer", md)).(*kmsg.JoinGroupResponse)
		if resp.ErrorCode != 0 || !resp.SkipAssignment || resp.LeaderID != resp.MemberID || len(resp.Members) != 1 {
			t.Fatalf("v9 rejoin of the static leader (previous id %q): code %d, skip %v, member %q, leader %q, %d members",
				prev, resp.ErrorCode, resp.SkipAssignment, resp.MemberID, resp.LeaderID, len(resp.Members))
		}
	})
}

// TestOffsetDeleteOnNonEmptyGroup: offsets of a group with members can be
// deleted only for a consumer group and only for topics it does not
// subscribe to; metadata that does not parse subscribes to everything.
func TestOffsetDeleteOnNonEmptyGroup(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		del := func(group string, topics ...string) *kmsg.OffsetDeleteResponse {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = group
			for _, name := range topics {
				rt := kmsg.NewOffsetDeleteRequestTopic()
				rt.Topic = name
				rt.Partitions = append(rt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
				req.Topics = append(req.Topics, rt)
			}
			return c.do(req).(*kmsg.OffsetDeleteResponse)
		}
		setup := func(suffix, protocolType string, md []byte) string {
			group := groupName(t, c, suffix)
			id := stableGroup(t, c, group, "", protocolType, md)
			for _, topic := range []string{"a", "b"} {
				if code := commitCode(t, c, commitReq(8, group, id, "", 1, topic, 5)); code != 0 {
					t.Fatalf("%s: commit: code %d", group, code)
				}
			}
			return group
		}
		partCodes := func(resp *kmsg.OffsetDeleteResponse) []int16 {
			var out []int16
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					out = append(out, rp.ErrorCode)
				}
			}
			return out
		}

		other := setup("connect", "connect", []byte("not consumer metadata"))
		if resp := del(other, "b"); resp.ErrorCode != kerr.NonEmptyGroup.Code {
			t.Errorf("OffsetDelete on a non-empty %q group: code %d, want NON_EMPTY_GROUP", "connect", resp.ErrorCode)
		}
		garbled := setup("garbled", "consumer", []byte{0xff, 0xff, 0xff})
		if resp := del(garbled, "b"); resp.ErrorCode != 0 || !slices.Equal(partCodes(resp), []int16{kerr.GroupSubscribedToTopic.Code}) {
			t.Errorf("OffsetDelete with unparseable subscriptions: code %d, partitions %v, want GROUP_SUBSCRIBED_TO_TOPIC", resp.ErrorCode, partCodes(resp))
		}
		cons := setup("consumer", "consumer", consumerMetadata("a"))
		if resp := del(cons, "a", "b"); resp.ErrorCode != 0 || !slices.Equal(partCodes(resp), []int16{kerr.GroupSubscribedToTopic.Code, 0}) {
			t.Errorf("OffsetDelete on a consumer group subscribed to a: code %d, partitions %v", resp.ErrorCode, partCodes(resp))
		}
	})
}

// TestOffsetCommitByAnyCurrentMember: the classic coordinator checks a
// commit's member and generation only, not which member the partition is
// assigned to nor whether the offset moves back. A member of the current
// generation that was assigned nothing commits, below the owner's commit,
// a partition another member owns: the commit is accepted and OffsetFetch
// answers the lower offset. (A chaos campaign saw a franz-go member,
// fenced while the leader was paused, rejoin and commit records it had
// read in its old generation, moving the group's offset back; Kafka
// accepts such a commit as kgate does.)
func TestOffsetCommitByAnyCurrentMember(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		ca, cb := dialRaw(t, addr), dialRaw(t, addr)
		group := groupName(t, ca, "g")
		md := consumerMetadata("a")
		a := stableGroup(t, ca, group, "", "consumer", md)
		// b joins; the group rebalances once a rejoins.
		bj := joinReq(7, group, "", "", "consumer", md)
		if r := cb.do(bj).(*kmsg.JoinGroupResponse); r.ErrorCode == kerr.MemberIDRequired.Code {
			bj.MemberID = r.MemberID
		} else {
			t.Fatalf("first join of b: code %d, want MEMBER_ID_REQUIRED", r.ErrorCode)
		}
		bCorr := cb.send(bj)
		ja := ca.do(joinReq(7, group, a, "", "consumer", md)).(*kmsg.JoinGroupResponse)
		jb := cb.recv(bCorr, bj).(*kmsg.JoinGroupResponse)
		if ja.ErrorCode != 0 || jb.ErrorCode != 0 || ja.Generation != jb.Generation {
			t.Fatalf("rebalance: a code %d generation %d, b code %d generation %d", ja.ErrorCode, ja.Generation, jb.ErrorCode, jb.Generation)
		}
		b, gen := jb.MemberID, ja.Generation
		owns := kmsg.NewConsumerMemberAssignment()
		owns.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "a", Partitions: []int32{0}}}
		none := kmsg.NewConsumerMemberAssignment()
		assign := map[string][]byte{a: owns.AppendTo(nil), b: none.AppendTo(nil)}
		leader, follower, lc, fc := a, b, ca, cb
		if ja.LeaderID == b {
			leader, follower, lc, fc = b, a, cb, ca
		}
		fs := syncReq(group, follower, "", gen, nil)
		fCorr := fc.send(fs)
		if r := lc.do(syncReq(group, leader, "", gen, assign)).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
			t.Fatalf("leader's sync: code %d", r.ErrorCode)
		}
		if r := fc.recv(fCorr, fs).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
			t.Fatalf("follower's sync: code %d", r.ErrorCode)
		}
		if got := commitCode(t, ca, commitReq(8, group, a, "", gen, "a", 10)); got != 0 {
			t.Fatalf("the owner's commit: code %d", got)
		}
		if got := commitCode(t, cb, commitReq(8, group, b, "", gen, "a", 3)); got != 0 {
			t.Fatalf("a commit below it by a member assigned nothing: code %d, want NONE", got)
		}
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version = 7
		of.Group = group
		of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "a", Partitions: []int32{0}}}
		r := ca.do(of).(*kmsg.OffsetFetchResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].Offset != 3 {
			t.Fatalf("OffsetFetch after the commits: %+v", r)
		}
	})
}

// TestSyncGroupV5WantsProtocolTypeAndName: from v5 a SyncGroup without its
// protocol type or name is INCONSISTENT_GROUP_PROTOCOL, whoever sends it;
// v4 has neither field.
func TestSyncGroupV5WantsProtocolTypeAndName(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		group := groupName(t, c, "g")
		member := stableGroup(t, c, group, "", "consumer", consumerMetadata("a"))
		noType := syncReq(group, member, "", 1, nil)
		noType.ProtocolType = nil
		noName := syncReq(group, member, "", 1, nil)
		noName.Protocol = nil
		stranger := syncReq(group+"-unknown", "m", "", 1, nil)
		stranger.ProtocolType, stranger.Protocol = nil, nil
		for what, req := range map[string]*kmsg.SyncGroupRequest{"no protocol type": noType, "no protocol name": noName, "neither, unknown group": stranger} {
			if got := c.do(req).(*kmsg.SyncGroupResponse).ErrorCode; got != kerr.InconsistentGroupProtocol.Code {
				t.Errorf("v5, %s: code %d, want INCONSISTENT_GROUP_PROTOCOL (23)", what, got)
			}
		}
		v4 := syncReq(group, member, "", 1, nil)
		v4.Version, v4.ProtocolType, v4.Protocol = 4, nil, nil
		if resp := c.do(v4).(*kmsg.SyncGroupResponse); resp.ErrorCode != 0 || string(resp.MemberAssignment) != "assigned" {
			t.Errorf("v4 by the member: code %d, assignment %q; want its assignment", resp.ErrorCode, resp.MemberAssignment)
		}
	})
}

// An empty group id is refused by every member-level request with
// INVALID_GROUP_ID, checked before anything else, as Kafka's coordinator
// does. (Kafka answers OffsetCommit, OffsetFetch, DescribeGroups and
// DeleteGroups for "" with NOT_COORDINATOR, a retriable code, as if some
// broker could coordinate it; kgate refuses them too, without a retry:
// INVALID_GROUP_ID for commits, none stored for fetches.)
func TestEmptyGroupIDIsInvalid(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		jg := kmsg.NewPtrJoinGroupRequest()
		jg.Version = 9
		jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = 10000, 10000, "consumer"
		jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.MemberID, hb.Generation = 4, "m", 1
		sg := kmsg.NewPtrSyncGroupRequest()
		sg.Version, sg.MemberID, sg.Generation = 5, "m", 1
		sg.ProtocolType, sg.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Version = 5
		lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
		od := kmsg.NewPtrOffsetDeleteRequest()
		od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "a", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		got := map[string]int16{
			"JoinGroup":    c.do(jg).(*kmsg.JoinGroupResponse).ErrorCode,
			"Heartbeat":    c.do(hb).(*kmsg.HeartbeatResponse).ErrorCode,
			"SyncGroup":    c.do(sg).(*kmsg.SyncGroupResponse).ErrorCode,
			"LeaveGroup":   c.do(lv).(*kmsg.LeaveGroupResponse).ErrorCode,
			"OffsetDelete": c.do(od).(*kmsg.OffsetDeleteResponse).ErrorCode,
		}
		for api, code := range got {
			if code != kerr.InvalidGroupID.Code {
				t.Errorf("%s with group id \"\": code %d, want INVALID_GROUP_ID (%d)", api, code, kerr.InvalidGroupID.Code)
			}
		}
	})
}

// TestEmptyAndLongGroupIDsKeepOffsets: Kafka takes the empty group id for
// the offset APIs, FindCoordinator, DescribeGroups and DeleteGroups (only
// the members' APIs and transactional commits refuse it), and a group id of
// any length the protocol carries.
func TestEmptyAndLongGroupIDsKeepOffsets(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		groupName(t, c, "warm") // Kafka creates its offsets topic on the first lookup
		long := groupName(t, c, strings.Repeat("g", 300))
		for _, v := range []int16{3, 4} {
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.Version = v
			fc.CoordinatorKey, fc.CoordinatorKeys = "", []string{""}
			resp := c.do(fc).(*kmsg.FindCoordinatorResponse)
			code := resp.ErrorCode
			if v >= 4 {
				code = resp.Coordinators[0].ErrorCode
			}
			if code != 0 {
				t.Errorf("FindCoordinator v%d of \"\": code %d, want NONE", v, code)
			}
		}
		for _, group := range []string{"", long} {
			oc := kmsg.NewPtrOffsetCommitRequest()
			oc.Version, oc.Group, oc.Generation = 8, group, -1
			oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
			if code := c.do(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Errorf("OffsetCommit to a %d-byte group id: code %d, want NONE", len(group), code)
			}
			of := kmsg.NewPtrOffsetFetchRequest()
			of.Version, of.Group = 7, group
			of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "a", Partitions: []int32{0}}}
			if p := c.do(of).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 7 {
				t.Errorf("OffsetFetch of a %d-byte group id: offset %d code %d, want 7 and NONE", len(group), p.Offset, p.ErrorCode)
			}
			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.Version, dg.Groups = 5, []string{group}
			if g := c.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != 0 || g.State != "Empty" {
				t.Errorf("DescribeGroups of a %d-byte group id: state %q code %d, want Empty and NONE", len(group), g.State, g.ErrorCode)
			}
		}
		jg := joinReq(9, long, "", "", "consumer", consumerMetadata("a"))
		if code := c.do(jg).(*kmsg.JoinGroupResponse).ErrorCode; code != kerr.MemberIDRequired.Code {
			t.Errorf("JoinGroup of a %d-byte group id: code %d, want MEMBER_ID_REQUIRED", len(long), code)
		}
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.Version, tc.TransactionalID, tc.ProducerID, tc.Generation = 3, t.Name(), 1, -1
		tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 8}}}}
		if code := c.do(tc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidGroupID.Code {
			t.Errorf("TxnOffsetCommit to group id \"\": code %d, want INVALID_GROUP_ID", code)
		}
		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Version, del.Groups = 2, []string{"", long}
		for _, g := range c.do(del).(*kmsg.DeleteGroupsResponse).Groups {
			if g.ErrorCode != 0 {
				t.Errorf("DeleteGroups of a %d-byte group id: code %d, want NONE", len(g.Group), g.ErrorCode)
			}
		}
	})
}

// TestDeleteGroupsNamesEachGroupOnce: a group named twice in one
// DeleteGroups is deleted and answered once.
func TestDeleteGroupsNamesEachGroupOnce(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		g := groupName(t, c, "g")
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.Generation = 8, g, -1
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		if code := c.do(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit: code %d", code)
		}
		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Version = 2
		del.Groups = []string{g, g}
		got := c.do(del).(*kmsg.DeleteGroupsResponse).Groups
		if len(got) != 1 || got[0].Group != g || got[0].ErrorCode != 0 {
			t.Errorf("a group named twice: answered %+v, want it once, deleted", got)
		}
	})
}
