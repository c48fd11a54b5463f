package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestGroupStaticMembership (KIP-345): a static member (group.instance.id,
// 30 s session timeout) of a Java, librdkafka or franz-go client is stopped without
// leaving the group and restarted within its session timeout. It must come
// back without a rebalance: with its old partitions, in the same generation
// (Java reports it), resuming at its committed offsets, while the other
// member (franz-go, range) sees no revocation and no new assignment.
//
// The static member joins first, so it is the group leader: the rejoin of a
// static leader is the case where the coordinator must not make it run a new
// assignment that takes effect.
func TestGroupStaticMembership(t *testing.T) {
	for _, c := range []struct {
		name string
		prog func(*testing.T) groupProgram
	}{
		{"java", javaGroupProgram},
		{"librdkafka", confluentGroupProgram},
		{"franz-go", franzGroupProgram},
	} {
		t.Run(c.name, func(t *testing.T) { runStaticScenario(t, c.prog(t), franzGroupProgram(t)) })
	}
}

func runStaticScenario(t *testing.T, prog, otherProg groupProgram) {
	const (
		instance     = "static-1"
		perRound     = 10 // records per partition and round
		staticClient = "static-member"
		otherClient  = "static-other"
	)
	srv := startGroupKgate(t)
	bootstrap := srv.bootstrap()
	adm := newGroupAdmin(t, bootstrap)
	topic, group := "groups-static", "group-static"
	createGroupTopic(t, adm, topic, groupPartitions)
	staticOpts := []string{"assignor=range", "instance=" + instance, "session=30000"}

	static := startGroupMember(t, prog, bootstrap, topic, group, staticClient, staticOpts...)
	waitGroupBalanced(t, "static member alone holds all partitions", groupJoinTimeout, adm, group, topic, []*groupMember{static})
	other := startGroupMember(t, otherProg, bootstrap, topic, group, otherClient, "assignor=range",
		fmt.Sprintf("session=%d", groupSessionMs))
	both := []*groupMember{static, other}
	waitGroupBalanced(t, "static and dynamic member: disjoint range assignments", groupJoinTimeout, adm, group, topic, both)
	checkGroupStaticDescribed(t, adm, group, instance, staticClient)

	produceGroupRecords(t, bootstrap, topic, groupPartitions, 0, groupPartitions*perRound)
	waitGroupCond(t, "first round read and committed", groupStepTimeout, both, func(ctx context.Context) (bool, string) {
		if ok, desc := groupCoversOffsets(groupRecordsOf(both), groupPartitions, 0, perRound); !ok {
			return false, desc
		}
		return groupCommittedAt(ctx, adm, group, topic, groupPartitions, perRound)
	})
	s0, o0 := static.state(), other.state()
	gen0, _ := groupGeneration(t, srv, group)
	if prog.generation && s0.generation != o0.generation {
		t.Fatalf("static member reports generation %d, the other member %d", s0.generation, o0.generation)
	}
	t.Logf("before the restart: static %v (generation %d), other %v (generation %d, %d assignments, %d revocations)",
		s0.assigned, s0.generation, o0.assigned, o0.generation, o0.assignments, o0.revocations)

	static.close() // a static member does not send LeaveGroup
	checkGroupStaticDescribed(t, adm, group, instance, staticClient)
	step(t, "static member still in the Stable group while stopped, with its assignment", groupStepTimeout,
		func(ctx context.Context) error {
			ds, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return err
			}
			d := ds[group]
			if d.State != "Stable" || len(d.Members) != 2 {
				return fmt.Errorf("state %q with %v, want Stable with both members", d.State, groupDescribedMembers(d))
			}
			for i := range d.Members {
				if d.Members[i].ClientID == staticClient {
					if got := groupDescribedPartitions(&d.Members[i], topic); !slices.Equal(got, s0.assigned) {
						return fmt.Errorf("stopped static member assigned %v, want %v", got, s0.assigned)
					}
				}
			}
			return nil
		})

	restarted := startGroupMember(t, prog, bootstrap, topic, group, staticClient, staticOpts...)
	both = []*groupMember{restarted, other}
	waitGroupCond(t, "restarted static member assigned", groupJoinTimeout, both, func(context.Context) (bool, string) {
		s := restarted.state()
		return s.hasAssigned, "no assignment yet"
	})
	s1 := restarted.state()
	if !slices.Equal(s1.assigned, s0.assigned) {
		t.Errorf("restarted static member got %v, want its old partitions %v", s1.assigned, s0.assigned)
	}
	if prog.generation && s1.generation != s0.generation {
		t.Errorf("restarted static member joined generation %d, want the old generation %d (no rebalance)", s1.generation, s0.generation)
	}

	produceGroupRecords(t, bootstrap, topic, groupPartitions, groupPartitions*perRound, 2*groupPartitions*perRound)
	waitGroupCond(t, "second round read and committed", groupStepTimeout, both, func(ctx context.Context) (bool, string) {
		if ok, desc := groupCoversOffsets(groupRecordsOf(both), groupPartitions, perRound, 2*perRound); !ok {
			return false, desc
		}
		return groupCommittedAt(ctx, adm, group, topic, groupPartitions, 2*perRound)
	})
	// The coordinator decides on a rebalance when the member rejoins, and
	// the other member would learn of it only at its next heartbeat: so ask
	// the coordinator. The group must still be Stable in the generation it
	// had before the restart.
	if gen, state := groupGeneration(t, srv, group); state != "Stable" || gen != gen0 {
		t.Errorf("after the static member's restart the group is %s in generation %d, want Stable in generation %d", state, gen, gen0)
	}
	o1 := other.state()
	if o1.assignments != o0.assignments || o1.revocations != o0.revocations || o1.generation != o0.generation {
		t.Errorf("the other member saw a rebalance: %d assignments, %d revocations, generation %d, partitions %v; "+
			"before the restart %d, %d, %d, %v", o1.assignments, o1.revocations, o1.generation, o1.assigned,
			o0.assignments, o0.revocations, o0.generation, o0.assigned)
	}
	if s := restarted.state(); s.assignments != 1 || s.revocations != 0 {
		t.Errorf("restarted static member: %d assignments, %d revocations; want exactly one assignment", s.assignments, s.revocations)
	}
	recs := groupRecordsOf(both)
	checkGroupRecordKeys(t, recs, groupPartitions)
	for p, o := range groupFirstOffsets(restarted.state().records) {
		if o != perRound {
			t.Errorf("restarted static member resumed partition %d at offset %d, want the committed offset %d", p, o, perRound)
		}
	}
	for key, n := range countGroupRecords(recs) {
		if n != 1 {
			t.Errorf("partition %d offset %d read %d times, want once (no rebalance happened)", key[0], key[1], n)
		}
	}
	waitGroupBalanced(t, "DescribeGroups agrees with both members after the restart", groupStepTimeout, adm, group, topic, both)
	checkGroupStaticDescribed(t, adm, group, instance, staticClient)
	closeGroupMembers(t, both)
}

