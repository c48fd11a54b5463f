package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestClusterListenerCertificateInsteadOfSASL: three nodes, each with two
// SASL_SSL listeners that require a client certificate of the cluster's CA.
// --client-certificate-instead-of-sasl makes the certificate enough on
// INTERNAL, and --listener-client-certificate-instead-of-sasl EXTERNAL:false
// keeps Kafka's rule on EXTERNAL, where SASL must still authenticate.
// Through the leader and a follower, a client with only its certificate
// produces and consumes in a group on INTERNAL and is disconnected on
// EXTERNAL before any answer; with SASL too it is served on EXTERNAL.
func TestClusterListenerCertificateInsteadOfSASL(t *testing.T) {
	bin := kgateBinary(t)
	work := t.TempDir()
	certDir := filepath.Join(work, "certs")
	if out, err := runTool(work, bin, "certs", "-dir", certDir, "-names", "node-1,node-2,node-3,client", "-hosts", "127.0.0.1,localhost"); err != nil {
		t.Fatalf("kgate certs: %v\n%s", err, out)
	}
	users := filepath.Join(work, "users")
	if err := os.WriteFile(users, []byte("admin:admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	external := map[int32]string{}
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			external[n.id] = c.freeAddr()
			pem := func(suffix string) string { return filepath.Join(certDir, fmt.Sprintf("node-%d%s.pem", n.id, suffix)) }
			n.args = append(n.args, "--kafka-listener-name", "INTERNAL",
				"--listeners", "EXTERNAL://"+external[n.id],
				"--listener-security-protocol-map", "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL",
				"--kafka-tls-cert", pem(""), "--kafka-tls-key", pem("-key"), "--kafka-tls-client-ca", filepath.Join(certDir, "ca.pem"),
				"--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", users,
				"--client-certificate-instead-of-sasl",
				"--listener-client-certificate-instead-of-sasl", "EXTERNAL:false")
		}
	})
	internal := c.kafkaAddrs()
	certOnly := []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: caPool(certDir), Certificates: []tls.Certificate{clientKeyPair(certDir)}})}
	withSASL := append([]kgo.Opt{kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())}, certOnly...)

	leader := c.leader()
	follower := leader%3 + 1
	for _, via := range []int32{leader, follower} {
		role := map[bool]string{true: "leader", false: "follower"}[via == leader]
		step(t, fmt.Sprintf("a certificate alone on INTERNAL through the %s produces and consumes in a group", role), time.Minute, func(ctx context.Context) error {
			return groupRoundTrip(ctx, internal[via], fmt.Sprintf("cert-only-%d", via), certOnly)
		})
		step(t, fmt.Sprintf("a certificate alone on EXTERNAL through the %s is disconnected before any answer", role), 30*time.Second, func(ctx context.Context) error {
			if err := metadataErr(ctx, external[via], certOnly...); err == nil {
				return fmt.Errorf("answered without SASL")
			}
			return nil
		})
		step(t, fmt.Sprintf("a certificate and SASL on EXTERNAL through the %s produce and consume in a group", role), time.Minute, func(ctx context.Context) error {
			return groupRoundTrip(ctx, external[via], fmt.Sprintf("cert-and-sasl-%d", via), withSASL)
		})
	}
}
