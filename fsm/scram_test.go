package fsm

import (
	"bytes"
	"reflect"
	"testing"
)

func scramUpsert(user string, m ScramMechanism, iter int32) ScramUpsert {
	return ScramUpsert{User: user, Credential: ScramCredential{Mechanism: m, Iterations: iter,
		Salt: []byte("salt-" + user), StoredKey: []byte("stored-" + user), ServerKey: []byte("server-" + user)}}
}

func TestScramCredentialsApplySnapshotRestore(t *testing.T) {
	cmds := []*AlterScramCredentials{
		{Upserts: []ScramUpsert{scramUpsert("alice", ScramSHA512, 4096), scramUpsert("alice", ScramSHA256, 8192), scramUpsert("bob", ScramSHA256, 4096)}},
		{Deletions: []ScramDeletion{{User: "bob", Mechanism: ScramSHA256}, {User: "carol", Mechanism: ScramSHA512}}},
		{Upserts: []ScramUpsert{scramUpsert("alice", ScramSHA512, 16384)}},
	}
	want := [][]int16{{0, 0, 0}, {0, ErrResourceNotFound}, {0}}
	a, b := openFSM(t, t.TempDir()), openFSM(t, t.TempDir())
	level := Encode(&SetFeatureLevel{Level: LevelScram})
	a.Apply(1, level)
	b.Apply(1, level)
	for i, c := range cmds {
		entry := Encode(c)
		decoded, err := Decode(entry)
		if err != nil || !bytes.Equal(Encode(decoded), entry) {
			t.Fatalf("command %d does not survive encoding: %v", i, err)
		}
		ra := a.Apply(uint64(i+2), entry).(*ScramResult)
		b.Apply(uint64(i+2), entry)
		if !reflect.DeepEqual(ra.Codes, want[i]) {
			t.Fatalf("command %d: codes %v, want %v", i, ra.Codes, want[i])
		}
	}
	users := a.ScramUsers()
	if len(users) != 1 || len(users["alice"]) != 2 || users["alice"][1].Iterations != 16384 || users["alice"][0].StoredKey != nil {
		t.Fatalf("users: %+v", users)
	}
	if c, ok := a.ScramCredentialFor("alice", ScramSHA512); !ok || string(c.StoredKey) != "stored-alice" {
		t.Fatalf("alice: %+v %v", c, ok)
	}
	if _, ok := a.ScramCredentialFor("bob", ScramSHA256); ok {
		t.Fatal("bob's deleted credential is still there")
	}
	snap := snapshotBytes(t, a)
	if !bytes.Equal(snap, snapshotBytes(t, b)) {
		t.Fatal("same commands, different snapshots")
	}
	dst := openFSM(t, t.TempDir())
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if c, ok := dst.ScramCredentialFor("alice", ScramSHA256); !ok || c.Iterations != 8192 || string(c.ServerKey) != "server-alice" {
		t.Fatalf("after restore: %+v %v", c, ok)
	}
}

// Metadata of a cluster below LevelScram (as earlier releases wrote it)
// has no SCRAM section; it decodes with no users and nothing left over.
func TestMetaBelowScramLevelHasNoScramSection(t *testing.T) {
	f := openFSM(t, t.TempDir())
	f.Apply(1, Encode(&InitCluster{ClusterID: "c"}))
	f.Apply(2, Encode(&SetFeatureLevel{Level: LevelClientQuotas}))
	e := &enc{}
	f.encodeMeta(e)
	d := &dec{b: e.b}
	m := decodeMeta(d)
	if d.err != nil || len(d.b) != 0 || m.clusterID != "c" || m.level != LevelClientQuotas || len(m.scram) != 0 {
		t.Fatalf("meta at level %d: err %v, %d bytes left, %+v", LevelClientQuotas, d.err, len(d.b), m)
	}
}
