package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/xdg-go/scram"
)

// TestSecuritySASLHandshakeV0: Sarama with Net.SASL.Version =
// SASLHandshakeV0 sends the mechanism's tokens bare after the handshake,
// without SaslAuthenticate, as clients did before Kafka 1.0. PLAIN and
// SCRAM-SHA-512 authenticate so, produce and consume; a wrong password is
// refused (the connection closes, v0 has no error to send).
func TestSecuritySASLHandshakeV0(t *testing.T) {
	work := t.TempDir()
	certs := filepath.Join(work, "certs")
	if out, err := runTool(work, kgateBinary(t), "certs", "-dir", certs, "-names", "node-1"); err != nil {
		t.Fatalf("kgate certs: %v\n%s", err, out)
	}
	users := writeFile(t, filepath.Join(work, "users"), "admin:admin-secret\n")
	k := startSecureKgate(t, "--kafka-tls-cert", filepath.Join(certs, "node-1.pem"), "--kafka-tls-key", filepath.Join(certs, "node-1-key.pem"),
		"--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-512", "--sasl-plain-users-file", users)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(must(os.ReadFile(filepath.Join(certs, "ca.pem"))))
	step(t, "admin creates the SCRAM user alice", 30*time.Second, func(ctx context.Context) error {
		return addScramWith(ctx, k.kafka, []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())}, "alice", "alice-secret")
	})
	v0 := func(mechanism sarama.SASLMechanism, user, password string) *sarama.Config {
		cfg := saramaConfig()
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, &tls.Config{RootCAs: pool}
		cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism, cfg.Net.SASL.Version = true, mechanism, sarama.SASLHandshakeV0
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: scram.SHA512} }
		cfg.Net.SASL.User, cfg.Net.SASL.Password = user, password
		// Sarama's rule, as clients of that era: no ApiVersions first.
		cfg.ApiVersionsRequest = false
		cfg.Metadata.Retry.Max = 0
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		return cfg
	}
	for _, c := range []struct {
		mechanism  sarama.SASLMechanism
		user, pass string
	}{{sarama.SASLTypePlaintext, "admin", "admin-secret"}, {sarama.SASLTypeSCRAMSHA512, "alice", "alice-secret"}} {
		t.Run(string(c.mechanism), func(t *testing.T) {
			topic := "v0-" + string(c.mechanism)
			cfg := v0(c.mechanism, c.user, c.pass)
			prod, err := sarama.NewSyncProducer([]string{k.kafka}, cfg)
			if err != nil {
				t.Fatalf("sarama producer, SASL handshake v0: %v", err)
			}
			defer prod.Close()
			for i := range 3 {
				if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			cons, err := sarama.NewConsumer([]string{k.kafka}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			timeout := time.After(30 * time.Second)
			for i := range 3 {
				select {
				case m := <-pc.Messages():
					if string(m.Value) != fmt.Sprint(i) {
						t.Fatalf("record %d: %q", i, m.Value)
					}
				case <-timeout:
					t.Fatalf("read %d of 3 records", i)
				}
			}
			if cl, err := sarama.NewClient([]string{k.kafka}, v0(c.mechanism, c.user, "guess")); err == nil {
				cl.Close()
				t.Fatal("a wrong password connected")
			}
		})
	}
}

// addScramWith creates a SCRAM-SHA-512 user through the node at addr.
func addScramWith(ctx context.Context, addr string, opts []kgo.Opt, user, password string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password}})
	if err != nil {
		return err
	}
	return res.Error()
}
