package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestGroupMixedRange puts a Java, a librdkafka (confluent-kafka-python) and
// a franz-go member with the range assignor in all three into one group on
// a 6-partition topic. Whichever of them the coordinator makes leader
// computes the assignment for all: range over one topic gives each member
// two consecutive partitions. Then every record is read once by the member
// owning its partition, and after the librdkafka member leaves the other two
// get three consecutive partitions each.
func TestGroupMixedRange(t *testing.T) {
	progs := []groupProgram{javaGroupProgram(t), confluentGroupProgram(t), franzGroupProgram(t)}
	srv := startGroupKgate(t)
	bootstrap := srv.bootstrap()
	adm := newGroupAdmin(t, bootstrap)
	topic, group := "groups-mixed", "group-mixed"
	createGroupTopic(t, adm, topic, groupPartitions)

	var members []*groupMember
	for _, prog := range progs {
		members = append(members, startGroupMember(t, prog, bootstrap, topic, group, "mixed-"+prog.name,
			"assignor=range", fmt.Sprintf("session=%d", groupSessionMs)))
	}
	waitGroupBalanced(t, "java, librdkafka and franz-go members: disjoint range assignments covering 6 partitions",
		groupJoinTimeout, adm, group, topic, members)
	checkGroupRangeShape(t, members, 2)
	step(t, "DescribeGroups: protocol range", groupStepTimeout, func(ctx context.Context) error {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		if p := ds[group].Protocol; p != "range" {
			return fmt.Errorf("protocol %q, want range", p)
		}
		return nil
	})

	const perPartition = 50
	produceGroupRecords(t, bootstrap, topic, groupPartitions, 0, groupPartitions*perPartition)
	waitGroupCond(t, "every record read and committed", groupStepTimeout, members, func(ctx context.Context) (bool, string) {
		if ok, desc := groupCoversOffsets(groupRecordsOf(members), groupPartitions, 0, perPartition); !ok {
			return false, desc
		}
		return groupCommittedAt(ctx, adm, group, topic, groupPartitions, perPartition)
	})
	recs := groupRecordsOf(members)
	checkGroupRecordKeys(t, recs, groupPartitions)
	for _, m := range members {
		s := m.state()
		for _, r := range s.records {
			if !slices.Contains(s.assigned, r.p) {
				t.Errorf("member %s read partition %d, which is not in its assignment %v", s.clientID, r.p, s.assigned)
			}
		}
	}
	for key, n := range countGroupRecords(recs) {
		if n != 1 {
			t.Errorf("partition %d offset %d read %d times in a stable group, want once", key[0], key[1], n)
		}
	}

	members[1].close()
	rest := []*groupMember{members[0], members[2]}
	waitGroupBalanced(t, "librdkafka member left: java and franz-go cover 6 partitions", groupStepTimeout, adm, group, topic, rest)
	checkGroupRangeShape(t, rest, 3)
	closeGroupMembers(t, rest)
}

// checkGroupRangeShape checks that each member holds per consecutive partitions,
// as the range assignor gives out for a single topic.
func checkGroupRangeShape(t *testing.T, members []*groupMember, per int) {
	t.Helper()
	for _, s := range groupMemberStates(members) {
		ok := len(s.assigned) == per
		for i := 1; ok && i < len(s.assigned); i++ {
			ok = s.assigned[i] == s.assigned[i-1]+1
		}
		if !ok || s.assigned[0]%int32(per) != 0 {
			t.Errorf("member %s assigned %v, want %d consecutive partitions starting at a multiple of %d (range)",
				s.clientID, s.assigned, per, per)
		}
	}
}
