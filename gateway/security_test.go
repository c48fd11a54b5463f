package gateway_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/certs"
	"github.com/kgate/kgate/gateway/sasl"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written to a temporary directory.
type testPKI struct {
	dir                   string
	ca                    *certs.CA
	pool                  *x509.CertPool
	serverCert, serverKey string
	clientCert, clientKey string
	caFile                string
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := certs.NewCA("kgate test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{dir: t.TempDir(), ca: ca, pool: x509.NewCertPool()}
	p.pool.AddCert(ca.Cert)
	p.caFile = filepath.Join(p.dir, "ca.pem")
	if err := os.WriteFile(p.caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	p.serverCert, p.serverKey = p.issue(t, "node-1")
	p.clientCert, p.clientKey = p.issue(t, "client")
	return p
}

func (p *testPKI) issue(t *testing.T, name string) (string, string) {
	t.Helper()
	is, err := p.ca.Issue(name, []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := is.WriteFiles(p.dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// serverTLS loads the server certificate; clientCA turns on mutual TLS.
func (p *testPKI) serverTLS(t *testing.T, clientCA bool) *certs.Reloader {
	t.Helper()
	f := certs.Files{Cert: p.serverCert, Key: p.serverKey}
	if clientCA {
		f.ClientCA = p.caFile
	}
	r, err := certs.NewReloader(f, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (p *testPKI) clientTLS(t *testing.T, withCert bool) *tls.Config {
	t.Helper()
	c := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

// roundTrip produces one record to a fresh topic and reads it back.
func roundTrip(t *testing.T, addr, topic string, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(2),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := testCtx(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("secret-" + topic)}).FirstErr(); err != nil {
		return err
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		for _, r := range fs.Records() {
			if string(r.Value) == "secret-"+topic {
				return nil
			}
		}
	}
}

// authenticate connects a client and lists topics: the error a user sees.
func authenticate(t *testing.T, addr string, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(1)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kadm.NewClient(cl).ListTopics(testCtx(t))
	return err
}

func TestTLSListenerMutualTLS(t *testing.T) {
	pki := newPKI(t)
	rl := pki.serverTLS(t, true)
	n := startNode(t, func(c *gateway.Config) { c.TLS = rl.ServerConfig() })

	if err := roundTrip(t, n.addr, "mtls", kgo.DialTLSConfig(pki.clientTLS(t, true))); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	// Without a client certificate the handshake fails.
	nc, err := tls.Dial("tcp", n.addr, pki.clientTLS(t, false))
	if err == nil {
		err = nc.Handshake()
		if err == nil {
			_, err = nc.Read(make([]byte, 1))
		}
		nc.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate got through")
	}
	// TLS 1.1 is refused.
	old := pki.clientTLS(t, true)
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if nc, err := tls.Dial("tcp", n.addr, old); err == nil {
		nc.Close()
		t.Fatal("TLS 1.1 handshake succeeded")
	}
	// A plaintext client gets the connection closed, never an answer.
	raw := dialRaw(t, n.addr)
	raw.send(kmsg.NewPtrApiVersionsRequest())
	expectClosed(t, raw.nc)
}

func TestTLSCertificateReloadKeepsListener(t *testing.T) {
	pki := newPKI(t)
	rl := pki.serverTLS(t, false)
	n := startNode(t, func(c *gateway.Config) { c.TLS = rl.ServerConfig() })
	cfg := pki.clientTLS(t, false)
	serverCN := func() string {
		nc, err := tls.Dial("tcp", n.addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		return nc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := serverCN(); cn != "node-1" {
		t.Fatalf("certificate %q, want node-1", cn)
	}
	cl := newClient(t, n.addr, kgo.DialTLSConfig(cfg))
	if err := cl.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Replace the files with a newly issued certificate and reload.
	is, err := pki.ca.Issue("node-1-renewed", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pki.serverCert, is.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pki.serverKey, is.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rl.Reload(); err != nil {
		t.Fatal(err)
	}
	if cn := serverCN(); cn != "node-1-renewed" {
		t.Fatalf("after reload: certificate %q, want node-1-renewed", cn)
	}
	// A broken file keeps the previous certificate.
	if err := os.WriteFile(pki.serverKey, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rl.Reload(); err == nil {
		t.Fatal("reload of a broken key succeeded")
	}
	if cn := serverCN(); cn != "node-1-renewed" {
		t.Fatalf("after a failed reload: certificate %q", cn)
	}
	// The connection opened before the reload still works.
	if _, err := kadm.NewClient(cl).ListTopics(testCtx(t)); err != nil {
		t.Fatalf("old connection after reload: %v", err)
	}
}

// saslNode starts a TLS + SASL node with a PLAIN admin user.
func saslNode(t *testing.T, mod func(*gateway.SASL)) (*testNode, *testPKI) {
	t.Helper()
	pki := newPKI(t)
	rl := pki.serverTLS(t, false)
	s := &gateway.SASL{
		Mechanisms:   []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"},
		PlainUsers:   func(u string) (string, bool) { return "admin-secret", u == "admin" },
		FailureDelay: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(s)
	}
	n := startNode(t, func(c *gateway.Config) { c.TLS, c.SASL = rl.ServerConfig(), s })
	return n, pki
}

func addScramUser(t *testing.T, adm *kadm.Client, user, password string) {
	t.Helper()
	res, err := adm.AlterUserSCRAMs(testCtx(t), nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password},
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 8192, Password: password},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
}

func TestSASLScramOverTLS(t *testing.T) {
	n, pki := saslNode(t, nil)
	tlsOpt := kgo.DialTLSConfig(pki.clientTLS(t, false))
	adminClient := newClient(t, n.addr, tlsOpt, kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	admin := kadm.NewClient(adminClient)
	addScramUser(t, admin, "alice", "alice-pw")

	described, err := admin.DescribeUserSCRAMs(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := described["alice"]
	if !ok || len(d.CredInfos) != 2 || d.CredInfos[0].Mechanism != kadm.ScramSha256 || d.CredInfos[0].Iterations != 8192 ||
		d.CredInfos[1].Mechanism != kadm.ScramSha512 || d.CredInfos[1].Iterations != 4096 {
		t.Fatalf("described: %+v", described)
	}
	if err := roundTrip(t, n.addr, "scram512", tlsOpt, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism())); err != nil {
		t.Fatalf("SCRAM-SHA-512: %v", err)
	}
	if err := roundTrip(t, n.addr, "scram256", tlsOpt, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism())); err != nil {
		t.Fatalf("SCRAM-SHA-256: %v", err)
	}
	// Only keys are stored, never the password.
	c, ok := n.fsm.ScramCredentialFor("alice", 2)
	if !ok || strings.Contains(string(c.StoredKey)+string(c.ServerKey)+string(c.Salt), "alice-pw") || len(c.StoredKey) != 64 {
		t.Fatalf("stored credential: %+v", c)
	}

	// Errors per user, as Kafka gives them (raw, since kadm checks
	// iterations itself).
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "nobody", Mechanism: 1}, {Name: "twice", Mechanism: 2}}
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "weak", Mechanism: 1, Iterations: 1000, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "strong", Mechanism: 1, Iterations: 20000, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "twice", Mechanism: 2, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "odd", Mechanism: 3, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
	}
	ar, err := alter.RequestWith(testCtx(t), adminClient)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{"nobody": kerr.ResourceNotFound, "weak": kerr.UnacceptableCredential,
		"strong": kerr.UnacceptableCredential, "twice": kerr.DuplicateResource, "odd": kerr.UnsupportedSaslMechanism}
	if len(ar.Results) != len(want) {
		t.Fatalf("results: %+v", ar.Results)
	}
	for _, r := range ar.Results {
		if r.ErrorCode != want[r.User].Code {
			t.Errorf("user %s: code %d, want %v", r.User, r.ErrorCode, want[r.User])
		}
	}
	if _, ok := n.fsm.ScramUsers()["twice"]; ok {
		t.Error("a refused upsert was applied")
	}
	// Deleting the credential locks the user out.
	res, err := admin.AlterUserSCRAMs(testCtx(t), []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}
	err = authenticate(t, n.addr, tlsOpt, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("after delete: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// tlsRaw opens a TLS connection for raw requests.
func tlsRaw(t *testing.T, addr string, cfg *tls.Config) *rawConn {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: ioTimeout}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, corr: 1000}
}

func saslAuth(c *rawConn, mech string, msg []byte) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		c.t.Fatalf("handshake %s: error %d", mech, r.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(2)
	au.SASLAuthBytes = msg
	return c.do(au).(*kmsg.SASLAuthenticateResponse)
}

func TestSASLRefusals(t *testing.T) {
	n, pki := saslNode(t, nil)
	cfg := pki.clientTLS(t, false)
	tlsOpt := kgo.DialTLSConfig(cfg)

	t.Run("wrong password", func(t *testing.T) {
		err := authenticate(t, n.addr, tlsOpt, kgo.SASL(plain.Auth{User: "admin", Pass: "guess"}.AsMechanism()))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("got %v, want SASL_AUTHENTICATION_FAILED", err)
		}
		c := tlsRaw(t, n.addr, cfg)
		start := time.Now()
		r := saslAuth(c, "PLAIN", []byte("\x00admin\x00guess"))
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "invalid credentials") {
			t.Fatalf("answer %d %v", r.ErrorCode, r.ErrorMessage)
		}
		if waited := time.Since(start); waited < 50*time.Millisecond {
			t.Errorf("failure answered after %v, before the failure delay", waited)
		}
		expectClosed(t, c.nc)
	})
	t.Run("unknown SCRAM user", func(t *testing.T) {
		err := authenticate(t, n.addr, tlsOpt, kgo.SASL(scram.Auth{User: "mallory", Pass: "pw"}.AsSha512Mechanism()))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("got %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})
	t.Run("wrong mechanism", func(t *testing.T) {
		c := tlsRaw(t, n.addr, cfg)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "GSSAPI"
		r := c.do(hs).(*kmsg.SASLHandshakeResponse)
		if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(r.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
			t.Fatalf("answer %d %v", r.ErrorCode, r.SupportedMechanisms)
		}
		expectClosed(t, c.nc)
	})
	t.Run("request before authentication", func(t *testing.T) {
		c := tlsRaw(t, n.addr, cfg)
		if r := c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
			t.Fatalf("ApiVersions: %d", r.ErrorCode)
		}
		c.send(kmsg.NewPtrMetadataRequest())
		expectClosed(t, c.nc)
	})
	t.Run("garbage before the handshake", func(t *testing.T) {
		c := tlsRaw(t, n.addr, cfg)
		c.write([]byte{0, 0, 0, 12, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8})
		expectClosed(t, c.nc)
	})
	t.Run("plaintext client", func(t *testing.T) {
		err := authenticate(t, n.addr, kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
		if err == nil {
			t.Fatal("a plaintext client got through a TLS listener")
		}
	})
	// None of it reached data: no topic was created.
	if len(n.backend.Topics()) != 0 {
		t.Fatalf("topics after refused clients: %v", n.backend.Topics())
	}
}

func TestSASLSessionLifetime(t *testing.T) {
	n, pki := saslNode(t, func(s *gateway.SASL) { s.SessionLifetime = 300 * time.Millisecond })
	cfg := pki.clientTLS(t, false)
	// A raw connection that does not re-authenticate is closed once the
	// session ends.
	c := tlsRaw(t, n.addr, cfg)
	r := saslAuth(c, "PLAIN", []byte("\x00admin\x00admin-secret"))
	if r.ErrorCode != 0 || r.SessionLifetimeMillis != 300 {
		t.Fatalf("authenticate: %d lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
	}
	deadline := time.Now().Add(ioTimeout)
	for {
		corr := c.send(kmsg.NewPtrMetadataRequest())
		got, _, err := c.readFrame()
		if err != nil {
			break // closed: the session ended
		}
		if got != corr {
			t.Fatalf("correlation %d, want %d", got, corr)
		}
		if time.Now().After(deadline) {
			t.Fatal("connection still served after its session lifetime")
		}
		time.Sleep(50 * time.Millisecond) // pacing of the poll, not a wait for an event
	}
	// franz-go re-authenticates on the same connection (KIP-368) and keeps
	// working across several lifetimes.
	cl := newClient(t, n.addr, kgo.DialTLSConfig(cfg), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	adm := kadm.NewClient(cl)
	until := time.Now().Add(time.Second)
	for time.Now().Before(until) {
		if _, err := adm.ListTopics(testCtx(t)); err != nil {
			t.Fatalf("across re-authentication: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSASLSSLWithClientCertificate: on a listener with TLS, a client CA
// and SASL, a verified client certificate only passes the TLS handshake:
// the client must still authenticate with SASL, which names its principal,
// as on a Kafka SASL_SSL listener with ssl.client.auth=required. With
// CertificateInsteadOfSASL the certificate authenticates on its own, as
// kgate did before.
func TestSASLSSLWithClientCertificate(t *testing.T) {
	pki := newPKI(t)
	rl := pki.serverTLS(t, true)
	saslCfg := func() *gateway.SASL {
		return &gateway.SASL{Mechanisms: []string{"PLAIN"}, PlainUsers: func(u string) (string, bool) { return "admin-secret", u == "admin" }}
	}
	n := startNode(t, func(c *gateway.Config) { c.TLS, c.SASL = rl.ServerConfig(), saslCfg() })
	withCert := pki.clientTLS(t, true)

	// The certificate alone: the first request past ApiVersions closes
	// the connection, as Kafka does before authentication.
	c := tlsRaw(t, n.addr, withCert)
	c.send(kmsg.NewPtrMetadataRequest())
	expectClosed(t, c.nc)
	// Certificate and SASL: served, as the SASL user.
	c = tlsRaw(t, n.addr, withCert)
	if r := saslAuth(c, "PLAIN", []byte("\x00admin\x00admin-secret")); r.ErrorCode != 0 {
		t.Fatalf("PLAIN with a client certificate: error %d", r.ErrorCode)
	}
	if err := roundTrip(t, n.addr, "cert-and-sasl", kgo.DialTLSConfig(withCert), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())); err != nil {
		t.Fatalf("client certificate and SASL: %v", err)
	}
	// SASL without the certificate does not pass the TLS handshake.
	if err := authenticate(t, n.addr, kgo.DialTLSConfig(pki.clientTLS(t, false)), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())); err == nil {
		t.Fatal("SASL without the required client certificate was served")
	}

	legacy := startNode(t, func(c *gateway.Config) {
		c.TLS, c.SASL = rl.ServerConfig(), saslCfg()
		c.SASL.CertificateInsteadOfSASL = true
	})
	if err := roundTrip(t, legacy.addr, "cert-auth", kgo.DialTLSConfig(withCert)); err != nil {
		t.Fatalf("client certificate as authentication with CertificateInsteadOfSASL: %v", err)
	}
}

// TestListenerCertificateInsteadOfSASL: a listener's own
// CertificateInsteadOfSASL replaces the shared one there and only there,
// whichever way each is set.
func TestListenerCertificateInsteadOfSASL(t *testing.T) {
	pki := newPKI(t)
	rl := pki.serverTLS(t, true)
	withCert := pki.clientTLS(t, true)
	for _, shared := range []bool{false, true} {
		own := !shared
		n := startNode(t, func(c *gateway.Config) {
			c.SASL = &gateway.SASL{Mechanisms: []string{"PLAIN"}, PlainUsers: func(u string) (string, bool) { return "admin-secret", u == "admin" },
				CertificateInsteadOfSASL: shared}
			c.Listeners = []gateway.Listener{
				{Name: "SHARED", Addr: c.Addr, TLS: rl.ServerConfig(), SASL: true},
				{Name: "OWN", Addr: "127.0.0.1:0", TLS: rl.ServerConfig(), SASL: true, CertificateInsteadOfSASL: &own},
			}
		})
		for _, l := range []struct {
			name    string
			instead bool
		}{{"SHARED", shared}, {"OWN", own}} {
			c := tlsRaw(t, n.srv.ListenerAddr(l.name).String(), withCert)
			req := kmsg.NewPtrMetadataRequest()
			corr := c.send(req)
			if l.instead {
				// The certificate authenticated the connection: served.
				if resp := c.recv(corr, req).(*kmsg.MetadataResponse); len(resp.Brokers) == 0 {
					t.Fatalf("shared %v, listener %s: Metadata with a client certificate alone names no broker", shared, l.name)
				}
				continue
			}
			// SASL still required: the first request past ApiVersions
			// closes the connection.
			expectClosed(t, c.nc)
		}
	}
}

// TestListenerSASLSettings: a listener's own failure delay, session
// lifetime and OAUTHBEARER keys and rules replace the shared ones there
// and only there (Kafka's listener.name.<name>.* settings).
func TestListenerSASLSettings(t *testing.T) {
	pki := newPKI(t)
	rl := pki.serverTLS(t, false)
	shared, own := newJWTSigner(t), newJWTSigner(t)
	const slowDelay = 2 * time.Second
	ownDelay, ownLifetime := slowDelay, 300*time.Millisecond
	n := startNode(t, func(c *gateway.Config) {
		c.SASL = &gateway.SASL{
			Mechanisms: []string{"PLAIN", "OAUTHBEARER"},
			PlainUsers: func(u string) (string, bool) { return "admin-secret", u == "admin" },
			OAuthKeys:  shared.keys,
			OAuthRules: sasl.TokenRules{Issuer: "https://shared.test"},
		}
		c.Listeners = []gateway.Listener{
			{Name: "SHARED", Addr: c.Addr, TLS: rl.ServerConfig(), SASL: true},
			{Name: "OWN", Addr: "127.0.0.1:0", TLS: rl.ServerConfig(), SASL: true, FailureDelay: &ownDelay, SessionLifetime: &ownLifetime,
				OAuthKeys: own.keys, OAuthRules: &sasl.TokenRules{Issuer: "https://own.test", Audiences: []string{"kafka"}}},
		}
	})
	cfg := pki.clientTLS(t, false)
	ownAddr := n.srv.ListenerAddr("OWN").String()

	// A wrong password: answered after the listener's delay, then closed.
	failed := func(addr string) time.Duration {
		c := tlsRaw(t, addr, cfg)
		start := time.Now()
		if r := saslAuth(c, "PLAIN", []byte("\x00admin\x00guess")); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("wrong password on %s: error %d", addr, r.ErrorCode)
		}
		d := time.Since(start)
		expectClosed(t, c.nc)
		return d
	}
	if d := failed(ownAddr); d < slowDelay {
		t.Errorf("OWN answered a failed authentication after %v, before its delay of %v", d, slowDelay)
	}
	if d := failed(n.addr); d >= slowDelay {
		t.Errorf("SHARED answered a failed authentication after %v: OWN's delay of %v applied there", d, slowDelay)
	}

	// The session lifetime each listener tells its clients (KIP-368).
	for _, l := range []struct {
		name, addr string
		want       int64
	}{{"OWN", ownAddr, 300}, {"SHARED", n.addr, 0}} {
		c := tlsRaw(t, l.addr, cfg)
		if r := saslAuth(c, "PLAIN", []byte("\x00admin\x00admin-secret")); r.ErrorCode != 0 || r.SessionLifetimeMillis != l.want {
			t.Errorf("%s: error %d, session lifetime %d ms, want %d", l.name, r.ErrorCode, r.SessionLifetimeMillis, l.want)
		}
	}

	// Each listener takes the tokens of its own identity provider only.
	token := func(s *jwtSigner, issuer string) []byte {
		now := time.Now()
		tok := s.token(t, map[string]any{"sub": "svc", "iss": issuer, "aud": "kafka", "exp": now.Add(time.Hour).Unix()})
		return []byte("n,,\x01auth=Bearer " + tok + "\x01\x01")
	}
	for _, w := range []struct {
		what, addr string
		tok        []byte
		ok         bool
	}{
		{"OWN's token on OWN", ownAddr, token(own, "https://own.test"), true},
		{"SHARED's token on OWN", ownAddr, token(shared, "https://shared.test"), false},
		{"OWN's key with SHARED's issuer on OWN", ownAddr, token(own, "https://shared.test"), false},
		{"SHARED's token on SHARED", n.addr, token(shared, "https://shared.test"), true},
		{"OWN's token on SHARED", n.addr, token(own, "https://own.test"), false},
	} {
		c := tlsRaw(t, w.addr, cfg)
		r := saslAuth(c, "OAUTHBEARER", w.tok)
		if w.ok {
			if r.ErrorCode != 0 || len(r.SASLAuthBytes) != 0 {
				t.Errorf("%s: error %d, challenge %q", w.what, r.ErrorCode, r.SASLAuthBytes)
			}
			continue
		}
		// A refused token gets the error challenge (RFC 7628); the
		// client's acknowledgement then gets SASL_AUTHENTICATION_FAILED.
		if r.ErrorCode != 0 || !strings.Contains(string(r.SASLAuthBytes), "invalid_token") {
			t.Errorf("%s: error %d, challenge %q, want invalid_token", w.what, r.ErrorCode, r.SASLAuthBytes)
			continue
		}
		ack := kmsg.NewPtrSASLAuthenticateRequest()
		ack.SetVersion(2)
		ack.SASLAuthBytes = []byte{1}
		if r := c.do(ack).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Errorf("%s, acknowledged: error %d, want SASL_AUTHENTICATION_FAILED", w.what, r.ErrorCode)
		}
	}
}

// jwtSigner signs RS256 tokens with a key of its own key set.
type jwtSigner struct {
	key *rsa.PrivateKey
	ks  *sasl.KeySet
}

func newJWTSigner(t *testing.T) *jwtSigner {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k", "use": "sig",
		"n": enc.EncodeToString(k.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(k.E)).Bytes())}}})
	ks, err := sasl.ParseKeySet(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &jwtSigner{key: k, ks: ks}
}

func (j *jwtSigner) keys() (*sasl.KeySet, error) { return j.ks, nil }

func (j *jwtSigner) token(t *testing.T, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "k"})
	c, _ := json.Marshal(claims)
	signed := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	d := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, j.key, crypto.SHA256, d[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + enc.EncodeToString(sig)
}

// followerCredentials reads the leader's store (as a follower's replicated
// copy would) but cannot apply changes.
type followerCredentials struct{ gateway.Credentials }

func (followerCredentials) AlterScramCredentials(context.Context, *fsm.AlterScramCredentials) ([]int16, error) {
	return nil, cluster.ErrNotLeader
}

// TestFollowerForwardsScramChanges: with TLS and SASL on the Kafka
// listeners, a follower forwards AlterUserScramCredentials to the leader
// over the cluster's own link (the Raft port), where the client's
// authentication on the follower stands.
func TestFollowerForwardsScramChanges(t *testing.T) {
	pki := newPKI(t)
	rl := pki.serverTLS(t, true)
	sasl := &gateway.SASL{Mechanisms: []string{"PLAIN", "SCRAM-SHA-512"}, PlainUsers: func(u string) (string, bool) { return "pw", u == "admin" }}
	leader := startNode(t, func(c *gateway.Config) { c.TLS, c.SASL = rl.ServerConfig(), sasl })

	addr := freeLoopbackAddr(t)
	leaderInfo := leader.node.Self()
	leaderInfo.KafkaAddr = leader.addr
	fc := followerCluster{leader: leaderInfo, dial: leader.node.DialPeer, peers: listenLoopback(t), applied: leader.node.AppliedIndex}
	srv := gateway.New(gateway.Config{Addr: addr, Logger: slog.New(slog.DiscardHandler), TLS: rl.ServerConfig(),
		SASL: sasl, Credentials: followerCredentials{leader.backend}}, followerBackend{leader.backend}, fc)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	client := pki.clientTLS(t, true)
	// The client authenticates with SASL on top of its certificate here;
	// either would do.
	adm := kadm.NewClient(newClient(t, srv.Addr().String(), kgo.DialTLSConfig(client), kgo.SASL(plain.Auth{User: "admin", Pass: "pw"}.AsMechanism())))
	addScramUser(t, adm, "carol", "carol-pw")
	if _, ok := leader.fsm.ScramCredentialFor("carol", 2); !ok {
		t.Fatal("the leader did not store the forwarded credential")
	}
}

// TestListenerMechanisms: a listener's own mechanisms replace the shared
// ones there and only there (listener.name.<name>.sasl.enabled.mechanisms).
func TestListenerMechanisms(t *testing.T) {
	pki := newPKI(t)
	rl := pki.serverTLS(t, false)
	n := startNode(t, func(c *gateway.Config) {
		c.SASL = &gateway.SASL{
			Mechanisms:   []string{"PLAIN"},
			PlainUsers:   func(u string) (string, bool) { return "admin-secret", u == "admin" },
			FailureDelay: time.Millisecond,
		}
		c.Listeners = []gateway.Listener{
			{Name: "SHARED", Addr: c.Addr, TLS: rl.ServerConfig(), SASL: true},
			{Name: "OWN", Addr: "127.0.0.1:0", TLS: rl.ServerConfig(), SASL: true, Mechanisms: []string{"SCRAM-SHA-512"}},
			{Name: "PARTNER", Addr: "127.0.0.1:0", TLS: rl.ServerConfig(), SASL: true,
				PlainUsers: func(u string) (string, bool) { return "partner-secret", u == "partner" }},
		}
	})
	cfg := pki.clientTLS(t, false)
	own := n.srv.ListenerAddr("OWN").String()
	addScramUser(t, kadm.NewClient(newClient(t, n.addr, kgo.DialTLSConfig(cfg), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))), "alice", "alice-secret")

	// The node advertises one address only (no cluster listeners here), so
	// the check stays on OWN's seed connection.
	if err := authenticate(t, own, kgo.DialTLSConfig(cfg), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())); err != nil {
		t.Fatalf("SCRAM-SHA-512 on OWN: %v", err)
	}
	c := tlsRaw(t, own, cfg)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(r.SupportedMechanisms, ",") != "SCRAM-SHA-512" {
		t.Fatalf("PLAIN on OWN: answer %d %v, want UNSUPPORTED_SASL_MECHANISM offering SCRAM-SHA-512", r.ErrorCode, r.SupportedMechanisms)
	}
	expectClosed(t, c.nc)

	c = tlsRaw(t, n.addr, cfg)
	hs.Mechanism = "SCRAM-SHA-512"
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(r.SupportedMechanisms, ",") != "PLAIN" {
		t.Fatalf("SCRAM-SHA-512 on SHARED: answer %d %v, want UNSUPPORTED_SASL_MECHANISM offering PLAIN", r.ErrorCode, r.SupportedMechanisms)
	}
	expectClosed(t, c.nc)
	if err := roundTrip(t, n.addr, "shared-listener", kgo.DialTLSConfig(cfg), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())); err != nil {
		t.Fatalf("PLAIN on SHARED: %v", err)
	}

	// PARTNER has PLAIN users of its own, and only those.
	partner := n.srv.ListenerAddr("PARTNER").String()
	if err := authenticate(t, partner, kgo.DialTLSConfig(cfg), kgo.SASL(plain.Auth{User: "partner", Pass: "partner-secret"}.AsMechanism())); err != nil {
		t.Fatalf("PARTNER's own PLAIN user on PARTNER: %v", err)
	}
	if err := authenticate(t, partner, kgo.DialTLSConfig(cfg), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("the shared PLAIN user on PARTNER: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := authenticate(t, n.addr, kgo.DialTLSConfig(cfg), kgo.SASL(plain.Auth{User: "partner", Pass: "partner-secret"}.AsMechanism())); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("PARTNER's user on SHARED: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// rawToken sends a bare SASL token (after SaslHandshake v0) and reads the
// server's bare answer.
func (c *rawConn) rawToken(token []byte) ([]byte, error) {
	if err := c.write(binary.BigEndian.AppendUint32(nil, uint32(len(token)))); err != nil {
		return nil, err
	}
	if err := c.write(token); err != nil {
		return nil, err
	}
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return nil, err
	}
	out := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.nc, out)
	return out, err
}

func handshakeV0(c *rawConn, mech string) *kmsg.SASLHandshakeResponse {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(0)
	hs.Mechanism = mech
	return c.do(hs).(*kmsg.SASLHandshakeResponse)
}

// TestSASLHandshakeV0: after a SaslHandshake v0 the mechanism's tokens
// come bare, without SaslAuthenticate (as Kafka before 1.0 and clients
// such as Sarama with SASLHandshakeV0): PLAIN and SCRAM authenticate so,
// the connection then serves requests, and a wrong password closes it
// without an answer, as Kafka does.
func TestSASLHandshakeV0(t *testing.T) {
	n, pki := saslNode(t, nil)
	cfg := pki.clientTLS(t, false)
	addScramUser(t, kadm.NewClient(newClient(t, n.addr, kgo.DialTLSConfig(cfg), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))), "alice", "alice-secret")
	served := func(c *rawConn) {
		t.Helper()
		if r := c.do(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(r.Brokers) == 0 {
			t.Fatalf("Metadata after authentication: %+v", r)
		}
	}

	t.Run("PLAIN", func(t *testing.T) {
		c := tlsRaw(t, n.addr, cfg)
		if r := handshakeV0(c, "PLAIN"); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: error %d", r.ErrorCode)
		}
		out, err := c.rawToken([]byte("\x00admin\x00admin-secret"))
		if err != nil || len(out) != 0 {
			t.Fatalf("PLAIN token: %q %v, want an empty answer", out, err)
		}
		served(c)
	})
	t.Run("SCRAM-SHA-512", func(t *testing.T) {
		c := tlsRaw(t, n.addr, cfg)
		if r := handshakeV0(c, "SCRAM-SHA-512"); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: error %d", r.ErrorCode)
		}
		sess, msg, err := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism().Authenticate(testCtx(t), n.addr)
		if err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			out, err := c.rawToken(msg)
			if err != nil {
				t.Fatalf("SCRAM token: %v", err)
			}
			if done, msg, err = sess.Challenge(out); err != nil {
				t.Fatalf("server's SCRAM answer: %v", err)
			}
		}
		served(c)
	})
	t.Run("wrong password", func(t *testing.T) {
		c := tlsRaw(t, n.addr, cfg)
		if r := handshakeV0(c, "PLAIN"); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: error %d", r.ErrorCode)
		}
		if out, err := c.rawToken([]byte("\x00admin\x00guess")); err == nil {
			t.Fatalf("a wrong password got %q", out)
		}
		expectClosed(t, c.nc)
	})
	t.Run("oversized token", func(t *testing.T) {
		c := tlsRaw(t, n.addr, cfg)
		if r := handshakeV0(c, "PLAIN"); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: error %d", r.ErrorCode)
		}
		c.write([]byte{0x7f, 0xff, 0xff, 0xff})
		expectClosed(t, c.nc)
	})
	t.Run("re-authentication takes v1", func(t *testing.T) {
		c := tlsRaw(t, n.addr, cfg)
		if r := saslAuth(c, "PLAIN", []byte("\x00admin\x00admin-secret")); r.ErrorCode != 0 {
			t.Fatalf("authenticate: %d", r.ErrorCode)
		}
		if r := handshakeV0(c, "PLAIN"); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("handshake v0 after authentication: error %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
		}
		expectClosed(t, c.nc)
	})
}
