package fsm

import "sort"

// SCRAM credentials (RFC 5802) of SASL users, replicated so every node can
// authenticate every user. Only the salt, the iteration count and the two
// derived keys are kept: never the password, nor the salted password.

// KindAlterScramCredentials is the one SCRAM command. Its number is set
// apart from the next free kinds so concurrent branches do not collide.
const KindAlterScramCredentials Kind = 32

// ScramMechanism numbers the SCRAM mechanisms as Kafka does in
// DescribeUserScramCredentials and AlterUserScramCredentials.
type ScramMechanism int8

const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// ErrResourceNotFound is Kafka's RESOURCE_NOT_FOUND: a deletion of a
// credential that does not exist.
const ErrResourceNotFound int16 = 91

// ScramCredential is one user's credential for one mechanism.
type ScramCredential struct {
	Mechanism  ScramMechanism
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// ScramUpsert sets a user's credential for its mechanism.
type ScramUpsert struct {
	User       string
	Credential ScramCredential
}

// ScramDeletion removes a user's credential for one mechanism.
type ScramDeletion struct {
	User      string
	Mechanism ScramMechanism
}

// AlterScramCredentials applies deletions, then upserts. The leader has
// validated them and derived the keys; Apply only stores.
type AlterScramCredentials struct {
	Deletions []ScramDeletion
	Upserts   []ScramUpsert
}

func (*AlterScramCredentials) Kind() Kind { return KindAlterScramCredentials }

func (c *AlterScramCredentials) encode(e *enc) {
	e.uvar(uint64(len(c.Deletions)))
	for _, d := range c.Deletions {
		e.str(d.User)
		e.u8(uint8(d.Mechanism))
	}
	e.uvar(uint64(len(c.Upserts)))
	for _, u := range c.Upserts {
		e.str(u.User)
		encodeScramCredential(e, u.Credential)
	}
}

func encodeScramCredential(e *enc, c ScramCredential) {
	e.u8(uint8(c.Mechanism))
	e.i32(c.Iterations)
	e.bytes(c.Salt)
	e.bytes(c.StoredKey)
	e.bytes(c.ServerKey)
}

func decodeScramCredential(d *dec) ScramCredential {
	return ScramCredential{
		Mechanism:  ScramMechanism(d.u8()),
		Iterations: d.i32(),
		Salt:       append([]byte(nil), d.bytes()...),
		StoredKey:  append([]byte(nil), d.bytes()...),
		ServerKey:  append([]byte(nil), d.bytes()...),
	}
}

func decodeAlterScramCredentials(d *dec) *AlterScramCredentials {
	c := &AlterScramCredentials{}
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		c.Deletions = append(c.Deletions, ScramDeletion{User: d.str(), Mechanism: ScramMechanism(d.u8())})
	}
	n = d.count(9)
	for i := 0; i < n && d.err == nil; i++ {
		c.Upserts = append(c.Upserts, ScramUpsert{User: d.str(), Credential: decodeScramCredential(d)})
	}
	return c
}

// ScramResult has one code per deletion, then one per upsert, in command
// order.
type ScramResult struct{ Codes []int16 }

func (f *FSM) applyAlterScramCredentials(c *AlterScramCredentials) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &ScramResult{}
	for _, d := range c.Deletions {
		creds := f.scram[d.User]
		if _, ok := creds[d.Mechanism]; !ok {
			res.Codes = append(res.Codes, ErrResourceNotFound)
			continue
		}
		delete(creds, d.Mechanism)
		if len(creds) == 0 {
			delete(f.scram, d.User)
		}
		res.Codes = append(res.Codes, ErrNone)
	}
	for _, u := range c.Upserts {
		if f.scram[u.User] == nil {
			f.scram[u.User] = map[ScramMechanism]ScramCredential{}
		}
		f.scram[u.User][u.Credential.Mechanism] = u.Credential
		res.Codes = append(res.Codes, ErrNone)
	}
	return res
}

// ScramCredentialFor returns a user's credential for a mechanism.
func (f *FSM) ScramCredentialFor(user string, m ScramMechanism) (ScramCredential, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.scram[user][m]
	return c, ok
}

// ScramUsers lists every user with SCRAM credentials and the mechanisms and
// iteration counts they have (no key material), users sorted by name.
func (f *FSM) ScramUsers() map[string][]ScramCredential {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string][]ScramCredential, len(f.scram))
	for user, creds := range f.scram {
		for _, c := range creds {
			out[user] = append(out[user], ScramCredential{Mechanism: c.Mechanism, Iterations: c.Iterations})
		}
		sort.Slice(out[user], func(i, j int) bool { return out[user][i].Mechanism < out[user][j].Mechanism })
	}
	return out
}

// encodeScramLocked writes the credentials in canonical order: by user,
// then mechanism.
func (f *FSM) encodeScramLocked(e *enc) {
	users := make([]string, 0, len(f.scram))
	for u := range f.scram {
		users = append(users, u)
	}
	sort.Strings(users)
	e.uvar(uint64(len(users)))
	for _, u := range users {
		e.str(u)
		mechs := make([]int, 0, len(f.scram[u]))
		for m := range f.scram[u] {
			mechs = append(mechs, int(m))
		}
		sort.Ints(mechs)
		e.uvar(uint64(len(mechs)))
		for _, m := range mechs {
			encodeScramCredential(e, f.scram[u][ScramMechanism(m)])
		}
	}
}

func decodeScram(d *dec) map[string]map[ScramMechanism]ScramCredential {
	out := map[string]map[ScramMechanism]ScramCredential{}
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		user := d.str()
		nm := d.count(8)
		creds := make(map[ScramMechanism]ScramCredential, nm)
		for j := 0; j < nm && d.err == nil; j++ {
			c := decodeScramCredential(d)
			creds[c.Mechanism] = c
		}
		out[user] = creds
	}
	return out
}
