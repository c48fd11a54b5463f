package fsm

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomACL draws from a small space so that creates and deletes meet.
func randomACL(r *rand.Rand) ACL {
	return ACL{ResourceType: int8(2 + r.IntN(2)), ResourceName: []string{"orders", "ord", "*"}[r.IntN(3)],
		PatternType: int8(3 + r.IntN(2)), Principal: []string{"User:alice", "User:*"}[r.IntN(2)], Host: "*",
		Operation: int8(3 + r.IntN(2)), Permission: int8(2 + r.IntN(2))}
}

func TestACLsApplySnapshotRestore(t *testing.T) {
	read := ACL{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}
	deny := ACL{ResourceType: 2, ResourceName: "ord", PatternType: 4, Principal: "User:*", Host: "10.0.0.1", Operation: 4, Permission: 2}
	group := ACL{ResourceType: 3, ResourceName: "billing", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 2, Permission: 3}
	bad := []ACL{
		{ResourceType: 1, ResourceName: "x", PatternType: 3, Principal: "User:a", Host: "*", Operation: 3, Permission: 3}, // ANY resource
		{ResourceType: 2, ResourceName: "x", PatternType: 2, Principal: "User:a", Host: "*", Operation: 3, Permission: 3}, // MATCH pattern
		{ResourceType: 2, ResourceName: "", PatternType: 3, Principal: "User:a", Host: "*", Operation: 3, Permission: 3},  // no name
		{ResourceType: 2, ResourceName: "x", PatternType: 3, Principal: "alice", Host: "*", Operation: 3, Permission: 3},  // no type
		{ResourceType: 2, ResourceName: "x", PatternType: 3, Principal: "User:a", Host: "*", Operation: 1, Permission: 3}, // ANY operation
		{ResourceType: 2, ResourceName: "x", PatternType: 3, Principal: "User:a", Host: "*", Operation: 3, Permission: 1}, // ANY permission
	}
	cmds := []Command{
		&CreateACLs{ACLs: append([]ACL{read, deny, read}, bad...)},
		&CreateACLs{ACLs: []ACL{group}},
		&DeleteACLs{ACLs: []ACL{read, read, {ResourceType: 4, ResourceName: "kafka-cluster", PatternType: 3, Principal: "User:x", Host: "*", Operation: 7, Permission: 3}}},
	}
	want := [][]int16{{0, 0, 0, 42, 42, 42, 42, 42, 42}, {0}, {0, 0, 0}}
	a, b := openFSM(t, t.TempDir()), openFSM(t, t.TempDir())
	if _, err := a.Admit(Encode(cmds[0])); err == nil {
		t.Fatal("CreateACLs admitted below LevelAcls")
	}
	level := Encode(&SetFeatureLevel{Level: LevelAcls})
	a.Apply(1, level)
	b.Apply(1, level)
	if _, err := a.Admit(Encode(cmds[0])); err != nil {
		t.Fatalf("CreateACLs at LevelAcls: %v", err)
	}
	v0 := a.ACLVersion()
	for i, c := range cmds {
		entry := Encode(c)
		decoded, err := Decode(entry)
		if err != nil || !bytes.Equal(Encode(decoded), entry) {
			t.Fatalf("command %d does not survive encoding: %v", i, err)
		}
		ra := a.Apply(uint64(i+2), entry).(*ACLResult)
		b.Apply(uint64(i+2), entry)
		if !reflect.DeepEqual(ra.Codes, want[i]) {
			t.Fatalf("command %d: codes %v, want %v", i, ra.Codes, want[i])
		}
	}
	v, acls := a.ACLs()
	if v == v0 || !reflect.DeepEqual(acls, []ACL{deny, group}) {
		t.Fatalf("acls (version %d, was %d): %+v", v, v0, acls)
	}
	snap := snapshotBytes(t, a)
	if !bytes.Equal(snap, snapshotBytes(t, b)) {
		t.Fatal("same commands, different snapshots")
	}
	dst := openFSM(t, t.TempDir())
	before := dst.ACLVersion()
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if v, got := dst.ACLs(); v == before || !reflect.DeepEqual(got, acls) {
		t.Fatalf("after restore (version %d, was %d): %+v", v, before, got)
	}
}

// Metadata of a cluster below LevelAcls has no ACL section.
func TestMetaBelowACLLevelHasNoACLSection(t *testing.T) {
	f := openFSM(t, t.TempDir())
	f.Apply(1, Encode(&InitCluster{ClusterID: "c"}))
	f.Apply(2, Encode(&SetFeatureLevel{Level: LevelScram}))
	e := &enc{}
	f.encodeMeta(e)
	d := &dec{b: e.b}
	m := decodeMeta(d)
	if d.err != nil || len(d.b) != 0 || m.level != LevelScram || len(m.acls) != 0 {
		t.Fatalf("meta at level %d: err %v, %d bytes left, %+v", LevelScram, d.err, len(d.b), m)
	}
}
