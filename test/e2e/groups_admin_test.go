package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestGroupAdmin drives the group admin APIs with kadm and with the Java
// AdminClient calls kafka-consumer-groups.sh makes, on two groups:
// group-active (two franz-go members consuming topic A, plus offsets of
// topic B committed while it was empty) and group-empty (offsets of A
// committed by an admin, no members):
//
//   - ListGroups without and with a state filter; DescribeGroups of both,
//     and of an unknown group (Dead);
//   - FetchOffsets of both, commit metadata included;
//   - Java listConsumerGroups (with a state filter), listGroups,
//     describeConsumerGroups, listConsumerGroupOffsets and the lag;
//   - DeleteGroups of the active group: NON_EMPTY_GROUP (kadm and Java);
//   - OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC for A in the active group,
//     deleted for B there, deleted for a partition of the empty group (Java);
//   - after the members leave: DeleteGroups works (kadm and Java), the
//     groups are gone from ListGroups and their offsets from FetchOffsets.
func TestGroupAdmin(t *testing.T) {
	franz := franzGroupProgram(t)
	_, jar := javaJar(t)
	srv := startGroupKgate(t)
	bootstrap := srv.bootstrap()
	adm := newGroupAdmin(t, bootstrap)
	const (
		topicA, topicB = "groups-admin-a", "groups-admin-b"
		active, empty  = "group-active", "group-empty"
		perPartition   = 20
	)
	createGroupTopic(t, adm, topicA, groupPartitions)
	createGroupTopic(t, adm, topicB, 2)
	produceGroupRecords(t, bootstrap, topicA, groupPartitions, 0, groupPartitions*perPartition)

	step(t, "commit offsets as an admin while the groups are empty", groupStepTimeout, func(ctx context.Context) error {
		var os kadm.Offsets
		for p := range int32(groupPartitions) {
			os.Add(kadm.Offset{Topic: topicA, Partition: p, At: 5, LeaderEpoch: -1, Metadata: "admin-set"})
		}
		if err := groupCommitOffsets(ctx, adm, empty, os); err != nil {
			return err
		}
		var ob kadm.Offsets
		ob.Add(kadm.Offset{Topic: topicB, Partition: 0, At: 1, LeaderEpoch: -1})
		ob.Add(kadm.Offset{Topic: topicB, Partition: 1, At: 2, LeaderEpoch: -1})
		return groupCommitOffsets(ctx, adm, active, ob)
	})

	members := []*groupMember{
		startGroupMember(t, franz, bootstrap, topicA, active, "admin-m0", fmt.Sprintf("session=%d", groupSessionMs)),
		startGroupMember(t, franz, bootstrap, topicA, active, "admin-m1", fmt.Sprintf("session=%d", groupSessionMs)),
	}
	waitGroupBalanced(t, "two members consume topic A", groupJoinTimeout, adm, active, topicA, members)
	waitGroupCond(t, "members read and commit all of topic A", groupStepTimeout, members, func(ctx context.Context) (bool, string) {
		return groupCommittedAt(ctx, adm, active, topicA, groupPartitions, perPartition)
	})

	step(t, "ListGroups, with and without state filters", groupStepTimeout, func(ctx context.Context) error {
		for _, c := range []struct {
			states []string
			want   map[string]string // group -> state
		}{
			{nil, map[string]string{active: "Stable", empty: "Empty"}},
			{[]string{"Stable"}, map[string]string{active: "Stable"}},
			{[]string{"Empty"}, map[string]string{empty: "Empty"}},
			{[]string{"Stable", "Empty"}, map[string]string{active: "Stable", empty: "Empty"}},
			{[]string{"PreparingRebalance", "Dead"}, map[string]string{}},
		} {
			ls, err := adm.ListGroups(ctx, c.states...)
			if err != nil {
				return fmt.Errorf("ListGroups(%v): %w", c.states, err)
			}
			got := map[string]string{}
			for g, l := range ls {
				got[g] = l.State
			}
			if !maps.Equal(got, c.want) {
				return fmt.Errorf("ListGroups(%v) = %v, want %v", c.states, got, c.want)
			}
			if l, ok := ls[active]; ok && l.ProtocolType != "consumer" {
				return fmt.Errorf("ListGroups(%v): %s has protocol type %q, want consumer", c.states, active, l.ProtocolType)
			}
		}
		return nil
	})

	step(t, "DescribeGroups of the active, the empty and an unknown group", groupStepTimeout, func(ctx context.Context) error {
		if ok, desc := groupDescribeMatches(ctx, adm, active, topicA, members); !ok {
			return errors.New(desc)
		}
		ds, err := adm.DescribeGroups(ctx, active, empty, "group-unknown")
		if err != nil {
			return err
		}
		if d := ds[active]; d.Protocol != "cooperative-sticky" {
			return fmt.Errorf("%s: protocol %q, want cooperative-sticky (franz-go's default)", active, d.Protocol)
		}
		if d := ds[empty]; d.Err != nil || d.State != "Empty" || len(d.Members) != 0 {
			return fmt.Errorf("%s: state %q, %d members, err %v; want Empty", empty, d.State, len(d.Members), d.Err)
		}
		if d := ds["group-unknown"]; d.Err != nil || d.State != "Dead" || len(d.Members) != 0 {
			return fmt.Errorf("unknown group: state %q, %d members, err %v; want Dead", d.State, len(d.Members), d.Err)
		}
		return nil
	})

	step(t, "FetchOffsets of both groups", groupStepTimeout, func(ctx context.Context) error {
		os, err := adm.FetchOffsets(ctx, empty)
		if err != nil {
			return err
		}
		for p := range int32(groupPartitions) {
			o, ok := os.Lookup(topicA, p)
			if !ok || o.Err != nil || o.At != 5 || o.Metadata != "admin-set" {
				return fmt.Errorf("%s %s[%d]: %+v (found %v), want offset 5 with metadata admin-set", empty, topicA, p, o, ok)
			}
		}
		if n := len(os[topicB]); n != 0 {
			return fmt.Errorf("%s: %d offsets of %s, want none", empty, n, topicB)
		}
		want := map[int32]int64{0: 1, 1: 2}
		got, err := groupCommitted(ctx, adm, active, topicB)
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("%s %s: %v, want %v", active, topicB, got, want)
		}
		return nil
	})

	java := func(ctx context.Context, out any, args ...string) error {
		return runJavaGroupAdmin(ctx, jar, bootstrap, out, args...)
	}
	step(t, "Java AdminClient: list, describe, offsets and lag (kafka-consumer-groups.sh --list / --describe)", 2*time.Minute,
		func(ctx context.Context) error {
			var res groupJavaAdminResult
			if err := java(ctx, &res, topicA, "admin", active+","+empty); err != nil {
				return err
			}
			return res.check(members, active, empty, perPartition, srv.coordinator())
		})

	step(t, "DeleteGroups of a group with members: NON_EMPTY_GROUP (kadm, Java)", 2*time.Minute, func(ctx context.Context) error {
		rs, err := adm.DeleteGroups(ctx, active)
		if err != nil {
			return err
		}
		if err := rs[active].Err; !errors.Is(err, kerr.NonEmptyGroup) {
			return fmt.Errorf("kadm DeleteGroups(%s): %v, want NON_EMPTY_GROUP", active, err)
		}
		var res struct {
			Deleted map[string]*string `json:"deleted"`
		}
		if err := java(ctx, &res, topicA, "delete", active); err != nil {
			return err
		}
		if e := res.Deleted[active]; e == nil || *e != "GroupNotEmptyException" {
			return fmt.Errorf("Java deleteConsumerGroups(%s): %v, want GroupNotEmptyException", active, groupDeref(e))
		}
		return nil
	})

	step(t, "OffsetDelete: subscribed topic refused, unsubscribed topic deleted", groupStepTimeout, func(ctx context.Context) error {
		rs, err := adm.DeleteOffsets(ctx, active, kadm.TopicsSet{topicA: {0: {}}, topicB: {0: {}}})
		if err != nil {
			return err
		}
		if e, ok := rs.Lookup(topicA, 0); !ok || !errors.Is(e, kerr.GroupSubscribedToTopic) {
			return fmt.Errorf("OffsetDelete %s[0] of %s: %v (answered %v), want GROUP_SUBSCRIBED_TO_TOPIC", topicA, active, e, ok)
		}
		if e, ok := rs.Lookup(topicB, 0); !ok || e != nil {
			return fmt.Errorf("OffsetDelete %s[0] of %s: %v (answered %v), want success", topicB, active, e, ok)
		}
		got, err := groupCommitted(ctx, adm, active, topicB)
		if err != nil {
			return err
		}
		if want := map[int32]int64{1: 2}; !maps.Equal(got, want) {
			return fmt.Errorf("%s %s after OffsetDelete of partition 0: %v, want %v", active, topicB, got, want)
		}
		if ok, desc := groupCommittedAt(ctx, adm, active, topicA, groupPartitions, perPartition); !ok {
			return fmt.Errorf("after the refused OffsetDelete: %s", desc)
		}
		return nil
	})

	step(t, "Java deleteConsumerGroupOffsets of the empty group (kafka-consumer-groups.sh --delete-offsets)", 2*time.Minute,
		func(ctx context.Context) error {
			var res struct {
				All        *string            `json:"all"`
				Partitions map[string]*string `json:"partitions"`
			}
			if err := java(ctx, &res, topicA, "delete-offsets", empty, "0,1"); err != nil {
				return err
			}
			if res.All != nil || res.Partitions["0"] != nil || res.Partitions["1"] != nil {
				return fmt.Errorf("Java deleteConsumerGroupOffsets: all %v, partitions %v; want no errors", groupDeref(res.All), res.Partitions)
			}
			got, err := groupCommitted(ctx, adm, empty, topicA)
			if err != nil {
				return err
			}
			if want := map[int32]int64{2: 5, 3: 5, 4: 5, 5: 5}; !maps.Equal(got, want) {
				return fmt.Errorf("%s after deleting partitions 0 and 1: %v, want %v", empty, got, want)
			}
			return nil
		})

	closeGroupMembers(t, members)
	step(t, "both groups Empty after the members left", groupStepTimeout, func(ctx context.Context) error {
		ls, err := adm.ListGroups(ctx, "Empty")
		if err != nil {
			return err
		}
		if got := slices.Sorted(maps.Keys(ls)); !slices.Equal(got, []string{active, empty}) {
			return fmt.Errorf("ListGroups(Empty) = %v, want [%s %s]", got, active, empty)
		}
		return nil
	})
	step(t, "DeleteGroups of empty groups works (kadm, Java)", 2*time.Minute, func(ctx context.Context) error {
		rs, err := adm.DeleteGroups(ctx, active)
		if err != nil {
			return err
		}
		if err := rs[active].Err; err != nil {
			return fmt.Errorf("kadm DeleteGroups(%s): %w", active, err)
		}
		var res struct {
			Deleted map[string]*string `json:"deleted"`
		}
		if err := java(ctx, &res, topicA, "delete", empty); err != nil {
			return err
		}
		if e, ok := res.Deleted[empty]; !ok || e != nil {
			return fmt.Errorf("Java deleteConsumerGroups(%s): %v (answered %v), want success", empty, groupDeref(e), ok)
		}
		ls, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		if len(ls) != 0 {
			return fmt.Errorf("ListGroups after deleting both groups: %v, want none", slices.Sorted(maps.Keys(ls)))
		}
		ds, err := adm.DescribeGroups(ctx, active, empty)
		if err != nil {
			return err
		}
		for _, g := range []string{active, empty} {
			if d := ds[g]; d.State != "Dead" {
				return fmt.Errorf("DescribeGroups(%s) after deletion: state %q, want Dead", g, d.State)
			}
			os, err := adm.FetchOffsets(ctx, g)
			if err != nil {
				return fmt.Errorf("FetchOffsets(%s) after deletion: %w", g, err)
			}
			if n := len(os[topicA]) + len(os[topicB]); n != 0 {
				return fmt.Errorf("FetchOffsets(%s) after deletion: %d offsets, want none", g, n)
			}
		}
		return nil
	})
}