// checkGroupStaticDescribed checks that DescribeGroups shows the member with
// clientID under instance id instance.
func checkGroupStaticDescribed(t *testing.T, adm *kadm.Client, group, instance, clientID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	d := ds[group]
	for _, m := range d.Members {
		if m.ClientID == clientID {
			if c, ok := m.Join.AsConsumer(); ok {
				t.Logf("member %s (instance %s) joined with consumer protocol metadata v%d: topics %v, owned partitions %d, generation %d",
					m.MemberID, instance, c.Version, c.Topics, len(c.OwnedPartitions), c.Generation)
			}
			if m.InstanceID == nil || *m.InstanceID != instance {
				t.Fatalf("DescribeGroups: member %s has instance id %v, want %q", clientID, m.InstanceID, instance)
			}
			return
		}
	}
	t.Fatalf("DescribeGroups: no member with client id %s: %v", clientID, groupDescribedMembers(d))
}

// groupGeneration reads a group's generation and state from the
// coordinator's admin API (/v1/groups).
func groupGeneration(t *testing.T, srv *kgateServer, group string) (int32, string) {
	t.Helper()
	admin := srv.addrs["admin-addr"]
	if srv.iggy != nil {
		admin = srv.iggy.c.node(int32(srv.coordinator())).addrs["admin-addr"]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/v1/groups", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/groups: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Groups []struct {
			Group      string `json:"group"`
			State      string `json:"state"`
			Generation int32  `json:"generation"`
		} `json:"groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET /v1/groups: %v", err)
	}
	for _, g := range out.Groups {
		if g.Group == group {
			return g.Generation, g.State
		}
	}
	t.Fatalf("GET /v1/groups: no group %s", group)
	return 0, ""
}
