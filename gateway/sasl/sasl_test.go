package sasl

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

func credential(t testing.TB, mech, password string) ScramCredential {
	salt := []byte("0123456789abcdef")
	salted, err := SaltPassword(ScramHash(mech), password, salt, MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	stored, server := KeysFromSalted(ScramHash(mech), salted)
	return ScramCredential{Salt: salt, Iterations: MinIterations, StoredKey: stored, ServerKey: server}
}

// exchange runs franz-go's SCRAM client against our server.
func exchange(t *testing.T, mech, user, password string, creds map[string]ScramCredential) error {
	t.Helper()
	auth := kscram.Auth{User: user, Pass: password}
	m := auth.AsSha256Mechanism()
	if mech == ScramSHA512 {
		m = auth.AsSha512Mechanism()
	}
	sess, msg, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewScramServer(mech, func(u string) (ScramCredential, bool) { c, ok := creds[u]; return c, ok })
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, done, err := srv.Step(msg)
		if err != nil {
			return err
		}
		cdone, next, cerr := sess.Challenge(resp)
		if cerr != nil {
			t.Fatalf("client refused the server's message: %v", cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done before the client")
			}
			if srv.User() != user {
				t.Fatalf("user %q", srv.User())
			}
			return nil
		}
		msg = next
	}
}

func TestScramWithFranzGoClient(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		creds := map[string]ScramCredential{"alice": credential(t, mech, "pencil"), "a,b=c": credential(t, mech, "x")}
		if err := exchange(t, mech, "alice", "pencil", creds); err != nil {
			t.Errorf("%s right password: %v", mech, err)
		}
		if err := exchange(t, mech, "a,b=c", "x", creds); err != nil {
			t.Errorf("%s escaped user name: %v", mech, err)
		}
		if err := exchange(t, mech, "alice", "pen", creds); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s wrong password: %v", mech, err)
		}
		if err := exchange(t, mech, "bob", "pencil", creds); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s unknown user: %v", mech, err)
		}
	}
}

// RFC 7677 §3: the salted password of "pencil" gives these keys.
func TestScramKeysRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := SaltPassword(sha256.New, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	_, server := KeysFromSalted(sha256.New, salted)
	// ServerSignature = HMAC(ServerKey, AuthMessage) from the RFC's example.
	am := "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	if got := base64.StdEncoding.EncodeToString(mac(sha256.New, server, am)); got != "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server signature %s", got)
	}
}

func TestScramRefusesMalformed(t *testing.T) {
	creds := map[string]ScramCredential{"u": credential(t, ScramSHA256, "p")}
	lookup := func(u string) (ScramCredential, bool) { c, ok := creds[u]; return c, ok }
	for _, first := range []string{"", "n", "x,,n=u,r=abc", "p=tls-unique,,n=u,r=abc", "n,,r=abc", "n,,n=,r=abc", "n,,n=u,r=", "n,a=v,n=u,r=abc", "n,,n=u=zz,r=abc"} {
		srv, _ := NewScramServer(ScramSHA256, lookup)
		if _, _, err := srv.Step([]byte(first)); err == nil {
			t.Errorf("client-first %q accepted", first)
		}
	}
	srv, _ := NewScramServer(ScramSHA256, lookup)
	sf, _, err := srv.Step([]byte("n,,n=u,r=abc"))
	if err != nil || !strings.HasPrefix(string(sf), "r=abc") {
		t.Fatalf("server-first %q %v", sf, err)
	}
	// A final message for another nonce is refused.
	if _, _, err := srv.Step([]byte("c=biws,r=abcdef,p=AAAA")); err == nil {
		t.Fatal("wrong nonce accepted")
	}
}

func TestPlain(t *testing.T) {
	lookup := func(u string) (string, bool) { return "pw", u == "admin" }
	for msg, ok := range map[string]bool{"\x00admin\x00pw": true, "admin\x00admin\x00pw": true, "\x00admin\x00px": false,
		"x\x00admin\x00pw": false, "\x00bob\x00pw": false, "admin\x00pw": false, "\x00\x00pw": false, "": false} {
		_, done, err := (&PlainServer{Lookup: lookup}).Step([]byte(msg))
		if done != ok || (err == nil) != ok {
			t.Errorf("%q: done=%v err=%v", msg, done, err)
		}
	}
}

// FuzzSASL feeds arbitrary client messages to every mechanism: they must
// fail cleanly, never panic, and never authenticate without the password.
func FuzzSASL(f *testing.F) {
	f.Add([]byte("\x00admin\x00pw"), []byte(""))
	f.Add([]byte("n,,n=u,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("n,a=u,n=u,r=abc,tokenauth=true"), []byte("c=biws,r=abcdef,p=="))
	creds := map[string]ScramCredential{"u": credential(f, ScramSHA256, "secret")}
	lookup := func(u string) (ScramCredential, bool) { c, ok := creds[u]; return c, ok }
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJSUzI1NiJ9.e30.AAAA\x01\x01"), []byte("\x01"))
	keys, err := ParseKeySet([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		oauth := &OAuthBearerServer{Keys: func() (*KeySet, error) { return keys, nil }}
		if _, done, _ := oauth.Step(first); done {
			t.Fatalf("OAUTHBEARER accepted a token no key signed: %q", first)
		}
		if _, done, _ := (&PlainServer{Lookup: func(string) (string, bool) { return "secret", true }}).Step(first); done && !strings.HasSuffix(string(first), "\x00secret") {
			t.Fatalf("PLAIN accepted %q", first)
		}
		srv, _ := NewScramServer(ScramSHA256, lookup)
		if _, _, err := srv.Step(first); err != nil {
			return
		}
		if _, done, _ := srv.Step(final); done {
			t.Fatalf("SCRAM accepted a final message without the password: %q", final)
		}
		if _, _, err := srv.Step(final); err == nil {
			t.Fatal("a third step was accepted")
		}
	})
}
