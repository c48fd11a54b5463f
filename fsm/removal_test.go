package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// removalFixture is a Stable group of generation 1 with members m1 (the
// leader) and m2, at LevelGuardedRemoval; next is the next log index.
func removalFixture(t *testing.T) (*FSM, *uint64) {
	t.Helper()
	f := openFSM(t, t.TempDir())
	next := uint64(0)
	apply := func(c Command) any {
		next++
		return f.Apply(next, Encode(c))
	}
	apply(&InitCluster{ClusterID: "c"})
	apply(&SetFeatureLevel{Level: LevelGuardedRemoval})
	apply(removalJoin("m1"))
	apply(removalJoin("m2"))
	apply(&CompleteJoin{Group: "g", Generation: 0, NowMs: 1})
	if r := apply(&SyncGroup{Group: "g", MemberID: "m1", Generation: 1}).(*GroupResult); r.Code != 0 {
		t.Fatalf("sync: %+v", r)
	}
	next++
	return f, &next
}

func removalJoin(member string) *JoinGroup {
	return &JoinGroup{Group: "g", MemberID: member, ClientID: "c", ProtocolType: "consumer", SessionTimeoutMs: 10000,
		RebalanceTimeoutMs: 10000, Protocols: []Protocol{{Name: "range", Metadata: []byte{1}}}, NowMs: 1}
}

// A removal carrying the state it was decided on applies only while the
// group is still in that state: not in another generation, not to a member
// that rejoined after the decision. Version 1 (no guard) removes as before.
func TestGuardedRemoval(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before runs between the decision (at index asOf) and the removal.
		before    func(t *testing.T, f *FSM, next *uint64)
		guard     func(asOf uint64) *RemovalGuard
		remove    []string
		code      int16   // the result's group-level code
		codes     []int16 // per member, when code is 0
		remaining []string
		state     GroupState
	}{
		{name: "decided now", guard: func(asOf uint64) *RemovalGuard { return &RemovalGuard{Generation: 1, AsOf: asOf} },
			remove: []string{"m2"}, codes: []int16{0}, remaining: []string{"m1"}, state: GroupPreparingRebalance},
		{name: "decided in an earlier generation", guard: func(asOf uint64) *RemovalGuard { return &RemovalGuard{Generation: 0, AsOf: asOf} },
			remove: []string{"m2"}, code: ErrStale, remaining: []string{"m1", "m2"}, state: GroupStable},
		{name: "the member rejoined after the decision", before: rejoin("m2"),
			guard:  func(asOf uint64) *RemovalGuard { return &RemovalGuard{Generation: 1, AsOf: asOf} },
			remove: []string{"m2"}, codes: []int16{ErrStale}, remaining: []string{"m1", "m2"}, state: GroupStable},
		{name: "only the member that rejoined stays", before: rejoin("m2"),
			guard:  func(asOf uint64) *RemovalGuard { return &RemovalGuard{Generation: 1, AsOf: asOf} },
			remove: []string{"m1", "m2"}, codes: []int16{0, ErrStale}, remaining: []string{"m2"}, state: GroupPreparingRebalance},
		{name: "a rejoin the decision saw does not save the member", before: rejoin("m2"),
			guard:  func(asOf uint64) *RemovalGuard { return &RemovalGuard{Generation: 1, AsOf: asOf + 1} },
			remove: []string{"m2"}, codes: []int16{0}, remaining: []string{"m1"}, state: GroupPreparingRebalance},
		{name: "the group rebalanced after the decision", before: rebalance,
			guard:  func(asOf uint64) *RemovalGuard { return &RemovalGuard{Generation: 1, AsOf: asOf} },
			remove: []string{"m2"}, code: ErrStale, remaining: []string{"m1", "m2"}, state: GroupCompletingRebalance},
		{name: "a leave holds in any generation", before: rebalance,
			guard:  func(uint64) *RemovalGuard { return &RemovalGuard{Generation: AnyGeneration, AsOf: 20} },
			remove: []string{"m2"}, codes: []int16{0}, remaining: []string{"m1"}, state: GroupPreparingRebalance},
		{name: "version 1 removes a member that rejoined", before: rejoin("m2"),
			guard:  func(uint64) *RemovalGuard { return nil },
			remove: []string{"m2", "nobody"}, codes: []int16{0, ErrUnknownMemberID}, remaining: []string{"m1"}, state: GroupPreparingRebalance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, next := removalFixture(t)
			asOf := f.Applied()
			if tc.before != nil {
				tc.before(t, f, next)
			}
			r := f.Apply(*next, Encode(&RemoveMembers{Group: "g", MemberIDs: tc.remove, NowMs: 2, Guard: tc.guard(asOf)})).(*GroupResult)
			if r.Code != tc.code || (tc.code == 0 && !slices.Equal(r.Codes, tc.codes)) {
				t.Fatalf("result code %d codes %v, want %d %v", r.Code, r.Codes, tc.code, tc.codes)
			}
			g := f.Group("g")
			if !slices.Equal(memberIDs(g), tc.remaining) || g.State != tc.state {
				t.Fatalf("members %v in state %s, want %v in %s", memberIDs(g), g.State, tc.remaining, tc.state)
			}
		})
	}
}

