package fsm

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomAlterClientQuotas sets or removes a random quota of a random
// entity (sometimes an invalid one, which Apply must refuse the same way
// every time).
func randomAlterClientQuotas(r *rand.Rand) *AlterClientQuotas {
	users := []QuotaEntityPart{{Type: QuotaUser, Name: "alice"}, {Type: QuotaUser, Default: true}}
	clients := []QuotaEntityPart{{Type: QuotaClientID, Name: "app"}, {Type: QuotaClientID, Default: true}}
	var ent QuotaEntity
	switch r.IntN(4) {
	case 0:
		ent = QuotaEntity{users[r.IntN(2)]}
	case 1:
		ent = QuotaEntity{clients[r.IntN(2)]}
	case 2:
		ent = QuotaEntity{users[r.IntN(2)], clients[r.IntN(2)]}
	default:
		ent = QuotaEntity{clients[0], users[0]} // wrong order: invalid
	}
	keys := []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "bogus"}
	op := QuotaOp{Key: keys[r.IntN(len(keys))], Value: float64(r.IntN(1 << 20)), Remove: r.IntN(3) == 0}
	return &AlterClientQuotas{Alterations: []QuotaAlteration{{Entity: ent, Ops: []QuotaOp{op}}}}
}

func quota(f *FSM, user, client, key string) (float64, string, string, bool) {
	return f.QuotaFor(user, client, key)
}

func TestClientQuotasPrecedenceAndRemoval(t *testing.T) {
	f := openFSM(t, t.TempDir())
	index := uint64(0)
	apply := func(c Command) any { index++; return f.Apply(index, Encode(c)) }
	apply(&SetFeatureLevel{Level: LevelClientQuotas})
	set := func(v float64, ent ...QuotaEntityPart) {
		t.Helper()
		res := apply(&AlterClientQuotas{Alterations: []QuotaAlteration{{Entity: ent, Ops: []QuotaOp{{Key: "producer_byte_rate", Value: v}}}}})
		if r := res.(*QuotaResults); len(r.Codes) != 1 || r.Codes[0] != 0 {
			t.Fatalf("set %v: %+v", ent, r)
		}
	}
	defClient := QuotaEntityPart{Type: QuotaClientID, Default: true}
	app := QuotaEntityPart{Type: QuotaClientID, Name: "app"}
	alice := QuotaEntityPart{Type: QuotaUser, Name: "alice"}
	if _, _, _, ok := quota(f, "alice", "app", "producer_byte_rate"); ok {
		t.Fatal("a quota before any was set")
	}
	set(100, defClient)
	if v, u, c, ok := quota(f, "bob", "other", "producer_byte_rate"); !ok || v != 100 || u != "" || c != "other" {
		t.Fatalf("default client quota: %v %q %q %v, want 100 measured per client id", v, u, c, ok)
	}
	set(200, app)
	set(300, alice)
	if v, u, c, _ := quota(f, "alice", "app", "producer_byte_rate"); v != 300 || u != "alice" || c != "" {
		t.Fatalf("user beats client id: %v %q %q", v, u, c)
	}
	set(400, alice, app)
	if v, u, c, _ := quota(f, "alice", "app", "producer_byte_rate"); v != 400 || u != "alice" || c != "app" {
		t.Fatalf("user+client beats user: %v %q %q", v, u, c)
	}
	if v, _, _, _ := quota(f, "bob", "app", "producer_byte_rate"); v != 200 {
		t.Fatalf("another user with client app: %v, want 200", v)
	}
	if _, _, _, ok := quota(f, "alice", "app", "consumer_byte_rate"); ok {
		t.Fatal("consumer_byte_rate was never set")
	}

	// Invalid alterations are refused whole; removing the last value drops the entity.
	res := apply(&AlterClientQuotas{Alterations: []QuotaAlteration{
		{Entity: QuotaEntity{app}, Ops: []QuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "nope", Value: 1}}},
		{Entity: QuotaEntity{app}, Ops: []QuotaOp{{Key: "producer_byte_rate", Value: -5}}},
		{Entity: QuotaEntity{alice, app}, Ops: []QuotaOp{{Key: "producer_byte_rate", Remove: true}}},
	}}).(*QuotaResults)
	if !reflect.DeepEqual(res.Codes, []int16{ErrInvalidRequest, ErrInvalidRequest, 0}) {
		t.Fatalf("codes %v", res.Codes)
	}
	if v, _, _, _ := quota(f, "alice", "app", "producer_byte_rate"); v != 300 {
		t.Fatalf("after removing user+client: %v, want the user's 300", v)
	}
	if n := len(f.ClientQuotas()); n != 3 {
		t.Fatalf("%d entities, want 3", n)
	}

	// The quotas survive a snapshot and restore.
	snap := snapshotBytes(t, f)
	g := openFSM(t, t.TempDir())
	if err := g.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.ClientQuotas(), f.ClientQuotas()) {
		t.Fatalf("restored %+v, had %+v", g.ClientQuotas(), f.ClientQuotas())
	}
}

func TestAlterClientQuotasEncoding(t *testing.T) {
	c := &AlterClientQuotas{Alterations: []QuotaAlteration{{
		Entity: QuotaEntity{{Type: QuotaUser, Default: true}, {Type: QuotaClientID, Name: "x"}},
		Ops:    []QuotaOp{{Key: "consumer_byte_rate", Value: 1.5}, {Key: "request_percentage", Remove: true}},
	}}}
	got, err := Decode(Encode(c))
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}
