package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// countingMechanism counts the authentications of a SASL mechanism: the
// first, and each KIP-368 re-authentication on the same connection.
type countingMechanism struct {
	sasl.Mechanism
	n *atomic.Int32
}

func (m countingMechanism) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	m.n.Add(1)
	return m.Mechanism.Authenticate(ctx, host)
}

// TestClusterListenerSASLSettings: three nodes, each with two SASL_SSL
// listeners that differ in every SASL setting a listener may have of its
// own. INTERNAL takes the shared ones (failure delay 100ms, no session
// lifetime, OAUTHBEARER tokens of the "corp" identity provider) and
// requires a client certificate; EXTERNAL has its own (failure delay 3s,
// session lifetime 2s, tokens of the "partner" provider) and asks for no
// certificate. Through the leader and a follower, with franz-go and kcat:
// each listener applies its own settings, and on INTERNAL a client
// certificate does not stand in for SASL, as on Kafka's SASL_SSL
// listeners.
func TestClusterListenerSASLSettings(t *testing.T) {
	requireCommand(t, "kcat", repoRoot(t), "kcat", "-V")
	bin := kgateBinary(t)
	work := t.TempDir()
	certDir := filepath.Join(work, "certs")
	if out, err := runTool(work, bin, "certs", "-dir", certDir, "-names", "node-1,node-2,node-3,client", "-hosts", "127.0.0.1,localhost"); err != nil {
		t.Fatalf("kgate certs: %v\n%s", err, out)
	}
	users := writeFile(t, filepath.Join(work, "plain-users"), "admin:admin-secret\n")
	corpDir, partnerDir := filepath.Join(work, "corp"), filepath.Join(work, "partner")
	for _, d := range []string{corpDir, partnerDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	corp, corpKeys := newJWTIssuer(t, corpDir)
	partner, partnerKeys := newJWTIssuer(t, partnerDir)
	const (
		externalDelay    = 3 * time.Second
		externalLifetime = 2 * time.Second
	)
	external := map[int32]string{}
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			external[n.id] = c.freeAddr()
			pem := func(suffix string) string { return filepath.Join(certDir, fmt.Sprintf("node-%d%s.pem", n.id, suffix)) }
			n.args = append(n.args, "--kafka-listener-name", "INTERNAL",
				"--listeners", "EXTERNAL://"+external[n.id],
				"--listener-security-protocol-map", "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL",
				"--kafka-tls-cert", pem(""), "--kafka-tls-key", pem("-key"),
				"--listener-tls-client-ca", "INTERNAL:"+filepath.Join(certDir, "ca.pem"),
				"--sasl-enabled-mechanisms", "PLAIN,OAUTHBEARER", "--sasl-plain-users-file", users,
				"--sasl-oauthbearer-jwks-file", corpKeys, "--sasl-oauthbearer-expected-issuer", "https://corp.test",
				"--connection-failed-authentication-delay", "100ms",
				"--listener-connection-failed-authentication-delay", "EXTERNAL:"+externalDelay.String(),
				"--listener-connections-max-reauth", "EXTERNAL:"+externalLifetime.String(),
				"--listener-sasl-oauthbearer-jwks-file", "EXTERNAL:"+partnerKeys,
				"--listener-sasl-oauthbearer-expected-issuer", "EXTERNAL:https://partner.test",
				"--listener-sasl-oauthbearer-expected-audience", "EXTERNAL:kafka")
		}
	})
	internal := c.kafkaAddrs()
	pool := caPool(certDir)
	mtls := kgo.DialTLSConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientKeyPair(certDir)}})
	serverOnly := kgo.DialTLSConfig(&tls.Config{RootCAs: pool})
	admin := plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
	token := func(j *jwtIssuer, issuer string) sasl.Mechanism {
		now := time.Now()
		return oauth.Auth{Token: j.token(t, map[string]any{"sub": "svc-orders", "iss": issuer, "aud": "kafka", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})}.AsMechanism()
	}
	listeners := []struct {
		name  string
		addrs map[int32]string
		tls   kgo.Opt
	}{{"INTERNAL", internal, mtls}, {"EXTERNAL", external, serverOnly}}

	leader := c.leader()
	follower := leader%3 + 1
	for _, via := range []int32{leader, follower} {
		role := map[bool]string{true: "leader", false: "follower"}[via == leader]
		for _, l := range listeners {
			step(t, fmt.Sprintf("PLAIN on %s through the %s: a consumer group reads what was produced", l.name, role), time.Minute, func(ctx context.Context) error {
				return groupRoundTrip(ctx, l.addrs[via], fmt.Sprintf("sasl-%s-%d", strings.ToLower(l.name), via), []kgo.Opt{l.tls, kgo.SASL(admin)})
			})
		}

		// OAUTHBEARER: each listener takes its own provider's tokens only.
		for _, w := range []struct {
			what string
			addr string
			tls  kgo.Opt
			mech sasl.Mechanism
			ok   bool
		}{
			{"a corp token on INTERNAL", internal[via], mtls, token(corp, "https://corp.test"), true},
			{"a partner token on EXTERNAL", external[via], serverOnly, token(partner, "https://partner.test"), true},
			{"a corp token on EXTERNAL", external[via], serverOnly, token(corp, "https://corp.test"), false},
			{"a partner token on INTERNAL", internal[via], mtls, token(partner, "https://partner.test"), false},
			{"a partner-signed token naming corp as issuer on EXTERNAL", external[via], serverOnly, token(partner, "https://corp.test"), false},
		} {
			step(t, fmt.Sprintf("%s through the %s is %s", w.what, role, map[bool]string{true: "accepted", false: "refused"}[w.ok]), 30*time.Second, func(ctx context.Context) error {
				err := metadataErr(ctx, w.addr, w.tls, kgo.SASL(w.mech))
				switch {
				case w.ok && err != nil:
					return err
				case !w.ok && !errors.Is(err, kerr.SaslAuthenticationFailed):
					return fmt.Errorf("want SASL_AUTHENTICATION_FAILED, got %v", err)
				}
				return nil
			})
		}

		// The failure delay: a wrong password is answered after the
		// listener's delay, then the connection closes.
		for _, l := range listeners {
			step(t, fmt.Sprintf("a wrong password on %s through the %s is refused after %s's delay", l.name, role, l.name), 30*time.Second, func(ctx context.Context) error {
				start := time.Now()
				err := metadataErr(ctx, l.addrs[via], l.tls, kgo.SASL(plain.Auth{User: "admin", Pass: "guess"}.AsMechanism()))
				took := time.Since(start)
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					return fmt.Errorf("want SASL_AUTHENTICATION_FAILED, got %v", err)
				}
				if l.name == "EXTERNAL" && took < externalDelay {
					return fmt.Errorf("refused after %v, before EXTERNAL's delay of %v", took, externalDelay)
				}
				if l.name == "INTERNAL" && took >= externalDelay {
					return fmt.Errorf("refused after %v: EXTERNAL's delay of %v applied on INTERNAL", took, externalDelay)
				}
				return nil
			})
		}

		// The session lifetime: franz-go re-authenticates on EXTERNAL's
		// connections as their sessions end (KIP-368), never on INTERNAL's.
		var externalAuths, internalAuths atomic.Int32
		step(t, fmt.Sprintf("a client on EXTERNAL through the %s re-authenticates as its sessions end, and keeps working", role), time.Minute, func(ctx context.Context) error {
			return keepAsking(ctx, external[via], []kgo.Opt{serverOnly, kgo.SASL(countingMechanism{admin, &externalAuths})}, func() bool { return externalAuths.Load() >= 3 })
		})
		step(t, fmt.Sprintf("a client on INTERNAL through the %s authenticates once over as long", role), time.Minute, func(ctx context.Context) error {
			// As many requests, over at least as long, as EXTERNAL needed
			// for two re-authentications.
			until := time.Now().Add(2 * externalLifetime)
			if err := keepAsking(ctx, internal[via], []kgo.Opt{mtls, kgo.SASL(countingMechanism{admin, &internalAuths})}, func() bool { return time.Now().After(until) }); err != nil {
				return err
			}
			if n := internalAuths.Load(); n != 1 {
				return fmt.Errorf("%d authentications on INTERNAL, which has no session lifetime", n)
			}
			return nil
		})

		// A client certificate does not stand in for SASL on a SASL_SSL
		// listener: the connection closes at the first request past the
		// SASL ones; SASL without the certificate fails the TLS handshake.
		step(t, fmt.Sprintf("INTERNAL through the %s: a client certificate alone, or SASL alone, is refused", role), 30*time.Second, func(ctx context.Context) error {
			if err := metadataErr(ctx, internal[via], mtls); err == nil {
				return errors.New("a client certificate without SASL was served")
			}
			if err := metadataErr(ctx, internal[via], serverOnly, kgo.SASL(admin)); err == nil || !strings.Contains(err.Error(), "certificate required") {
				return fmt.Errorf("SASL without a client certificate: %v", err)
			}
			return nil
		})
	}

	// kcat (librdkafka): certificate and SASL on INTERNAL, produced through
	// the follower and read through the leader; the certificate alone gets
	// nothing; EXTERNAL's wrong password is refused, after its delay.
	kcatTLS := []string{"-X", "ssl.ca.location=" + filepath.Join(certDir, "ca.pem"),
		"-X", "ssl.certificate.location=" + filepath.Join(certDir, "client.pem"), "-X", "ssl.key.location=" + filepath.Join(certDir, "client-key.pem")}
	kcatPlain := func(pass string) []string {
		return []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=admin", "-X", "sasl.password=" + pass}
	}
	t.Run("kcat", func(t *testing.T) {
		args := append(append([]string{}, kcatTLS...), kcatPlain("admin-secret")...)
		if out, err := runToolInput(work, "one\ntwo\n", "kcat", append([]string{"-b", internal[follower], "-P", "-t", "kcat-sasl-ssl"}, args...)...); err != nil {
			t.Fatalf("kcat -P with certificate and SASL through the follower: %v\n%s", err, out)
		}
		out, err := runTool(work, "kcat", append([]string{"-b", internal[leader], "-C", "-t", "kcat-sasl-ssl", "-o", "beginning", "-c", "2", "-e", "-q"}, args...)...)
		if err != nil || out != "one\ntwo\n" {
			t.Fatalf("kcat -C through the leader: %v\n%q", err, out)
		}
		if out, err := runTool(work, "kcat", append([]string{"-b", internal[leader], "-L", "-m", "5", "-X", "security.protocol=SSL"}, kcatTLS...)...); err == nil {
			t.Fatalf("kcat with a client certificate and no SASL got metadata:\n%s", out)
		}
		// librdkafka says how long the failed authentication took.
		for _, l := range []struct {
			name string
			addr string
			slow bool
		}{{"EXTERNAL", external[follower], true}, {"INTERNAL", internal[follower], false}} {
			out, err = runTool(work, "kcat", append(append([]string{"-b", l.addr, "-L", "-m", "5"}, kcatTLS...), kcatPlain("guess")...)...)
			m := regexp.MustCompile(`invalid credentials with SASL mechanism PLAIN \(after (\d+)ms in state AUTH_REQ`).FindStringSubmatch(out)
			if err == nil || m == nil {
				t.Fatalf("kcat with a wrong password on %s: %v\n%s", l.name, err, out)
			}
			took := time.Duration(must(strconv.Atoi(m[1]))) * time.Millisecond
			if slow := took >= externalDelay; slow != l.slow {
				t.Fatalf("kcat refused on %s after %v; EXTERNAL's delay is %v", l.name, took, externalDelay)
			}
		}
	})
}

// keepAsking asks addr for metadata, one request every 200ms on one
// client, until done or a request fails.
func keepAsking(ctx context.Context, addr string, opts []kgo.Opt, done func() bool) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for !done() {
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(-2147483648)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond): // the client's pace, not a wait for an event
		}
	}
	return nil
}
