package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestClusterListenerOverrides: three nodes, each with an INTERNAL
// listener (SSL, its certificate from an internal CA, mutual TLS) and an
// EXTERNAL one (SASL_SSL with SCRAM-SHA-512 only, its certificate from
// another, "public" CA), set with --listener-tls-* and
// --listener-sasl-enabled-mechanisms and no shared TLS or SASL flag.
// Through the leader and a follower, with franz-go and kcat, each listener
// serves its own clients and refuses the other's credentials with the
// errors a Kafka broker gives; renewing EXTERNAL's certificate, on SIGHUP
// or by a change of its files, leaves INTERNAL's alone.
func TestClusterListenerOverrides(t *testing.T) {
	requireCommand(t, "kcat", repoRoot(t), "kcat", "-V")
	bin := kgateBinary(t)
	work := t.TempDir()
	intDir, pubDir := filepath.Join(work, "internal"), filepath.Join(work, "public")
	for _, d := range []struct{ dir, names string }{{intDir, "node-1,node-2,node-3,client"}, {pubDir, "node-1,node-2,node-3"}} {
		if out, err := runTool(work, bin, "certs", "-dir", d.dir, "-names", d.names, "-hosts", "127.0.0.1,localhost"); err != nil {
			t.Fatalf("kgate certs: %v\n%s", err, out)
		}
	}
	external := map[int32]string{}
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			external[n.id] = c.freeAddr()
			pem := func(dir, suffix string) string { return filepath.Join(dir, fmt.Sprintf("node-%d%s.pem", n.id, suffix)) }
			n.args = append(n.args, "--kafka-listener-name", "INTERNAL",
				"--listeners", "EXTERNAL://"+external[n.id],
				"--listener-security-protocol-map", "INTERNAL:SSL,EXTERNAL:SASL_SSL",
				"--listener-tls-cert", "INTERNAL:"+pem(intDir, "")+",EXTERNAL:"+pem(pubDir, ""),
				"--listener-tls-key", "INTERNAL:"+pem(intDir, "-key")+",EXTERNAL:"+pem(pubDir, "-key"),
				"--listener-tls-client-ca", "INTERNAL:"+filepath.Join(intDir, "ca.pem"),
				"--listener-sasl-enabled-mechanisms", "EXTERNAL:SCRAM-SHA-512")
		}
		// Node 2 also follows its files without a signal.
		c.node(2).args = append(c.node(2).args, "--tls-reload-interval", "200ms")
	})
	internal := c.kafkaAddrs()
	intPool, pubPool := caPool(intDir), caPool(pubDir)
	clientCert := clientKeyPair(intDir)
	mtls := &tls.Config{RootCAs: intPool, Certificates: []tls.Certificate{clientCert}}
	alice := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	internalOpts := []kgo.Opt{kgo.DialTLSConfig(mtls)}
	externalOpts := []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pubPool}), alice}

	leader := c.leader()
	follower := leader%3 + 1
	step(t, "an mTLS client on INTERNAL creates the SCRAM user (principal User:CN=client)", 30*time.Second, func(ctx context.Context) error {
		return addScramWith(ctx, internal[follower], internalOpts, "alice", "alice-secret")
	})
	for _, via := range []int32{leader, follower} {
		role := map[bool]string{true: "leader", false: "follower"}[via == leader]
		for _, l := range []struct {
			name  string
			addrs map[int32]string
			opts  []kgo.Opt
		}{{"INTERNAL", internal, internalOpts}, {"EXTERNAL", external, externalOpts}} {
			step(t, fmt.Sprintf("%s through the %s (node %d) names every node by its %s address", l.name, role, via, l.name), 30*time.Second,
				func(ctx context.Context) error { return checkListenerAddrs(ctx, l.addrs[via], l.addrs, l.opts) })
			step(t, fmt.Sprintf("produce and consume with a group on %s through the %s", l.name, role), time.Minute, func(ctx context.Context) error {
				return groupRoundTrip(ctx, l.addrs[via], fmt.Sprintf("overrides-%s-%d", l.name, via), l.opts)
			})
		}

		// Refusals, each with what a Kafka broker would answer.
		refused := func(what, addr string, want func(error) bool, opts ...kgo.Opt) {
			step(t, fmt.Sprintf("%s through the %s is refused", what, role), 30*time.Second, func(ctx context.Context) error {
				err := metadataErr(ctx, addr, opts...)
				if err == nil {
					return fmt.Errorf("answered")
				}
				if !want(err) {
					return fmt.Errorf("refused with %v", err)
				}
				return nil
			})
		}
		isErr := func(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }
		unknownCA := func(err error) bool {
			var ua x509.UnknownAuthorityError
			return errors.As(err, &ua)
		}
		certRequired := func(err error) bool { return strings.Contains(err.Error(), "certificate required") }
		closed := func(err error) bool { return err != nil } // the connection is closed before any answer

		refused("EXTERNAL's SCRAM credentials without a client certificate on INTERNAL", internal[via], certRequired,
			kgo.DialTLSConfig(&tls.Config{RootCAs: intPool}), alice)
		refused("a client trusting only the public CA on INTERNAL", internal[via], unknownCA,
			kgo.DialTLSConfig(&tls.Config{RootCAs: pubPool, Certificates: []tls.Certificate{clientCert}}))
		refused("INTERNAL's client certificate on EXTERNAL, trusting the internal CA", external[via], unknownCA, internalOpts...)
		refused("INTERNAL's client certificate without SASL on EXTERNAL", external[via], closed,
			kgo.DialTLSConfig(&tls.Config{RootCAs: pubPool, Certificates: []tls.Certificate{clientCert}}))
		refused("SCRAM-SHA-256 on EXTERNAL (SCRAM-SHA-512 only)", external[via], isErr(kerr.UnsupportedSaslMechanism),
			kgo.DialTLSConfig(&tls.Config{RootCAs: pubPool}), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
		refused("PLAIN on EXTERNAL", external[via], isErr(kerr.UnsupportedSaslMechanism),
			kgo.DialTLSConfig(&tls.Config{RootCAs: pubPool}), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
		refused("a wrong SCRAM password on EXTERNAL", external[via], isErr(kerr.SaslAuthenticationFailed),
			kgo.DialTLSConfig(&tls.Config{RootCAs: pubPool}), kgo.SASL(scram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism()))
		step(t, fmt.Sprintf("a SASL handshake on INTERNAL through the %s gets ILLEGAL_SASL_STATE", role), 30*time.Second, func(ctx context.Context) error {
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(internal[via])}, internalOpts...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			req := kmsg.NewPtrSASLHandshakeRequest()
			req.Version, req.Mechanism = 1, "SCRAM-SHA-512"
			resp, err := req.RequestWith(ctx, cl.Broker(-2147483648))
			if err != nil {
				return err
			}
			if !errorIs(resp.ErrorCode, kerr.IllegalSaslState) {
				return fmt.Errorf("SaslHandshake on an SSL listener: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
			return nil
		})
	}

	// kcat (librdkafka) on both listeners: produced through the follower,
	// read back through the leader.
	kcatInternal := []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + filepath.Join(intDir, "ca.pem"),
		"-X", "ssl.certificate.location=" + filepath.Join(intDir, "client.pem"), "-X", "ssl.key.location=" + filepath.Join(intDir, "client-key.pem")}
	kcatExternal := []string{"-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + filepath.Join(pubDir, "ca.pem"),
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
	for _, l := range []struct {
		name  string
		addrs map[int32]string
		sec   []string
	}{{"INTERNAL", internal, kcatInternal}, {"EXTERNAL", external, kcatExternal}} {
		t.Run("kcat "+l.name, func(t *testing.T) {
			topic := "kcat-" + strings.ToLower(l.name)
			p := exec.Command("kcat", append([]string{"-b", l.addrs[follower], "-P", "-t", topic}, l.sec...)...)
			p.Stdin = strings.NewReader("one\ntwo\n")
			if out, err := p.CombinedOutput(); err != nil {
				t.Fatalf("kcat -P through the follower: %v\n%s", err, out)
			}
			out, err := runTool(work, "kcat", append([]string{"-b", l.addrs[leader], "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e", "-q"}, l.sec...)...)
			if err != nil || out != "one\ntwo\n" {
				t.Fatalf("kcat -C through the leader: %v\n%q", err, out)
			}
		})
	}
	t.Run("kcat with the other listener's credentials", func(t *testing.T) {
		// SCRAM on INTERNAL: the TLS handshake fails without a client
		// certificate (TLS 1.3 alert 116, certificate required).
		other := append(append([]string{}, kcatExternal...), "-X", "ssl.ca.location="+filepath.Join(intDir, "ca.pem"))
		if out, err := runTool(work, "kcat", append([]string{"-b", internal[follower], "-L", "-m", "5"}, other...)...); err == nil || !strings.Contains(out, "certificate required") {
			t.Fatalf("SCRAM kcat on INTERNAL: %v\n%s", err, out)
		}
		// mTLS on EXTERNAL: no SASL, so no answer before the connection closes.
		other = append(append([]string{}, kcatInternal...), "-X", "ssl.ca.location="+filepath.Join(pubDir, "ca.pem"))
		if out, err := runTool(work, "kcat", append([]string{"-b", external[follower], "-L", "-m", "5"}, other...)...); err == nil {
			t.Fatalf("mTLS kcat on EXTERNAL got metadata:\n%s", out)
		}
		// PLAIN on EXTERNAL: not among its mechanisms.
		other = append(append([]string{}, kcatExternal...), "-X", "sasl.mechanisms=PLAIN")
		if out, err := runTool(work, "kcat", append([]string{"-b", external[follower], "-L", "-m", "5"}, other...)...); err == nil || !strings.Contains(out, "Unsupported SASL mechanism: broker's supported mechanisms: SCRAM-SHA-512") {
			t.Fatalf("PLAIN kcat on EXTERNAL: %v\n%s", err, out)
		}
	})

	// Renewing EXTERNAL's certificate on one node: SIGHUP reloads it, and
	// INTERNAL keeps its own.
	n1 := c.node(1)
	copyFile(t, filepath.Join(pubDir, "node-2.pem"), filepath.Join(pubDir, "node-1.pem"))
	copyFile(t, filepath.Join(pubDir, "node-2-key.pem"), filepath.Join(pubDir, "node-1-key.pem"))
	if err := n1.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	step(t, "node 1 logs that EXTERNAL's certificate was reloaded", 30*time.Second, func(ctx context.Context) error {
		for {
			for _, line := range strings.Split(string(must(os.ReadFile(n1.logPath))), "\n") {
				if strings.Contains(line, "TLS certificate reloaded") && strings.Contains(line, "listener=EXTERNAL") {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	step(t, "node 1 serves node-2's public certificate on EXTERNAL and still its own internal one on INTERNAL", 30*time.Second, func(ctx context.Context) error {
		if cn, err := servedName(ctx, external[1], &tls.Config{RootCAs: pubPool}); err != nil || cn != "node-2" {
			return fmt.Errorf("EXTERNAL serves %q (%v)", cn, err)
		}
		if cn, err := servedName(ctx, internal[1], mtls); err != nil || cn != "node-1" {
			return fmt.Errorf("INTERNAL serves %q (%v)", cn, err)
		}
		return nil
	})

	// On node 2 a changed file is enough.
	copyFile(t, filepath.Join(pubDir, "node-3.pem"), filepath.Join(pubDir, "node-2.pem"))
	copyFile(t, filepath.Join(pubDir, "node-3-key.pem"), filepath.Join(pubDir, "node-2-key.pem"))
	step(t, "node 2 serves node-3's public certificate on EXTERNAL once the files change, and its own internal one on INTERNAL", 30*time.Second, func(ctx context.Context) error {
		for {
			cn, err := servedName(ctx, external[2], &tls.Config{RootCAs: pubPool})
			if err == nil && cn == "node-3" {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("EXTERNAL serves %q (%v)", cn, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		if cn, err := servedName(ctx, internal[2], mtls); err != nil || cn != "node-2" {
			return fmt.Errorf("INTERNAL serves %q (%v)", cn, err)
		}
		return nil
	})
}

// metadataErr is the error a client with opts gets asking addr for metadata.
func metadataErr(ctx context.Context, addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(-2147483648))
	return err
}

// servedName is the common name of the certificate addr serves.
func servedName(ctx context.Context, addr string, cfg *tls.Config) (string, error) {
	d := tls.Dialer{Config: cfg, NetDialer: &net.Dialer{}}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	return nc.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, must(os.ReadFile(from)), 0o600); err != nil {
		t.Fatal(err)
	}
}
