package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

var enc = base64.RawURLEncoding

// testSigner signs tokens with an RSA and an EC key published in one JWKS.
type testSigner struct {
	rsaKey *rsa.PrivateKey
	ecKey  *ecdsa.PrivateKey
	jwks   []byte
}

func newTestSigner(t *testing.T) *testSigner {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	point, err := ek.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "use": "sig", "n": enc.EncodeToString(rk.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(rk.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": enc.EncodeToString(point[1:33]), "y": enc.EncodeToString(point[33:])},
	}})
	return &testSigner{rsaKey: rk, ecKey: ek, jwks: jwks}
}

func (s *testSigner) token(t *testing.T, alg, kid string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	signed := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	d := sha256.Sum256([]byte(signed))
	var sig []byte
	switch alg {
	case "RS256":
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, s.rsaKey, crypto.SHA256, d[:]); err != nil {
			t.Fatal(err)
		}
	case "ES256":
		r, ss, err := ecdsa.Sign(rand.Reader, s.ecKey, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		ss.FillBytes(sig[32:])
	}
	return signed + "." + enc.EncodeToString(sig)
}

func TestValidateToken(t *testing.T) {
	s := newTestSigner(t)
	ks, err := ParseKeySet(s.jwks)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	good := map[string]any{"sub": "alice", "iss": "https://idp.example", "aud": []string{"kafka"}, "exp": now.Unix() + 600, "iat": now.Unix()}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	rules := TokenRules{Issuer: "https://idp.example", Audiences: []string{"kafka"}, ClockSkew: 30 * time.Second}
	for _, tc := range []struct {
		name  string
		token string
		rules TokenRules
		want  string // "" accepted
	}{
		{"RS256", s.token(t, "RS256", "r1", good), rules, ""},
		{"ES256", s.token(t, "ES256", "e1", good), rules, ""},
		{"no kid", s.token(t, "RS256", "", good), rules, ""},
		{"string aud", s.token(t, "RS256", "r1", with("aud", "kafka")), rules, ""},
		{"custom sub claim", s.token(t, "RS256", "r1", with("client_id", "svc-7")), TokenRules{SubClaim: "client_id"}, ""},
		{"expired", s.token(t, "RS256", "r1", with("exp", now.Unix()-31)), rules, "expired"},
		{"within skew", s.token(t, "RS256", "r1", with("exp", now.Unix()-5)), rules, ""},
		{"not yet", s.token(t, "RS256", "r1", with("nbf", now.Unix()+60)), rules, "nbf"},
		{"no exp", s.token(t, "RS256", "r1", with("exp", nil)), rules, "exp"},
		{"wrong issuer", s.token(t, "RS256", "r1", with("iss", "https://evil")), rules, "issuer"},
		{"wrong audience", s.token(t, "RS256", "r1", with("aud", "other")), rules, "audience"},
		{"no sub", s.token(t, "RS256", "r1", with("sub", nil)), rules, "sub"},
		{"unknown kid", s.token(t, "RS256", "r9", good), rules, "no key"},
		{"kid of another key type", s.token(t, "RS256", "e1", good), rules, "no key"},
		{"alg none", enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString([]byte(`{"sub":"alice","exp":9999999999}`)) + ".", rules, "algorithm"},
		{"tampered", strings.Replace(s.token(t, "RS256", "r1", good), ".", ".e30", 1), rules, ""},
		{"not a JWT", "abc", rules, "not a signed JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := ValidateToken(tc.token, ks, tc.rules, now)
			switch {
			case tc.name == "tampered":
				if err == nil {
					t.Fatal("a tampered token was accepted")
				}
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && tok.Principal == "":
				t.Fatal("no principal")
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// TestOAuthBearerExchange: a good token authenticates at once; a bad one
// gets RFC 7628's error challenge, and the client's %x01 then fails.
func TestOAuthBearerExchange(t *testing.T) {
	s := newTestSigner(t)
	ks, _ := ParseKeySet(s.jwks)
	exp := time.Now().Add(time.Hour).Unix()
	srv := func() *OAuthBearerServer {
		return &OAuthBearerServer{Keys: func() (*KeySet, error) { return ks, nil }}
	}
	initial := func(tok string) []byte { return []byte(fmt.Sprintf("n,,\x01auth=Bearer %s\x01\x01", tok)) }

	o := srv()
	resp, done, err := o.Step(initial(s.token(t, "ES256", "e1", map[string]any{"sub": "bob", "exp": exp})))
	if err != nil || !done || len(resp) != 0 || o.User() != "bob" || o.Expires().Unix() != exp {
		t.Fatalf("good token: %q %v %v user %q expires %v", resp, done, err, o.User(), o.Expires())
	}
	o = srv()
	resp, done, err = o.Step(initial(s.token(t, "ES256", "e1", map[string]any{"sub": "bob", "exp": 1})))
	if err != nil || done || string(resp) != `{"status":"invalid_token"}` {
		t.Fatalf("expired token: %q %v %v", resp, done, err)
	}
	if _, _, err := o.Step([]byte{1}); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("after the error challenge: %v", err)
	}
	for _, bad := range []string{"", "y,,\x01auth=Bearer x\x01\x01", "n,,\x01auth=Basic x\x01\x01", "n,,\x01host=h\x01\x01", "n,,\x01auth=Bearer x"} {
		if _, _, err := srv().Step([]byte(bad)); err == nil || errors.Is(err, ErrAuthFailed) {
			t.Errorf("malformed %q: %v", bad, err)
		}
	}
}

func TestParseKeySet(t *testing.T) {
	for _, bad := range []string{`{}`, `{"keys": []}`, `{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}`, `not json`,
		`{"keys": [{"kty": "RSA", "n": "", "e": "AQAB"}]}`, `{"keys": [{"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"}]}`} {
		if _, err := ParseKeySet([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
