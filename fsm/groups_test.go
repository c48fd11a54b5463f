package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The partitions a generated group consumes.
var genPartitions = []TopicPartition{
	{"orders", 0}, {"orders", 1}, {"orders", 2}, {"orders", 3}, {"orders", 4},
	{"events", 0}, {"events", 1}, {"events", 2},
}

var genGroups = []string{"g0", "g1", "g2", "g3", "g4"}

// groupLogGen writes a random group command log as a coordinator (and a
// few misbehaving clients) would: it applies each command to ref as it
// goes, to pick plausible members, generations and leaders, and holds some
// SyncGroups back to replay them late (stale).
type groupLogGen struct {
	t       *testing.T
	r       *rand.Rand
	ref     *FSM
	log     [][]byte
	now     int64
	nextID  int
	delayed [][]byte
	gens    map[string]int32 // last generation seen per group lifetime
	// raiseAt, when set, is the log length at which the cluster is raised
	// to LevelGuardedRemoval; from then on most removals are guarded.
	raiseAt int
}

func newGroupLogGen(t *testing.T, seed uint64) *groupLogGen {
	g := &groupLogGen{t: t, r: rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1)), ref: openFSM(t, t.TempDir()),
		now: 1_700_000_000_000, gens: map[string]int32{}}
	g.emit(Encode(&InitCluster{ClusterID: "groups-test"}))
	return g
}

func (g *groupLogGen) emit(entry []byte) {
	g.log = append(g.log, entry)
	g.ref.Apply(uint64(len(g.log)), entry)
	g.checkInvariants()
}

func (g *groupLogGen) pick(ss []string) string { return ss[g.r.IntN(len(ss))] }

func (g *groupLogGen) protocols() []Protocol {
	sets := [][]string{{"range"}, {"roundrobin"}, {"range", "roundrobin"}, {"roundrobin", "range"}, {"cooperative-sticky", "range"}, {"sticky"}}
	var ps []Protocol
	for _, n := range sets[g.r.IntN(len(sets))] {
		ps = append(ps, Protocol{Name: n, Metadata: []byte(fmt.Sprintf("%s-%d", n, g.r.IntN(2)))})
	}
	return ps
}

// assignments splits the partitions among ids with no partition given
// twice, as a correct group leader does.
func (g *groupLogGen) assignments(ids []string) []Assignment {
	per := make([]kmsg.ConsumerMemberAssignment, len(ids))
	for i := range per {
		per[i] = kmsg.NewConsumerMemberAssignment()
	}
	if len(ids) > 0 {
		for _, p := range g.r.Perm(len(genPartitions)) {
			if g.r.IntN(6) == 0 {
				continue // unassigned
			}
			tp := genPartitions[p]
			a := &per[g.r.IntN(len(ids))]
			found := false
			for i := range a.Topics {
				if a.Topics[i].Topic == tp.Topic {
					a.Topics[i].Partitions = append(a.Topics[i].Partitions, tp.Partition)
					found = true
				}
			}
			if !found {
				t := kmsg.NewConsumerMemberAssignmentTopic()
				t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
				a.Topics = append(a.Topics, t)
			}
		}
	}
	out := make([]Assignment, len(ids))
	for i, id := range ids {
		out[i] = Assignment{MemberID: id, Assignment: per[i].AppendTo(nil)}
	}
	return out
}