// groupCommitOffsets commits os for group through kadm (generation -1, as an
// admin) and fails on any partition error.
func groupCommitOffsets(ctx context.Context, adm *kadm.Client, group string, os kadm.Offsets) error {
	rs, err := adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return fmt.Errorf("CommitOffsets(%s): %w", group, err)
	}
	if err := rs.Error(); err != nil {
		return fmt.Errorf("CommitOffsets(%s): %w", group, err)
	}
	return nil
}

func groupDeref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// runJavaGroupAdmin runs kgate.e2e.GroupMain in an admin mode and decodes
// its result line into out.
func runJavaGroupAdmin(ctx context.Context, jar, bootstrap string, out any, args ...string) error {
	argv := append([]string{"-cp", jar, "kgate.e2e.GroupMain", bootstrap}, args...)
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.SysProcAttr = groupProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr groupLockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	line := lastLine(string(stdout))
	var res struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal([]byte(line), &res); jerr != nil || !res.OK || err != nil {
		return fmt.Errorf("java GroupMain %s: exit %v, error %q, result %q\nstderr tail:\n%s",
			strings.Join(args, " "), err, res.Error, line, tail(stderr.String(), 20))
	}
	if err := json.Unmarshal([]byte(line), out); err != nil {
		return fmt.Errorf("java GroupMain %s: decoding %q: %w", strings.Join(args, " "), line, err)
	}
	return nil
}