// rejoin has a member of the fixture rejoin with what it joined with: a
// Stable group answers at once and does not rebalance.
func rejoin(member string) func(*testing.T, *FSM, *uint64) {
	return func(t *testing.T, f *FSM, next *uint64) {
		t.Helper()
		if r := f.Apply(*next, Encode(removalJoin(member))).(*GroupResult); r.Code != 0 || !r.Immediate {
			t.Fatalf("rejoin: %+v", r)
		}
		*next++
	}
}

// rebalance moves the fixture to generation 2 with both members.
func rebalance(t *testing.T, f *FSM, next *uint64) {
	t.Helper()
	j := removalJoin("m1")
	j.Protocols = []Protocol{{Name: "range", Metadata: []byte{2}}} // changed metadata: a rebalance
	for _, c := range []Command{j, removalJoin("m2"), &CompleteJoin{Group: "g", Generation: 1, NowMs: 2}} {
		if r := f.Apply(*next, Encode(c)).(*GroupResult); r.Code != 0 {
			t.Fatalf("rebalance: %+v", r)
		}
		*next++
	}
	if g := f.Group("g"); g.Generation != 2 {
		t.Fatalf("generation %d after a rebalance", g.Generation)
	}
}

// A RemoveMembers without a guard is written as version 1, which every
// earlier release reads (in the old form at the baseline level); one with a
// guard is version 2, refused below LevelGuardedRemoval by Admit and by the
// FSM alike, never a halt.
func TestRemoveMembersVersions(t *testing.T) {
	v1 := &RemoveMembers{Group: "g", MemberIDs: []string{"a", "b"}, NowMs: 7}
	v2 := &RemoveMembers{Group: "g", MemberIDs: []string{"a"}, NowMs: 7, Guard: &RemovalGuard{Generation: 3, AsOf: 1 << 40}}
	e1, e2 := Encode(v1), Encode(v2)
	if !bytes.Equal(e1[:3], []byte{versionedEntry, 1, byte(KindRemoveMembers)}) ||
		!bytes.Equal(e2[:3], []byte{versionedEntry, 2, byte(KindRemoveMembers)}) {
		t.Fatalf("headers %x and %x, want versions 1 and 2", e1[:3], e2[:3])
	}
	// The form releases before feature levels wrote.
	legacy := append([]byte{byte(KindRemoveMembers)}, e1[3:]...)
	for name, tc := range map[string]struct {
		entry []byte
		want  *RemoveMembers
	}{"v1": {e1, v1}, "v1 old form": {legacy, v1}, "v2": {e2, v2}} {
		if c, err := Decode(tc.entry); err != nil || !reflect.DeepEqual(c, tc.want) {
			t.Fatalf("%s: decode = %+v, %v; want %+v", name, c, err, tc.want)
		}
	}

	f := openFSM(t, t.TempDir())
	if got, err := f.Admit(e1); err != nil || !bytes.Equal(got, legacy) {
		t.Fatalf("Admit of v1 at the baseline level = %x, %v; want the old form", got, err)
	}
	f.Apply(1, Encode(&SetFeatureLevel{Level: LevelGuardedRemoval - 1}))
	var fe *FeatureError
	if _, err := f.Admit(e2); !errors.As(err, &fe) || !errors.Is(err, ErrFeatureDisabled) || fe.Need != LevelGuardedRemoval {
		t.Fatalf("Admit of v2 at level %d: %v", f.FeatureLevel(), err)
	}
	if got, err := f.Admit(e1); err != nil || !bytes.Equal(got, e1) {
		t.Fatalf("Admit of v1 at level %d = %x, %v", f.FeatureLevel(), got, err)
	}
	if _, ok := f.Apply(2, e2).(*FeatureError); !ok || f.Halted() != nil {
		t.Fatalf("Apply of v2 at level %d was not refused deterministically (halted: %v)", f.FeatureLevel(), f.Halted())
	}
	f.Apply(3, Encode(&SetFeatureLevel{Level: LevelGuardedRemoval}))
	if got, err := f.Admit(e2); err != nil || !bytes.Equal(got, e2) {
		t.Fatalf("Admit of v2 at level %d = %x, %v", f.FeatureLevel(), got, err)
	}
}

