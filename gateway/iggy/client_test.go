package iggy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

var dialects = []iggy.Dialect{iggy.Current, iggy.Legacy}

func startDouble(t *testing.T, d iggy.Dialect) *iggytest.Server {
	t.Helper()
	s, err := iggytest.Start(iggytest.Config{Dialect: d, Tokens: []string{"secret-token"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newClient(t *testing.T, addr string, d iggy.Dialect, conns int) *iggy.Client {
	t.Helper()
	cl := iggy.NewClient(iggy.Options{Addr: addr, Dialect: d, Username: "iggy", Password: "iggy",
		DialTimeout: 2 * time.Second, RequestTimeout: 2 * time.Second}, conns)
	t.Cleanup(func() { cl.Close() })
	return cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestClientDetectsDialectAndRoundTrips: with --iggy-protocol auto the
// client finds each server's dialect, logs in, and a message sent comes
// back by offset with its id, payload, headers and origin timestamp.
func TestClientDetectsDialectAndRoundTrips(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			srv := startDouble(t, d)
			cl := newClient(t, srv.Addr(), 0, 2)
			ctx := ctxT(t)
			if err := cl.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			if cl.Dialect() != d {
				t.Fatalf("detected %v, server speaks %v", cl.Dialect(), d)
			}
			checkClientRoundTrip(t, cl)
		})
	}
}

// TestClientRealServer is the real-server tier of the client tests.
func TestClientRealServer(t *testing.T) {
	bin := os.Getenv(iggytest.EnvServerBin)
	if bin == "" {
		t.Skipf("real-server tier SKIPPED: set %s to an iggy-server binary to run the client against it", iggytest.EnvServerBin)
	}
	r, err := iggytest.StartReal(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cl := iggy.NewClient(iggy.Options{Addr: r.Addr(), Username: r.Username, Password: r.Password}, 2)
	defer cl.Close()
	if err := cl.Connect(ctxT(t)); err != nil {
		t.Fatalf("%v\n%s", err, r.LogTail(30))
	}
	t.Logf("real iggy-server speaks the %v dialect", cl.Dialect())
	checkClientRoundTrip(t, cl)
}

func checkClientRoundTrip(t *testing.T, cl *iggy.Client) {
	ctx := ctxT(t)
	d := cl.Dialect()
	{
		{
			if _, err := cl.CreateStream(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			td, err := cl.CreateTopic(ctx, iggy.NamedID("s"), iggy.TopicConfig{Name: "t", PartitionsCount: 2})
			if err != nil {
				t.Fatal(err)
			}
			if len(td.Partitions) != 2 {
				t.Fatalf("created %d partitions", len(td.Partitions))
			}
			hdrs := []iggy.UserHeader{{Key: iggy.HeaderValue{Kind: iggy.KindString, Value: []byte("k")},
				Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte{1, 2, 3}}}}
			var msgs []iggy.Message
			for i := range 3 {
				msgs = append(msgs, iggy.Message{ID: iggy.MessageID(uint64(i+1), 7), OriginTimestamp: 1_700_000_000_000_000 + uint64(i),
					Payload: []byte(fmt.Sprintf("m%d", i)), Headers: hdrs})
			}
			part := td.Partitions[1].ID
			conf, dialect, err := cl.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(part), msgs)
			if err != nil {
				t.Fatal(err)
			}
			if dialect != d {
				t.Fatalf("sent with %v", dialect)
			}
			if d == iggy.Current && (len(conf) != 1 || conf[0].BaseOffset != 0) {
				t.Fatalf("confirmations %+v", conf)
			}
			// A second send continues the offsets.
			if conf, _, err = cl.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(part), msgs[:1]); err != nil {
				t.Fatal(err)
			}
			if d == iggy.Current && conf[0].BaseOffset != 3 {
				t.Fatalf("second base offset %d, want 3", conf[0].BaseOffset)
			}
			got, err := cl.PollMessages(ctx, iggy.Poll{Consumer: iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(1)},
				Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(part),
				Kind: iggy.PollOffset, Value: 1, Count: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Messages) != 3 || got.CurrentOffset != 3 {
				t.Fatalf("polled %d messages, current offset %d", len(got.Messages), got.CurrentOffset)
			}
			m := got.Messages[0]
			if m.Offset != 1 || string(m.Payload) != "m1" || m.ID != msgs[1].ID || m.OriginTimestamp != msgs[1].OriginTimestamp {
				t.Fatalf("message %+v", m)
			}
			h, err := iggy.DecodeUserHeaders(m.UserHeaders)
			if err != nil || len(h) != 1 || string(h[0].Value.Value) != "\x01\x02\x03" {
				t.Fatalf("headers %+v %v", h, err)
			}
			// Polls after a Release reuse its storage: larger, then smaller
			// replies than the one handed back still read exactly.
			cl.Release(got)
			if got.Messages != nil {
				t.Fatal("Release left the messages in place")
			}
			for _, want := range []string{"m0 m1 m2 m0", "m2 m0", "m0 m1 m2 m0"} {
				from := uint64(4 - len(strings.Fields(want)))
				again, err := cl.PollMessages(ctx, iggy.Poll{Consumer: iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(1)},
					Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(part),
					Kind: iggy.PollOffset, Value: from, Count: 10})
				if err != nil {
					t.Fatal(err)
				}
				var payloads []string
				for i, m := range again.Messages {
					if m.Offset != from+uint64(i) {
						t.Fatalf("poll from %d: message %d at offset %d", from, i, m.Offset)
					}
					payloads = append(payloads, string(m.Payload))
				}
				if strings.Join(payloads, " ") != want {
					t.Fatalf("poll from %d after a release: %q, want %q", from, payloads, want)
				}
				cl.Release(again)
			}
			// Topic details and the not-found answers.
			td2, found, err := cl.GetTopic(ctx, iggy.NamedID("s"), iggy.NamedID("t"))
			if err != nil || !found || td2.Partitions[1].CurrentOffset != 3 || td2.Partitions[1].MessagesCount != 4 {
				t.Fatalf("GetTopic %+v %v %v", td2, found, err)
			}
			if _, found, err := cl.GetTopic(ctx, iggy.NamedID("s"), iggy.NamedID("nope")); err != nil || found {
				t.Fatalf("missing topic: found %v, err %v", found, err)
			}
			if _, _, found, err := cl.GetStream(ctx, iggy.NamedID("nope")); err != nil || found {
				t.Fatalf("missing stream: found %v, err %v", found, err)
			}
			if _, err := cl.CreateTopic(ctx, iggy.NamedID("s"), iggy.TopicConfig{Name: "t", PartitionsCount: 1}); !errors.Is(err, iggy.ErrTopicAlreadyExists) {
				t.Fatalf("duplicate topic: %v", err)
			}
			// Update, grow and delete.
			if err := cl.UpdateTopic(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.TopicConfig{Name: "t", Compression: iggy.CompressionNone,
				MessageExpiry: 3_600_000_000, MaxTopicSize: ^uint64(0), ReplicationFactor: 1}); err != nil {
				t.Fatal(err)
			}
			if err := cl.CreatePartitions(ctx, iggy.NamedID("s"), iggy.NamedID("t"), 3); err != nil {
				t.Fatal(err)
			}
			td3, _, err := cl.GetTopic(ctx, iggy.NamedID("s"), iggy.NamedID("t"))
			if err != nil || len(td3.Partitions) != 5 || td3.MessageExpiry != 3_600_000_000 {
				t.Fatalf("after update: %d partitions, expiry %d, %v", len(td3.Partitions), td3.MessageExpiry, err)
			}
			if err := cl.DeleteTopic(ctx, iggy.NamedID("s"), iggy.NamedID("t")); err != nil {
				t.Fatal(err)
			}
			if err := cl.DeleteTopic(ctx, iggy.NamedID("s"), iggy.NamedID("t")); !errors.Is(err, iggy.ErrTopicNotFound) {
				t.Fatalf("second delete: %v", err)
			}
		}
	}
}

