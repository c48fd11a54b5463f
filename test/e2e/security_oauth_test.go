package e2e

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// jwtIssuer signs RS256 tokens with a key it publishes as a JWKS file.
type jwtIssuer struct {
	key *rsa.PrivateKey
	kid string
}

func newJWTIssuer(t *testing.T, dir string) (*jwtIssuer, string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "test-key", "use": "sig",
		"n": enc.EncodeToString(k.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(k.E)).Bytes())}}})
	return &jwtIssuer{key: k, kid: "test-key"}, writeFile(t, filepath.Join(dir, "jwks.json"), string(jwks))
}

func (j *jwtIssuer) token(t *testing.T, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": j.kid})
	c, _ := json.Marshal(claims)
	signed := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	d := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, j.key, crypto.SHA256, d[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + enc.EncodeToString(sig)
}

// TestSecurityOAuthBearer: with OAUTHBEARER enabled, a client whose JWT is
// signed by a key of the configured JWKS, from the expected issuer and for
// the expected audience, produces and consumes; its session ends with its
// token, so it re-authenticates with a fresh one on the same connection
// (KIP-368) or on a new one; an expired token, one of another issuer and an unsigned one
// are refused.
func TestSecurityOAuthBearer(t *testing.T) {
	dir := t.TempDir()
	iss, jwks := newJWTIssuer(t, dir)
	k := startSecureKgate(t, "--sasl-enabled-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-jwks-file", jwks,
		"--sasl-oauthbearer-expected-issuer", "https://idp.test", "--sasl-oauthbearer-expected-audience", "kafka,other",
		"--connections-max-reauth", "1h")
	claims := func(sub string, life time.Duration, issuer string) map[string]any {
		now := time.Now()
		return map[string]any{"sub": sub, "iss": issuer, "aud": "kafka", "iat": now.Unix(), "exp": now.Add(life).Unix()}
	}
	var logins atomic.Int32
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.kafka), kgo.AllowAutoTopicCreation(),
		kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			logins.Add(1)
			// Short-lived: the session ends with the token (3 s), well
			// before --connections-max-reauth.
			return oauth.Auth{Token: iss.token(t, claims("svc-orders", 3*time.Second, "https://idp.test"))}, nil
		})))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	step(t, "a client with a valid token produces, and keeps producing past its token's life", 30*time.Second, func(ctx context.Context) error {
		for i := 0; i < 6; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "oauth", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				return fmt.Errorf("produce %d: %w", i, err)
			}
			time.Sleep(time.Second) // the workload's pace: one record a second, across token lifetimes
		}
		if n := logins.Load(); n < 2 {
			return fmt.Errorf("the client authenticated %d times in 6 s with 3 s tokens; want a re-authentication", n)
		}
		return nil
	})
	for _, bad := range []struct{ name, token string }{
		{"expired", iss.token(t, claims("svc-orders", -time.Minute, "https://idp.test"))},
		{"other issuer's", iss.token(t, claims("svc-orders", time.Hour, "https://evil.test"))},
		{"unsigned", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." +
			base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x","exp":9999999999,"iss":"https://idp.test","aud":"kafka"}`)) + "."},
	} {
		step(t, "a client with an "+bad.name+" token is refused", 30*time.Second, func(ctx context.Context) error {
			c, err := kgo.NewClient(kgo.SeedBrokers(k.kafka), kgo.SASL(oauth.Auth{Token: bad.token}.AsMechanism()))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, c)
			if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
				return fmt.Errorf("metadata with a bad token: %v", err)
			}
			return nil
		})
	}
}