func (g *groupLogGen) step() {
	if g.raiseAt > 0 && len(g.log) == g.raiseAt {
		g.emit(Encode(&SetFeatureLevel{Level: LevelGuardedRemoval}))
		return
	}
	g.now += int64(g.r.IntN(3000))
	group := g.pick(genGroups)
	v := g.ref.Group(group)
	var members []string
	var gen int32
	var leader string
	if v != nil {
		members, gen, leader = memberIDs(v), v.Generation, v.Leader
	}
	someMember := func() string {
		if len(members) == 0 || g.r.IntN(8) == 0 {
			return fmt.Sprintf("m%d", g.r.IntN(g.nextID+1))
		}
		return members[g.r.IntN(len(members))]
	}
	someGen := func() int32 {
		switch g.r.IntN(8) {
		case 0:
			return gen - 1
		case 1:
			return gen + 1
		}
		return gen
	}
	switch k := g.r.IntN(100); {
	case k < 30: // JoinGroup: a new member, a static restart or a rejoin
		c := &JoinGroup{Group: group, ClientID: "client", ClientHost: "/10.0.0.1", ProtocolType: "consumer",
			SessionTimeoutMs: 10000, RebalanceTimeoutMs: int32(10000 + g.r.IntN(3)*10000), Protocols: g.protocols(), NowMs: g.now}
		if g.r.IntN(25) == 0 {
			c.ProtocolType = "connect"
		}
		if g.r.IntN(3) == 0 {
			c.MaxMembers, c.MaxGroups, c.MaxTotalMembers = 4, 3, 10
		}
		if len(members) > 0 && g.r.IntN(2) == 0 {
			c.MemberID = someMember()
			for _, m := range v.Members {
				if m.ID == c.MemberID {
					c.InstanceID = m.InstanceID
					if g.r.IntN(3) == 0 {
						c.Protocols = m.Protocols
					}
				}
			}
		} else {
			g.nextID++
			c.MemberID = fmt.Sprintf("m%d", g.nextID)
			if g.r.IntN(3) == 0 {
				c.InstanceID = fmt.Sprintf("instance-%d", g.r.IntN(3))
			}
		}
		g.emit(Encode(c))
	case k < 45:
		g.emit(Encode(&CompleteJoin{Group: group, Generation: someGen(), NowMs: g.now}))
	case k < 62: // SyncGroup from the leader (mostly) with a disjoint assignment
		if v == nil {
			return
		}
		from := leader
		if from == "" || g.r.IntN(6) == 0 {
			from = someMember()
		}
		ids := slices.Clone(members)
		if g.r.IntN(8) == 0 {
			ids = append(ids, "not-a-member")
		}
		if g.r.IntN(8) == 0 && len(ids) > 0 {
			ids = ids[1:] // a member left out gets an empty assignment
		}
		instance := ""
		for _, m := range v.Members {
			if m.ID == from {
				instance = m.InstanceID
			}
		}
		entry := Encode(&SyncGroup{Group: group, MemberID: from, InstanceID: instance, Generation: someGen(), Assignments: g.assignments(ids)})
		if g.r.IntN(5) == 0 {
			g.delayed = append(g.delayed, entry) // delivered late
			return
		}
		g.emit(entry)
	case k < 67:
		if len(g.delayed) > 0 {
			i := g.r.IntN(len(g.delayed))
			entry := g.delayed[i]
			g.delayed = append(g.delayed[:i], g.delayed[i+1:]...)
			g.emit(entry)
		}
	case k < 75:
		ids := []string{someMember()}
		if g.r.IntN(3) == 0 {
			ids = append(ids, someMember())
		}
		c := &RemoveMembers{Group: group, MemberIDs: ids, NowMs: g.now}
		if g.ref.FeatureLevel() >= LevelGuardedRemoval && g.r.IntN(4) != 0 {
			// Decided a few entries ago, in this generation or another.
			c.Guard = &RemovalGuard{Generation: someGen(), AsOf: uint64(max(len(g.log)-g.r.IntN(6), 0))}
			if g.r.IntN(4) == 0 {
				c.Guard.Generation = AnyGeneration
			}
		}
		g.emit(Encode(c))
	case k < 88:
		c := &CommitOffsets{Group: group, MemberID: someMember(), Generation: someGen(), NowMs: g.now}
		if g.r.IntN(2) == 0 {
			c.MaxGroups = 3
		}
		if g.r.IntN(4) == 0 {
			c.MemberID, c.Generation = "", -1 // standalone
		}
		for range 1 + g.r.IntN(3) {
			tp := genPartitions[g.r.IntN(len(genPartitions))]
			o := OffsetCommit{Topic: tp.Topic, Partition: tp.Partition, Offset: int64(g.r.IntN(1000)), LeaderEpoch: int32(g.r.IntN(3))}
			if g.r.IntN(10) == 0 {
				o.Metadata = string(bytes.Repeat([]byte("x"), MaxOffsetMetadata+1))
			} else if g.r.IntN(2) == 0 {
				o.Metadata = "meta"
			}
			c.Offsets = append(c.Offsets, o)
		}
		g.emit(Encode(c))
	case k < 91:
		g.emit(Encode(&DeleteGroups{Groups: []string{group, g.pick(genGroups)}}))
	case k < 95:
		g.emit(Encode(&ExpireOffsets{NowMs: g.now, RetentionMs: int64(5000 + g.r.IntN(60000))}))
	default:
		tp := genPartitions[g.r.IntN(len(genPartitions))]
		g.emit(Encode(&DeleteOffsets{Group: group, Partitions: []TopicPartition{tp}}))
	}
}