// TestClientFixedDialectAgainstTheOther: a fixed dialect that does not
// match the server fails within the dial timeout instead of hanging.
func TestClientFixedDialectAgainstTheOther(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			srv := startDouble(t, d)
			other := iggy.Legacy
			if d == iggy.Legacy {
				other = iggy.Current
			}
			cl := iggy.NewClient(iggy.Options{Addr: srv.Addr(), Dialect: other, Username: "iggy", Password: "iggy",
				DialTimeout: 500 * time.Millisecond}, 1)
			defer cl.Close()
			start := time.Now()
			if err := cl.Connect(context.Background()); err == nil {
				t.Fatal("connected with the wrong dialect")
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Fatalf("took %v", el)
			}
		})
	}
}

// TestClientCredentials: a wrong password and a wrong token are reported
// as such at connect; a valid token logs in.
func TestClientCredentials(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			srv := startDouble(t, d)
			bad := iggy.NewClient(iggy.Options{Addr: srv.Addr(), Username: "iggy", Password: "wrong"}, 1)
			defer bad.Close()
			if err := bad.Connect(ctxT(t)); !errors.Is(err, iggy.ErrInvalidCredentials) {
				t.Fatalf("wrong password: %v", err)
			}
			badTok := iggy.NewClient(iggy.Options{Addr: srv.Addr(), Token: "nope"}, 1)
			defer badTok.Close()
			if err := badTok.Connect(ctxT(t)); err == nil {
				t.Fatal("a wrong token logged in")
			}
			tok := iggy.NewClient(iggy.Options{Addr: srv.Addr(), Token: "secret-token"}, 1)
			defer tok.Close()
			if err := tok.Connect(ctxT(t)); err != nil {
				t.Fatalf("token login: %v", err)
			}
			if err := tok.Ping(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestClientReconnects: after the server drops every connection, evicts
// the sessions, or restarts, the next calls work again on fresh,
// logged-in connections.
func TestClientReconnects(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			srv := startDouble(t, d)
			cl := newClient(t, srv.Addr(), 0, 2)
			ctx := ctxT(t)
			if _, err := cl.CreateStream(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			logins := cl.Logins()

			srv.DropConnections()
			if _, _, _, err := cl.GetStream(ctx, iggy.NamedID("s")); err != nil {
				t.Fatalf("read after a dropped connection: %v", err)
			}
			if cl.Logins() <= logins {
				t.Fatal("no fresh login after the drop")
			}

			// A send is never resent, so a pooled connection the server
			// closed must be noticed before it is used.
			if err := srv.CreateTopic("s", "t", 1); err != nil {
				t.Fatal(err)
			}
			srv.DropConnections()
			time.Sleep(20 * time.Millisecond) // let the FINs arrive
			msg := []iggy.Message{{ID: iggy.MessageID(1, 1), OriginTimestamp: 1, Payload: []byte("x")}}
			if _, _, err := cl.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), msg); err != nil {
				t.Fatalf("send after a dropped connection: %v", err)
			}

			srv.EvictAll(12)
			var err error
			for range 3 { // the first call may be the one that sees the eviction
				if _, _, _, err = cl.GetStream(ctx, iggy.NamedID("s")); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("after eviction: %v", err)
			}

			if err := srv.Close(); err != nil {
				t.Fatal(err)
			}
			if err := cl.Ping(ctx); err == nil {
				t.Fatal("ping answered with the server down")
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(8 * time.Second)
			for {
				_, _, found, err := cl.GetStream(ctx, iggy.NamedID("s"))
				if err == nil && found {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no service after the restart: found %v, %v", found, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestClientDeadlines: a server that stops answering fails calls at their
// deadline, and service resumes once it answers again.
func TestClientDeadlines(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			srv := startDouble(t, d)
			cl := newClient(t, srv.Addr(), 0, 1)
			if err := cl.Ping(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			srv.SetHang(true)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := cl.Ping(ctx)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("hung server: %v", err)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("took %v", el)
			}
			srv.SetHang(false)
			if err := cl.Ping(ctxT(t)); err != nil {
				t.Fatalf("after the hang: %v", err)
			}
		})
	}
}

// TestClientPool: concurrent calls share at most the configured number of
// connections, one request in flight on each.
func TestClientPool(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			srv := startDouble(t, d)
			if err := srv.CreateTopic("s", "t", 1); err != nil {
				t.Fatal(err)
			}
			cl := newClient(t, srv.Addr(), 0, 3)
			ctx := ctxT(t)
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 20 {
						m := iggy.Message{ID: iggy.MessageID(uint64(g*100+i+1), 1), OriginTimestamp: 1, Payload: []byte("x")}
						if _, _, err := cl.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), []iggy.Message{m}); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if n := srv.Connections(); n > 3 {
				t.Fatalf("%d connections for a pool of 3", n)
			}
			if n := len(srv.Messages("s", "t", 0)); n != 320 {
				t.Fatalf("stored %d messages, want 320", n)
			}
		})
	}
}

// TestClientTLS: with a TLS config the client speaks TLS (here to a TLS
// proxy in front of the double) and checks the certificate.
func TestClientTLS(t *testing.T) {
	srv := startDouble(t, iggy.Current)
	cert, pool := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", srv.Addr())
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	cl := iggy.NewClient(iggy.Options{Addr: ln.Addr().String(), Username: "iggy", Password: "iggy",
		TLS: &tls.Config{RootCAs: pool}}, 1)
	defer cl.Close()
	if err := cl.Ping(ctxT(t)); err != nil {
		t.Fatalf("ping over TLS: %v", err)
	}
	untrusted := iggy.NewClient(iggy.Options{Addr: ln.Addr().String(), Username: "iggy", Password: "iggy",
		TLS: &tls.Config{}}, 1)
	defer untrusted.Close()
	if err := untrusted.Ping(ctxT(t)); err == nil {
		t.Fatal("accepted a certificate from an unknown CA")
	}
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "iggy-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