// groupJavaAdminResult is GroupMain's admin mode output.
type groupJavaAdminResult struct {
	List []struct {
		Group  string `json:"group"`
		State  string `json:"state"`
		Type   string `json:"type"`
		Simple bool   `json:"simple"`
	} `json:"list"`
	ListStable []string `json:"list_stable"`
	ListGroups []struct {
		Group    string `json:"group"`
		Protocol string `json:"protocol"`
		State    string `json:"state"`
		Type     string `json:"type"`
	} `json:"list_groups"`
	Describe map[string]struct {
		State       string `json:"state"`
		Assignor    string `json:"assignor"`
		Type        string `json:"type"`
		Coordinator *int   `json:"coordinator"`
		Simple      bool   `json:"simple"`
		Members     []struct {
			MemberID   string  `json:"member_id"`
			InstanceID *string `json:"instance_id"`
			ClientID   string  `json:"client_id"`
			Host       string  `json:"host"`
			Partitions []int32 `json:"partitions"`
		} `json:"members"`
	} `json:"describe"`
	Offsets map[string]map[string]int64 `json:"offsets"`
	Lag     map[string]map[string]int64 `json:"lag"`
}

func (r *groupJavaAdminResult) check(members []*groupMember, active, empty string, perPartition int64, coordinator int) error {
	list := map[string]string{}
	for _, l := range r.List {
		list[l.Group] = l.State
		if l.Type != "Classic" {
			return fmt.Errorf("listConsumerGroups: %s has type %q, want Classic", l.Group, l.Type)
		}
	}
	if want := map[string]string{active: "Stable", empty: "Empty"}; !maps.Equal(list, want) {
		return fmt.Errorf("listConsumerGroups: %v, want %v", list, want)
	}
	if !slices.Equal(r.ListStable, []string{active}) {
		return fmt.Errorf("listConsumerGroups(inGroupStates Stable): %v, want [%s]", r.ListStable, active)
	}
	lg := map[string]string{}
	for _, l := range r.ListGroups {
		lg[l.Group] = l.State
	}
	if want := map[string]string{active: "Stable", empty: "Empty"}; !maps.Equal(lg, want) {
		return fmt.Errorf("listGroups(forConsumerGroups): %v, want %v", lg, want)
	}

	d, ok := r.Describe[active]
	if !ok {
		return fmt.Errorf("describeConsumerGroups: %s missing", active)
	}
	if d.State != "Stable" || d.Assignor != "cooperative-sticky" || d.Type != "Classic" || d.Simple ||
		d.Coordinator == nil || *d.Coordinator != coordinator || len(d.Members) != len(members) {
		return fmt.Errorf("describeConsumerGroups(%s): %+v; want Stable, cooperative-sticky, Classic, coordinator %d, %d members",
			active, d, coordinator, len(members))
	}
	for _, m := range members {
		s := m.state()
		found := false
		for _, dm := range d.Members {
			if dm.ClientID != s.clientID {
				continue
			}
			found = true
			if dm.MemberID != s.memberID || dm.Host != "/127.0.0.1" || dm.InstanceID != nil || !slices.Equal(dm.Partitions, s.assigned) {
				return fmt.Errorf("describeConsumerGroups(%s) member %s: %+v; the client reports member id %s and partitions %v",
					active, s.clientID, dm, s.memberID, s.assigned)
			}
		}
		if !found {
			return fmt.Errorf("describeConsumerGroups(%s): no member with client id %s", active, s.clientID)
		}
	}
	if e, ok := r.Describe[empty]; !ok || e.State != "Empty" || len(e.Members) != 0 {
		return fmt.Errorf("describeConsumerGroups(%s): %+v, want Empty without members", empty, e)
	}

	for p := range groupPartitions {
		ps := fmt.Sprint(p)
		if o := r.Offsets[active][ps]; o != perPartition {
			return fmt.Errorf("listConsumerGroupOffsets(%s) partition %d: %d, want %d", active, p, o, perPartition)
		}
		if l, ok := r.Lag[active][ps]; !ok || l != 0 {
			return fmt.Errorf("lag of %s partition %d: %d (found %v), want 0", active, p, l, ok)
		}
		if o := r.Offsets[empty][ps]; o != 5 {
			return fmt.Errorf("listConsumerGroupOffsets(%s) partition %d: %d, want 5", empty, p, o)
		}
		if l := r.Lag[empty][ps]; l != perPartition-5 {
			return fmt.Errorf("lag of %s partition %d: %d, want %d", empty, p, l, perPartition-5)
		}
	}
	return nil
}