func memberIDs(v *GroupView) []string {
	var ids []string
	for _, m := range v.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// checkInvariants checks the reference state after each entry.
func (g *groupLogGen) checkInvariants() {
	t := g.t
	t.Helper()
	for _, id := range genGroups {
		v := g.ref.Group(id)
		if v == nil {
			delete(g.gens, id) // deleted: a new group starts again
			continue
		}
		if prev, ok := g.gens[id]; ok && v.Generation < prev {
			t.Fatalf("entry %d: group %s generation went from %d to %d", len(g.log), id, prev, v.Generation)
		}
		g.gens[id] = v.Generation
		owner := map[TopicPartition]string{}
		for _, m := range v.Members {
			if len(m.Assignment) == 0 {
				continue
			}
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.Assignment); err != nil {
				t.Fatalf("entry %d: group %s member %s: stored assignment does not decode: %v", len(g.log), id, m.ID, err)
			}
			for _, at := range a.Topics {
				for _, p := range at.Partitions {
					tp := TopicPartition{at.Topic, p}
					if o, dup := owner[tp]; dup {
						t.Fatalf("entry %d: group %s generation %d: %v assigned to both %s and %s", len(g.log), id, v.Generation, tp, o, m.ID)
					}
					owner[tp] = m.ID
				}
			}
		}
		switch v.State {
		case GroupEmpty:
			if len(v.Members) != 0 || v.Leader != "" {
				t.Fatalf("entry %d: Empty group %s has members %v, leader %q", len(g.log), id, memberIDs(v), v.Leader)
			}
		case GroupCompletingRebalance, GroupStable:
			if !slices.Contains(memberIDs(v), v.Leader) || v.Protocol == "" {
				t.Fatalf("entry %d: %s group %s: leader %q not among %v or no protocol", len(g.log), v.State, id, v.Leader, memberIDs(v))
			}
		}
		instances := map[string]bool{}
		for _, m := range v.Members {
			if m.InstanceID != "" && instances[m.InstanceID] {
				t.Fatalf("entry %d: group %s: two members with instance id %s", len(g.log), id, m.InstanceID)
			}
			instances[m.InstanceID] = true
		}
	}
}

func groupLog(t *testing.T, seed uint64, n int) ([][]byte, []byte) {
	return groupLogRaised(t, seed, n, 0)
}

// groupLogRaised is groupLog with the cluster raised to
// LevelGuardedRemoval at entry raiseAt (never when 0).
func groupLogRaised(t *testing.T, seed uint64, n, raiseAt int) ([][]byte, []byte) {
	g := newGroupLogGen(t, seed)
	g.raiseAt = raiseAt
	for len(g.log) < n {
		g.step()
	}
	return g.log, snapshotBytes(t, g.ref)
}

func TestGroupLogDeterministic(t *testing.T) {
	sawStable, sawDup := false, false
	for seed := uint64(1); seed <= 30; seed++ {
		log, refSnap := groupLog(t, seed, 600)
		a, b := openFSM(t, t.TempDir()), openFSM(t, t.TempDir())
		ra, rb := applyAll(a, log), applyAll(b, log)
		if !reflect.DeepEqual(ra, rb) {
			for i := range ra {
				if !reflect.DeepEqual(ra[i], rb[i]) {
					t.Fatalf("seed %d: entry %d: results differ: %+v vs %+v", seed, i, ra[i], rb[i])
				}
			}
		}
		sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
		if !bytes.Equal(sa, sb) || !bytes.Equal(sa, refSnap) {
			t.Fatalf("seed %d: snapshots of the same log differ", seed)
		}
		for _, r := range ra {
			if gr, ok := r.(*GroupResult); ok && gr.Code == ErrNone && gr.Assignment != nil {
				sawStable = true
			}
			if gr, ok := r.(*GroupResult); ok && gr.Code == ErrFencedInstanceID {
				sawDup = true
			}
		}
	}
	if !sawStable || !sawDup {
		t.Fatalf("generator too weak: synced=%v fenced=%v", sawStable, sawDup)
	}
}

func TestGroupSnapshotRestore(t *testing.T) {
	for seed := uint64(100); seed <= 115; seed++ {
		log, _ := groupLog(t, seed, 500)
		for _, cut := range []int{1, 150, 320} {
			src := openFSM(t, t.TempDir())
			applyAll(src, log[:cut])
			snap := snapshotBytes(t, src)
			dst := openFSM(t, t.TempDir())
			if err := dst.Restore(bytes.NewReader(snap)); err != nil {
				t.Fatalf("seed %d cut %d: restore: %v", seed, cut, err)
			}
			if got := snapshotBytes(t, dst); !bytes.Equal(got, snap) {
				t.Fatalf("seed %d cut %d: restored state differs from the snapshot", seed, cut)
			}
			for _, id := range genGroups {
				if !reflect.DeepEqual(src.Group(id), dst.Group(id)) {
					t.Fatalf("seed %d cut %d: group %s differs after restore:\n%+v\n%+v", seed, cut, id, src.Group(id), dst.Group(id))
				}
			}
			for i := cut; i < len(log); i++ {
				rs, rd := src.Apply(uint64(i+1), log[i]), dst.Apply(uint64(i+1), log[i])
				if !reflect.DeepEqual(rs, rd) {
					t.Fatalf("seed %d cut %d: entry %d: results differ after restore: %+v vs %+v", seed, cut, i, rs, rd)
				}
			}
			if !bytes.Equal(snapshotBytes(t, src), snapshotBytes(t, dst)) {
				t.Fatalf("seed %d cut %d: diverged after restore", seed, cut)
			}
		}
	}
}