// Version 1 entries, in either form, apply as they always did: a member is
// removed whatever happened since, and the group rebalances.
func TestRemoveMembersV1AppliesAsBefore(t *testing.T) {
	for _, level := range []Level{LevelBaseline, LevelGuardedRemoval} {
		f := openFSM(t, t.TempDir())
		f.Apply(1, Encode(&SetFeatureLevel{Level: level}))
		for i, c := range []Command{removalJoin("m1"), removalJoin("m2"), &CompleteJoin{Group: "g", NowMs: 1},
			&SyncGroup{Group: "g", MemberID: "m1", Generation: 1}, removalJoin("m2")} {
			f.Apply(uint64(i+2), Encode(c))
		}
		e := Encode(&RemoveMembers{Group: "g", MemberIDs: []string{"m2"}, NowMs: 5})
		if level == LevelBaseline {
			e = append([]byte{byte(KindRemoveMembers)}, e[3:]...)
		}
		r := f.Apply(7, e).(*GroupResult)
		g := f.Group("g")
		if r.Code != 0 || !slices.Equal(r.Codes, []int16{0}) || !slices.Equal(memberIDs(g), []string{"m1"}) ||
			g.State != GroupPreparingRebalance || r.Generation != 1 {
			t.Fatalf("level %d: result %+v, group %v in %s", level, r, memberIDs(g), g.State)
		}
	}
}

// Join stamps are part of the state from LevelGuardedRemoval on: replicas
// that apply the same log, or restore a snapshot and go on, hold the same
// stamps and give every guarded removal the same result, whether the
// snapshot was taken before or after the level was raised.
func TestGuardedRemovalLogDeterministic(t *testing.T) {
	var applied, staleGeneration, staleRejoin int
	for seed := uint64(200); seed <= 215; seed++ {
		raiseAt := 1 + int(seed%4)*100 // before or after the cuts below
		log, refSnap := groupLogRaised(t, seed, 500, raiseAt)
		a, b := openFSM(t, t.TempDir()), openFSM(t, t.TempDir())
		ra, rb := applyAll(a, log), applyAll(b, log)
		for i := range ra {
			if !reflect.DeepEqual(ra[i], rb[i]) {
				t.Fatalf("seed %d: entry %d: results differ: %+v vs %+v", seed, i, ra[i], rb[i])
			}
			c, _ := Decode(log[i])
			if rm, ok := c.(*RemoveMembers); ok && rm.Guard != nil {
				r := ra[i].(*GroupResult)
				switch {
				case r.Code == ErrStale:
					staleGeneration++
				case slices.Contains(r.Codes, ErrStale):
					staleRejoin++
				case slices.Contains(r.Codes, ErrNone) && r.Code == ErrNone:
					applied++
				}
			}
		}
		if sa := snapshotBytes(t, a); !bytes.Equal(sa, snapshotBytes(t, b)) || !bytes.Equal(sa, refSnap) {
			t.Fatalf("seed %d: snapshots of the same log differ", seed)
		}
		for _, cut := range []int{50, 250, 450} {
			src := openFSM(t, t.TempDir())
			applyAll(src, log[:cut])
			dst := openFSM(t, t.TempDir())
			if err := dst.Restore(bytes.NewReader(snapshotBytes(t, src))); err != nil {
				t.Fatalf("seed %d cut %d: restore: %v", seed, cut, err)
			}
			for _, id := range genGroups {
				if !reflect.DeepEqual(src.Group(id), dst.Group(id)) {
					t.Fatalf("seed %d cut %d: group %s differs after restore:\n%+v\n%+v", seed, cut, id, src.Group(id), dst.Group(id))
				}
			}
			for i := cut; i < len(log); i++ {
				if rs, rd := src.Apply(uint64(i+1), log[i]), dst.Apply(uint64(i+1), log[i]); !reflect.DeepEqual(rs, rd) {
					t.Fatalf("seed %d cut %d: entry %d: results differ after restore: %+v vs %+v", seed, cut, i, rs, rd)
				}
			}
			if !bytes.Equal(snapshotBytes(t, src), snapshotBytes(t, dst)) {
				t.Fatalf("seed %d cut %d: diverged after restore", seed, cut)
			}
		}
	}
	if applied == 0 || staleGeneration == 0 || staleRejoin == 0 {
		t.Fatalf("generator too weak: guarded removals applied %d, stale by generation %d, by rejoin %d",
			applied, staleGeneration, staleRejoin)
	}
	t.Logf("guarded removals: %d applied, %d stale by generation, %d kept a rejoined member", applied, staleGeneration, staleRejoin)
}
