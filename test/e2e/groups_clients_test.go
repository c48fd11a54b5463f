package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The consumer-group scenario for one client (runGroupScenario): members of
// one group, each its own process, on a 6-partition topic.

func TestGroupFranzGo(t *testing.T) { runGroupScenario(t, franzGroupProgram(t)) }

func TestGroupConfluentKafkaPython(t *testing.T) { runGroupScenario(t, confluentGroupProgram(t)) }

func TestGroupKafkaJS(t *testing.T) { runGroupScenario(t, kafkajsGroupProgram(t)) }

func TestGroupJava(t *testing.T) { runGroupScenario(t, javaGroupProgram(t)) }

const (
	// groupScenarioPerPartition records are produced to each partition;
	// the first members process offsets below groupScenarioStopAt only.
	groupScenarioPerPartition = 100
	groupScenarioStopAt       = 40
)

// runGroupScenario:
//
//  1. four members (client ids <client>-c0..c3) join one group; their
//     assignments (as the clients report them from their rebalance callbacks
//     and as kadm DescribeGroups shows them, with client id, host and member
//     id) are disjoint and cover the 6 partitions;
//  2. 600 records are produced; the members process offsets 0..39 of each
//     partition, committing synchronously after each batch, and skip the
//     rest; each record below 40 is processed exactly once and 40 is
//     committed on every partition;
//  3. c3 closes (LeaveGroup): c0..c2 cover the 6 partitions;
//  4. c2 is killed with SIGKILL: after its session timeout (6 s) c0 and c1
//     cover the 6 partitions;
//  5. c0 and c1 close: the group is Empty and keeps its offsets;
//  6. three new members (r0..r2) start: together they begin exactly at the
//     committed offset 40 of every partition (nothing below it is read again)
//     and read every record up to 99, committing 100; a record after the
//     last commit may be read twice (a partition moving during the restarted
//     group's own rebalances), nothing is skipped.
func runGroupScenario(t *testing.T, prog groupProgram) {
	begin := time.Now()
	srv := startGroupKgate(t)
	bootstrap := srv.bootstrap()
	adm := newGroupAdmin(t, bootstrap)
	topic := "groups-" + prog.name
	group := "group-" + prog.name
	createGroupTopic(t, adm, topic, groupPartitions)

	session := fmt.Sprintf("session=%d", groupSessionMs)
	var first []*groupMember
	for i := range 4 {
		first = append(first, startGroupMember(t, prog, bootstrap, topic, group, fmt.Sprintf("%s-c%d", prog.name, i),
			session, fmt.Sprintf("stopat=%d", groupScenarioStopAt)))
	}
	waitGroupBalanced(t, "4 members: disjoint assignments covering 6 partitions", groupJoinTimeout, adm, group, topic, first)

	produceGroupRecords(t, bootstrap, topic, groupPartitions, 0, groupPartitions*groupScenarioPerPartition)
	waitGroupCond(t, fmt.Sprintf("offsets 0..%d processed and %d committed on every partition", groupScenarioStopAt-1, groupScenarioStopAt),
		groupStepTimeout, first, func(ctx context.Context) (bool, string) {
			if ok, desc := groupCoversOffsets(groupRecordsOf(first), groupPartitions, 0, groupScenarioStopAt); !ok {
				return false, desc
			}
			return groupCommittedAt(ctx, adm, group, topic, groupPartitions, groupScenarioStopAt)
		})
	checkGroupExactlyOnceBelow(t, "4 members", groupRecordsOf(first), groupScenarioStopAt)
	for _, s := range groupMemberStates(first) {
		if len(s.commitErrs) > 0 {
			t.Errorf("member %s: commit errors in a stable group: %v", s.clientID, s.commitErrs)
		}
	}

	first[3].close()
	waitGroupBalanced(t, "c3 left: c0..c2 cover 6 partitions", groupStepTimeout, adm, group, topic, first[:3])

	first[2].kill9()
	t.Logf("killed member %s with SIGKILL", first[2].clientID)
	waitGroupBalanced(t, "c2 killed: after its session timeout c0, c1 cover 6 partitions", groupStepTimeout, adm, group, topic, first[:2])

	closeGroupMembers(t, first[:2])
	step(t, "group is Empty and keeps its committed offsets", groupStepTimeout, func(ctx context.Context) error {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		if d := ds[group]; d.Err != nil || d.State != "Empty" || len(d.Members) != 0 {
			return fmt.Errorf("DescribeGroups: state %q, %d members, err %v; want Empty without members", d.State, len(d.Members), d.Err)
		}
		if ok, desc := groupCommittedAt(ctx, adm, group, topic, groupPartitions, groupScenarioStopAt); !ok {
			return fmt.Errorf("%s", desc)
		}
		return nil
	})
	firstRecs := groupRecordsOf(first)
	checkGroupRecordKeys(t, firstRecs, groupPartitions)
	checkGroupExactlyOnceBelow(t, "first members, all rebalances included", firstRecs, groupScenarioStopAt)

	var second []*groupMember
	for i := range 3 {
		second = append(second, startGroupMember(t, prog, bootstrap, topic, group, fmt.Sprintf("%s-r%d", prog.name, i), session))
	}
	end := int64(groupScenarioPerPartition)
	waitGroupCond(t, fmt.Sprintf("restarted members read offsets %d..%d and commit %d on every partition", groupScenarioStopAt, end-1, end),
		groupJoinTimeout, second, func(ctx context.Context) (bool, string) {
			if ok, desc := groupCoversOffsets(groupRecordsOf(second), groupPartitions, groupScenarioStopAt, end); !ok {
				return false, desc
			}
			return groupCommittedAt(ctx, adm, group, topic, groupPartitions, end)
		})
	closeGroupMembers(t, second)

	secondRecs := groupRecordsOf(second)
	checkGroupRecordKeys(t, secondRecs, groupPartitions)
	firsts := groupFirstOffsets(secondRecs)
	for p := range int32(groupPartitions) {
		if o, ok := firsts[p]; !ok || o != groupScenarioStopAt {
			t.Errorf("partition %d: the restarted group's first record is at offset %d (read: %v), want the committed offset %d",
				p, o, ok, groupScenarioStopAt)
		}
	}
	dups := 0
	for key, n := range countGroupRecords(secondRecs) {
		if n > 1 {
			dups += n - 1
		}
		if key[1] < groupScenarioStopAt {
			t.Errorf("partition %d offset %d read again after the restart, below the committed offset %d", key[0], key[1], groupScenarioStopAt)
		}
	}
	t.Logf("restarted members read %d records (%d duplicates after the last commit); scenario took %v",
		len(secondRecs), dups, time.Since(begin).Round(time.Millisecond))
}

// checkGroupExactlyOnceBelow fails unless every offset below stopAt of every
// partition was processed exactly once in recs and nothing at or above it.
func checkGroupExactlyOnceBelow(t *testing.T, who string, recs []groupRecord, stopAt int64) {
	t.Helper()
	counts := countGroupRecords(recs)
	for p := range int64(groupPartitions) {
		for o := range stopAt {
			if n := counts[[2]int64{p, o}]; n != 1 {
				t.Errorf("%s: partition %d offset %d processed %d times, want exactly once", who, p, o, n)
			}
		}
	}
	for key, n := range counts {
		if key[1] >= stopAt {
			t.Errorf("%s: partition %d offset %d processed %d times, want none at or above %d", who, key[0], key[1], n, stopAt)
		}
	}
}
