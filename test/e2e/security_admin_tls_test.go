package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecurityAdminTLS: with --admin-tls-cert/--admin-tls-key and
// --admin-tls-client-ca the admin API speaks HTTPS only; probes reach
// /healthz and /readyz without a client certificate, everything else wants
// one of the client CA (401 without), and the CLI reaches it with
// --admin-tls-ca, --admin-tls-cert and --admin-tls-key.
func TestSecurityAdminTLS(t *testing.T) {
	bin := kgateBinary(t)
	work := t.TempDir()
	certs := filepath.Join(work, "certs")
	if out, err := runTool(work, bin, "certs", "-dir", certs, "-names", "node-1,operator"); err != nil {
		t.Fatalf("kgate certs: %v\n%s", err, out)
	}
	ca := filepath.Join(certs, "ca.pem")
	k := startSecureKgate(t, "--admin-tls-cert", filepath.Join(certs, "node-1.pem"), "--admin-tls-key", filepath.Join(certs, "node-1-key.pem"),
		"--admin-tls-client-ca", ca)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(must(os.ReadFile(ca)))
	operator := must(tls.LoadX509KeyPair(filepath.Join(certs, "operator.pem"), filepath.Join(certs, "operator-key.pem")))
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
	}
	get := func(cl *http.Client, url string) int {
		resp, err := cl.Get(url)
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name string
		cl   *http.Client
		url  string
		want int
	}{
		{"plain HTTP", &http.Client{Timeout: 10 * time.Second}, "http://" + k.admin + "/healthz", 400},
		{"probe without a client certificate", client(), "https://" + k.admin + "/readyz", 200},
		{"cluster view without a client certificate", client(), "https://" + k.admin + "/v1/cluster", 401},
		{"metrics without a client certificate", client(), "https://" + k.admin + "/metrics", 401},
		{"cluster view with the operator's certificate", client(operator), "https://" + k.admin + "/v1/cluster", 200},
	} {
		if got := get(c.cl, c.url); got != c.want {
			t.Errorf("%s: GET %s answered %d, want %d", c.name, c.url, got, c.want)
		}
	}
	tlsFlags := []string{"--admin-tls-ca", ca, "--admin-tls-cert", filepath.Join(certs, "operator.pem"), "--admin-tls-key", filepath.Join(certs, "operator-key.pem")}
	out, err := exec.Command(bin, append([]string{"status", "--admin", k.admin}, tlsFlags...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "leader") {
		t.Fatalf("kgate status over HTTPS with a client certificate: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "status", "--admin", k.admin, "--admin-tls-ca", ca).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") {
		t.Fatalf("kgate status without a client certificate: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "health", "--admin", "https://"+k.admin, "--admin-tls-ca", ca).CombinedOutput(); err != nil {
		t.Fatalf("kgate health (a probe, no client certificate): %v\n%s", err, out)
	}
}
