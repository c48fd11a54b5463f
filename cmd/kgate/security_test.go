package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/certs"
)

func TestSecurityFlagsInvalidValuesNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("x"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	users := filepath.Join(dir, "users")
	os.WriteFile(users, []byte("partner:secret\n"), 0o600)
	jwks := writeJWKS(t, dir, "keys")
	badUsers := filepath.Join(dir, "bad-users")
	os.WriteFile(badUsers, []byte("no-colon\n"), 0o600)
	cases := []struct {
		name string
		args []string
		flag string
	}{
		{"cert without key", []string{"--kafka-tls-cert", file}, "--kafka-tls-cert"},
		{"client ca without cert", []string{"--kafka-tls-client-ca", file}, "--kafka-tls-client-ca"},
		{"missing cert file", []string{"--kafka-tls-cert", "/no/such.pem", "--kafka-tls-key", file}, "--kafka-tls-cert"},
		{"unknown mechanism", []string{"--sasl-enabled-mechanisms", "PLAIN,GSSAPI", "--sasl-plain-users-file", file}, "--sasl-enabled-mechanisms"},
		{"PLAIN without users", []string{"--sasl-enabled-mechanisms", "PLAIN"}, "--sasl-enabled-mechanisms"},
		{"negative failure delay", []string{"--connection-failed-authentication-delay", "-1s"}, "--connection-failed-authentication-delay"},
		{"tiny reauth", []string{"--connections-max-reauth", "10ms"}, "--connections-max-reauth"},
		{"missing token file", []string{"--admin-token-file", "/no/such/token"}, "--admin-token-file"},
		{"empty iggy password file", []string{"--iggy-password-file", empty}, "--iggy-password-file"},
		{"reload interval", []string{"--tls-reload-interval", "1ms"}, "--tls-reload-interval"},
		{"gossip key not base64", []string{"--gossip-key-file", file}, "--gossip-key-file"},
		{"gossip key file empty", []string{"--gossip-key-file", empty}, "--gossip-key-file"},
		{"admin tls cert without key", []string{"--admin-tls-cert", file}, "--admin-tls-cert"},
		{"admin client ca without cert", []string{"--admin-tls-client-ca", file}, "--admin-tls-client-ca"},
		{"oauthbearer without jwks", []string{"--sasl-enabled-mechanisms", "OAUTHBEARER"}, "--sasl-oauthbearer-jwks-file"},
		{"oauthbearer bad jwks", []string{"--sasl-enabled-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-jwks-file", file}, "--sasl-oauthbearer-jwks-file"},
		{"listener without protocol", []string{"--listeners", "OUTSIDE://127.0.0.1:9093"}, "--listener-security-protocol-map"},
		{"ssl listener without cert", []string{"--listeners", "SSL://127.0.0.1:9093"}, "--kafka-tls-cert"},
		{"sasl listener without mechanisms", []string{"--listeners", "EXT://127.0.0.1:9093", "--listener-security-protocol-map", "EXT:SASL_PLAINTEXT"}, "--sasl-enabled-mechanisms"},
		{"wildcard listener", []string{"--listeners", "PLAINTEXT://0.0.0.0:9093", "--kafka-listener-name", "INTERNAL", "--listener-security-protocol-map", "INTERNAL:PLAINTEXT"}, "--advertised-listeners"},
		{"advertised unknown listener", []string{"--listeners", "PLAINTEXT://127.0.0.1:9093", "--kafka-listener-name", "LOCAL", "--listener-security-protocol-map", "LOCAL:PLAINTEXT", "--advertised-listeners", "OTHER://h:1"}, "--advertised-listeners"},
		{"listener named twice", []string{"--listeners", "PLAINTEXT://127.0.0.1:9093"}, "--listeners"},
		{"bad protocol", []string{"--listeners", "EXT://127.0.0.1:9093", "--listener-security-protocol-map", "EXT:TLS"}, "--listener-security-protocol-map"},
		{"map without listeners", []string{"--listener-security-protocol-map", "EXT:SSL"}, "--listener-security-protocol-map"},
		{"listener override without listeners", []string{"--listener-tls-cert", "EXT:" + file, "--listener-tls-key", "EXT:" + file}, "--listeners"},
		{"override for an unknown listener", append(twoListeners(file), "--listener-tls-cert", "OTHER:"+file, "--listener-tls-key", "OTHER:"+file), "no listener OTHER"},
		{"mechanisms for an unknown listener", append(twoListeners(file), "--listener-sasl-enabled-mechanisms", "OTHER:PLAIN"), "no listener OTHER"},
		{"unknown mechanism for a listener", append(twoListeners(file), "--listener-sasl-enabled-mechanisms", "EXT:SCRAM-SHA-1"), `"SCRAM-SHA-1" is not one of`},
		{"listener PLAIN without users", append(twoListeners(""), "--listener-sasl-enabled-mechanisms", "EXT:PLAIN"), "PLAIN needs --sasl-plain-users-file"},
		{"tls override on a plaintext listener", append(twoListeners(file), "--listener-tls-cert", "INT:"+file, "--listener-tls-key", "INT:"+file), "listener INT is PLAINTEXT"},
		{"client ca override on a plaintext listener", append(twoListeners(file), "--listener-tls-client-ca", "INT:"+file), "listener INT is PLAINTEXT"},
		{"mechanisms on a plaintext listener", append(twoListeners(file), "--listener-sasl-enabled-mechanisms", "INT:PLAIN"), "listener INT is PLAINTEXT"},
		{"listener cert without key", append(twoListeners(file), "--listener-tls-cert", "EXT:"+file), "--listener-tls-key"},
		{"listener cert file missing", append(twoListeners(file), "--listener-tls-cert", "EXT:/no/such.pem", "--listener-tls-key", "EXT:"+file), "--listener-tls-cert"},
		{"listener cert named twice", append(twoListeners(file), "--listener-tls-cert", "EXT:"+file+",ext:"+file, "--listener-tls-key", "EXT:"+file), "named twice"},
		{"listener override not NAME:value", append(twoListeners(file), "--listener-sasl-enabled-mechanisms", "SCRAM-SHA-512"), "--listener-sasl-enabled-mechanisms"},
		{"client auth not a value", append(twoListeners(file), "--listener-tls-client-auth", "EXT:optional"), `"optional" is not required, requested or none`},
		{"client auth without a client CA", append(twoListeners(file), "--listener-tls-client-auth", "EXT:required"), "no client CA"},
		{"client auth on a plaintext listener", append(twoListeners(file), "--listener-tls-client-auth", "INT:none"), "listener INT is PLAINTEXT"},
		{"client auth for an unknown listener", append(twoListeners(file), "--listener-tls-client-auth", "OTHER:none"), "no listener OTHER"},
		{"plain users on a plaintext listener", append(twoListeners(file), "--listener-sasl-plain-users-file", "INT:"+users), "listener INT is PLAINTEXT"},
		{"plain users for a listener without PLAIN", append(twoListeners(file), "--listener-sasl-enabled-mechanisms", "EXT:SCRAM-SHA-512", "--listener-sasl-plain-users-file", "EXT:"+users), "does not enable PLAIN"},
		{"plain users file not user:password", append(twoListeners(file), "--listener-sasl-plain-users-file", "EXT:"+empty+"x"), "--listener-sasl-plain-users-file"},
		{"bad plain users line", append(twoListeners(file), "--listener-sasl-plain-users-file", "EXT:"+badUsers), "--listener-sasl-plain-users-file: listener EXT: --sasl-plain-users-file: " + badUsers + " line 1"},
		{"ssl listener with neither cert", []string{"--kafka-listener-name", "INT", "--listeners", "EXT://127.0.0.1:9093", "--listener-security-protocol-map", "INT:PLAINTEXT,EXT:SSL", "--listener-tls-client-ca", "EXT:" + file}, "--listener-tls-cert and --listener-tls-key for EXT"},
		{"listener failure delay not a duration", append(twoListeners(file), "--listener-connection-failed-authentication-delay", "EXT:soon"), "--listener-connection-failed-authentication-delay"},
		{"listener failure delay out of range", append(twoListeners(file), "--listener-connection-failed-authentication-delay", "EXT:2m"), "--listener-connection-failed-authentication-delay"},
		{"listener failure delay on a plaintext listener", append(twoListeners(file), "--listener-connection-failed-authentication-delay", "INT:1s"), "listener INT is PLAINTEXT"},
		{"listener reauth too short", append(twoListeners(file), "--listener-connections-max-reauth", "EXT:10ms"), "--listener-connections-max-reauth"},
		{"listener reauth for an unknown listener", append(twoListeners(file), "--listener-connections-max-reauth", "OTHER:1h"), "no listener OTHER"},
		{"listener reauth named twice", append(twoListeners(file), "--listener-connections-max-reauth", "EXT:1h,EXT:2h"), "--listener-connections-max-reauth"},
		{"listener issuer without OAUTHBEARER", append(twoListeners(file), "--listener-sasl-oauthbearer-expected-issuer", "EXT:https://idp.test"), "--listener-sasl-oauthbearer-expected-issuer"},
		{"listener audience on a plaintext listener", append(twoListeners(file), "--listener-sasl-oauthbearer-expected-audience", "INT:kafka"), "listener INT is PLAINTEXT"},
		{"listener OAUTHBEARER without keys", append(twoListeners(file), "--listener-sasl-enabled-mechanisms", "EXT:OAUTHBEARER"), "--listener-sasl-oauthbearer-jwks-file"},
		{"listener bad jwks", append(twoListeners(file), "--listener-sasl-enabled-mechanisms", "EXT:OAUTHBEARER", "--listener-sasl-oauthbearer-jwks-file", "EXT:"+file), "--listener-sasl-oauthbearer-jwks-file"},
		{"shared OAUTHBEARER, one listener without keys", []string{"--kafka-listener-name", "INT", "--listeners", "EXT://127.0.0.1:9093", "--listener-security-protocol-map", "INT:SASL_PLAINTEXT,EXT:SASL_PLAINTEXT",
			"--sasl-enabled-mechanisms", "OAUTHBEARER", "--listener-sasl-oauthbearer-jwks-file", "EXT:" + jwks}, "OAUTHBEARER on listener INT needs --sasl-oauthbearer-jwks-file or --listener-sasl-oauthbearer-jwks-file for INT"},
		{"listener negative clock skew", append(twoListeners(file), "--listener-sasl-oauthbearer-clock-skew", "EXT:-1s"), "--listener-sasl-oauthbearer-clock-skew"},
		{"certificate instead of SASL without a client CA", []string{"--client-certificate-instead-of-sasl", "--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", file}, "--client-certificate-instead-of-sasl"},
		{"listener certificate instead of SASL not a bool", append(twoListeners(file), "--kafka-tls-client-ca", file, "--listener-client-certificate-instead-of-sasl", "EXT:yes please"), "--listener-client-certificate-instead-of-sasl"},
		{"listener certificate instead of SASL without listeners", []string{"--listener-client-certificate-instead-of-sasl", "EXT:true"}, "--listeners"},
		{"listener certificate instead of SASL for an unknown listener", append(twoListeners(file), "--kafka-tls-client-ca", file, "--listener-client-certificate-instead-of-sasl", "OTHER:true"), "no listener OTHER"},
		{"listener certificate instead of SASL on a plaintext listener", append(twoListeners(file), "--listener-client-certificate-instead-of-sasl", "INT:true"), "--listener-client-certificate-instead-of-sasl"},
		{"listener certificate instead of SASL without a client CA", append(twoListeners(file), "--listener-client-certificate-instead-of-sasl", "EXT:true"), "--listener-client-certificate-instead-of-sasl"},
		{"listener certificate instead of SASL with client auth none", append(twoListeners(file), "--kafka-tls-client-ca", file, "--listener-tls-client-auth", "EXT:none", "--listener-client-certificate-instead-of-sasl", "EXT:true"), "--listener-client-certificate-instead-of-sasl"},
		{"raft tls without ca", []string{"--raft-tls-cert", file, "--raft-tls-key", file}, "--raft-tls-ca"},
		{"raft tls missing key file", []string{"--raft-tls-cert", file, "--raft-tls-key", "/no/such.pem", "--raft-tls-ca", file}, "--raft-tls-key"},
		{"super user not a principal", []string{"--authorizer", "--super-users", "User:admin;alice"}, "--super-users"},
		{"super users without the authorizer", []string{"--super-users", "User:admin"}, "--super-users"},
		{"allow if no ACL without the authorizer", []string{"--allow-everyone-if-no-acl-found"}, "--allow-everyone-if-no-acl-found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args, env())
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("error %v does not name %s", err, tc.flag)
			}
		})
	}
}

func TestAuthorizerFlags(t *testing.T) {
	cfg, err := parseConfig([]string{"--authorizer", "--super-users", "User:admin; User:CN=ops,O=example"}, env("KGATE_ALLOW_EVERYONE_IF_NO_ACL_FOUND", "true"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.superUsers(); !cfg.Authorizer || !cfg.AllowIfNoACL || len(got) != 2 || got[0] != "User:admin" || got[1] != "User:CN=ops,O=example" {
		t.Fatalf("authorizer %v, allow if no ACL %v, super users %q", cfg.Authorizer, cfg.AllowIfNoACL, got)
	}
}

func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("hunter22\n"), 0o600)
	tok := filepath.Join(dir, "tok")
	os.WriteFile(tok, []byte("pat-123"), 0o600)
	cfg, err := parseConfig([]string{"--backend", "iggy", "--iggy-password-file", pw, "--iggy-token-file", tok}, env())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IggyPassword != "hunter22" || cfg.IggyToken != "pat-123" {
		t.Fatalf("password %q token %q", cfg.IggyPassword, cfg.IggyToken)
	}
	// The environment works as for every flag.
	cfg, err = parseConfig(nil, env("KGATE_IGGY_PASSWORD_FILE", pw))
	if err != nil || cfg.IggyPassword != "hunter22" {
		t.Fatalf("from env: %q %v", cfg.IggyPassword, err)
	}
}

func TestPlainUsersFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "users")
	os.WriteFile(good, []byte("# comment\nadmin:a:b:c\n\nbob:pw\n"), 0o600)
	users, err := loadPlainUsers(good)
	if err != nil || users["admin"] != "a:b:c" || users["bob"] != "pw" || len(users) != 2 {
		t.Fatalf("users %v err %v", users, err)
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("admin:ok\nsecret-without-user\n"), 0o600)
	_, err = loadPlainUsers(bad)
	if err == nil || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "secret-without-user") {
		t.Fatalf("bad line: %v (must name the line, never echo it)", err)
	}
}

func TestCertsSubcommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out bytes.Buffer
	if err := runCerts([]string{"-dir", dir, "-names", "node-1,client"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.pem", "node-1.pem", "node-1-key.pem", "client.pem", "client-key.pem"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, "-key.pem") && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err == nil {
		t.Error("the CA key was written")
	}
}

// The admin API with a token file: 401 without it, probes stay open, pprof
// only with --admin-pprof.
func TestAdminTokenAndPprof(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("t0ken\n"), 0o600)
	admin := freeAddr(t)
	args := []string{"--data-dir", filepath.Join(dir, "data"), "--kafka-addr", freeAddr(t), "--raft-addr", freeAddr(t),
		"--gossip-addr", freeAddr(t), "--admin-addr", admin, "--admin-token-file", tok}
	runServe(t, args)
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", "http://"+admin+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/v1/cluster", "", 401}, {"/v1/groups", "nope", 401}, {"/v1/cluster", "t0ken", 200}, {"/healthz", "", 200},
		{"/debug/pprof/", "", 401}, {"/debug/pprof/", "t0ken", 404},
	} {
		if got := get(c.path, c.token); got != c.want {
			t.Errorf("GET %s token %q: %d, want %d", c.path, c.token, got, c.want)
		}
	}
	// The operator commands take the same token file.
	var out, errOut strings.Builder
	if code := runStatus([]string{"--admin", admin}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "401") {
		t.Errorf("kgate status without the token: exit %d, %q", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := runStatus([]string{"--admin", admin, "--admin-token-file", tok, "--json"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "cluster_id") {
		t.Errorf("kgate status with the token: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

func TestGossipKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(path, []byte("# new key first\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\nAAECAwQFBgcICQoLDA0ODw==\n"), 0o600)
	keys, err := loadGossipKeys(path)
	if err != nil || len(keys) != 2 || len(keys[0]) != 32 || len(keys[1]) != 16 {
		t.Fatalf("keys %v err %v", keys, err)
	}
	os.WriteFile(path, []byte("AAEC\n"), 0o600) // 3 bytes
	if _, err := loadGossipKeys(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("short key: %v", err)
	}
}

// twoListeners is a plaintext INT and a SASL_SSL EXT listener, with the
// shared certificate and PLAIN users when file is set.
func twoListeners(file string) []string {
	args := []string{"--kafka-listener-name", "INT", "--listeners", "EXT://127.0.0.1:9093", "--listener-security-protocol-map", "INT:PLAINTEXT,EXT:SASL_SSL"}
	if file != "" {
		args = append(args, "--kafka-tls-cert", file, "--kafka-tls-key", file, "--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", file)
	} else {
		args = append(args, "--listener-tls-cert", "EXT:/dev/null", "--listener-tls-key", "EXT:/dev/null")
	}
	return args
}

// TestListenerFlags: --kafka-addr's listener takes its name and protocol,
// the others theirs, and every node advertises all of them by name.
func TestListenerFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("x"), 0o600)
	cert, key, _ := testCerts(t, dir, "node-1")
	c, err := parseConfig([]string{"--kafka-addr", "127.0.0.1:9092", "--kafka-listener-name", "internal",
		"--listeners", "EXTERNAL://0.0.0.0:9093,REPLICATION://127.0.0.1:9094", "--advertised-listeners", "EXTERNAL://kgate-0.example.com:9093",
		"--listener-security-protocol-map", "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,REPLICATION:SSL",
		"--kafka-tls-cert", cert, "--kafka-tls-key", key, "--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", file}, env())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"INTERNAL": "127.0.0.1:9092", "EXTERNAL": "kgate-0.example.com:9093", "REPLICATION": "127.0.0.1:9094"}
	if got := c.listenersConfig.advertised(); !maps.Equal(got, want) {
		t.Fatalf("advertised %v, want %v", got, want)
	}
	shared := reloader(t, certs.Files{Cert: cert, Key: key})
	ls, own, err := c.listenersConfig.gatewayListeners(shared, slog.New(slog.DiscardHandler))
	if err != nil || len(own) != 0 {
		t.Fatalf("gateway listeners: %v, own reloaders %d", err, len(own))
	}
	if len(ls) != 3 || ls[0].Name != "INTERNAL" || ls[0].TLS != nil || ls[0].SASL ||
		ls[1].Addr != "0.0.0.0:9093" || ls[1].TLS == nil || !ls[1].SASL || ls[2].TLS == nil || ls[2].SASL {
		t.Fatalf("gateway listeners %+v", ls)
	}
	// Without named listeners the gateway keeps its one listener.
	c, err = parseConfig(nil, env())
	if err != nil || c.listenersConfig.advertised() != nil {
		t.Fatalf("defaults: %v %v", err, c.listenersConfig.named)
	}
	if ls, _, err := c.listenersConfig.gatewayListeners(nil, slog.New(slog.DiscardHandler)); ls != nil || err != nil {
		t.Fatalf("defaults: %v %v", ls, err)
	}
}

// TestListenerOverrides: each listener gets its own certificate, client
// CA and mechanisms where given, the shared flags' elsewhere, and the
// overrides can come from the environment too.
func TestListenerOverrides(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	os.WriteFile(users, []byte("admin:secret\n"), 0o600)
	partnerUsers := filepath.Join(dir, "partner-users")
	os.WriteFile(partnerUsers, []byte("partner:partner-secret\n"), 0o600)
	sharedCert, sharedKey, _ := testCerts(t, filepath.Join(dir, "shared"), "shared")
	intCert, intKey, intCA := testCerts(t, filepath.Join(dir, "int"), "internal")
	extCert, extKey, _ := testCerts(t, filepath.Join(dir, "ext"), "public")
	c, err := parseConfig([]string{"--kafka-addr", "127.0.0.1:9092", "--kafka-listener-name", "INTERNAL",
		"--listeners", "EXTERNAL://127.0.0.1:9093,REPLICATION://127.0.0.1:9094,LOCAL://127.0.0.1:9095,PARTNER://127.0.0.1:9096,OPEN://127.0.0.1:9097",
		"--listener-security-protocol-map", "INTERNAL:SSL,EXTERNAL:SASL_SSL,REPLICATION:SASL_SSL,LOCAL:SASL_PLAINTEXT,PARTNER:SASL_SSL,OPEN:SSL",
		"--kafka-tls-cert", sharedCert, "--kafka-tls-key", sharedKey, "--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", users,
		"--listener-tls-client-ca", "INTERNAL:" + intCA + ",PARTNER:" + intCA + ",OPEN:" + intCA,
		"--listener-tls-cert", "INTERNAL:" + intCert, "--listener-tls-key", "internal:" + intKey,
		"--listener-sasl-enabled-mechanisms", "EXTERNAL:SCRAM-SHA-512, EXTERNAL:SCRAM-SHA-256,LOCAL:SCRAM-SHA-512",
		"--listener-sasl-plain-users-file", "PARTNER:" + partnerUsers},
		env("KGATE_LISTENER_TLS_CLIENT_AUTH", "PARTNER:Requested,OPEN:none", "KGATE_LISTENER_TLS_CERT", "EXTERNAL:"+extCert, "KGATE_LISTENER_TLS_KEY", "EXTERNAL:"+extKey))
	if err != nil {
		t.Fatal(err)
	}
	// The flags win over the environment: EXTERNAL keeps the shared
	// certificate; PARTNER and OPEN take their client auth from it.
	shared := reloader(t, certs.Files{Cert: sharedCert, Key: sharedKey})
	ls, own, err := c.listenersConfig.gatewayListeners(shared, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != 2 {
		t.Fatalf("%d reloaders of listeners' own files, want 2 (INTERNAL's, PARTNER's)", len(own))
	}
	served := func(l gateway.Listener) (string, tls.ClientAuthType) {
		cfg, err := l.TLS.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName, cfg.ClientAuth
	}
	for i, w := range []struct {
		name, cn   string
		clientAuth tls.ClientAuthType
		mechs      string
	}{
		{"INTERNAL", "internal", tls.RequireAndVerifyClientCert, ""},
		{"EXTERNAL", "shared", tls.NoClientCert, "SCRAM-SHA-512,SCRAM-SHA-256"},
		{"REPLICATION", "shared", tls.NoClientCert, "PLAIN"},
		{"LOCAL", "", 0, "SCRAM-SHA-512"},
		{"PARTNER", "shared", tls.VerifyClientCertIfGiven, "PLAIN"},
		{"OPEN", "shared", tls.NoClientCert, ""},
	} {
		l := ls[i]
		if l.Name != w.name || strings.Join(l.Mechanisms, ",") != w.mechs {
			t.Errorf("listener %d: %s with %v, want %s with %s", i, l.Name, l.Mechanisms, w.name, w.mechs)
		}
		if w.cn == "" {
			if l.TLS != nil {
				t.Errorf("%s speaks TLS", l.Name)
			}
			continue
		}
		if cn, auth := served(l); cn != w.cn || auth != w.clientAuth {
			t.Errorf("%s serves %q with client auth %v, want %q with %v", l.Name, cn, auth, w.cn, w.clientAuth)
		}
	}
	// PARTNER has PLAIN users of its own, the others none of their own.
	if p, ok := ls[4].PlainUsers("partner"); !ok || p != "partner-secret" {
		t.Errorf("PARTNER's PLAIN user: %q %v", p, ok)
	}
	if ls[1].PlainUsers != nil || ls[2].PlainUsers != nil {
		t.Errorf("EXTERNAL or REPLICATION has PLAIN users of its own")
	}

	// PARTNER asks for a certificate: none is fine, one it cannot verify is not.
	partner := ls[4].TLS
	intPair := must(tls.LoadX509KeyPair(intCert, intKey))
	extPair := must(tls.LoadX509KeyPair(extCert, extKey))
	for _, w := range []struct {
		what string
		cert []tls.Certificate
		ok   bool
	}{{"no certificate", nil, true}, {"a certificate of its client CA", []tls.Certificate{intPair}, true}, {"a certificate of another CA", []tls.Certificate{extPair}, false}} {
		// GetClientCertificate sends the certificate even where the
		// server's list of CAs does not name its issuer.
		cfg := &tls.Config{InsecureSkipVerify: true, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if w.cert == nil {
				return &tls.Certificate{}, nil
			}
			return &w.cert[0], nil
		}}
		err := tlsHandshake(partner, cfg)
		if (err == nil) != w.ok {
			t.Errorf("PARTNER, a client with %s: handshake error %v", w.what, err)
		}
	}

	// The gateway's shared SASL settings cover every listener's mechanisms.
	gc := gateway.Config{}
	if _, err := kafkaSecurity(&c.securityConfig, &gc, c.listenersConfig.allMechanisms(), slog.New(slog.DiscardHandler)); err != nil || gc.SASL == nil || gc.SASL.PlainUsers == nil {
		t.Fatalf("kafkaSecurity: %v %+v", err, gc.SASL)
	}

	// With only listeners' own certificates and mechanisms, no shared ones.
	c, err = parseConfig([]string{"--kafka-addr", "127.0.0.1:9092", "--kafka-listener-name", "INTERNAL",
		"--listeners", "EXTERNAL://127.0.0.1:9093", "--listener-security-protocol-map", "INTERNAL:SSL,EXTERNAL:SASL_SSL",
		"--listener-tls-cert", "INTERNAL:" + intCert + ",EXTERNAL:" + extCert, "--listener-tls-key", "INTERNAL:" + intKey + ",EXTERNAL:" + extKey,
		"--listener-tls-client-ca", "INTERNAL:" + intCA, "--listener-sasl-enabled-mechanisms", "EXTERNAL:SCRAM-SHA-512"}, env())
	if err != nil {
		t.Fatal(err)
	}
	if !c.listenersConfig.ownTLS() {
		t.Error("ownTLS false: SIGHUP would not reload the listeners' certificates")
	}
	ls, own, err = c.listenersConfig.gatewayListeners(nil, slog.New(slog.DiscardHandler))
	if err != nil || len(own) != 2 {
		t.Fatalf("gateway listeners: %v, %d own reloaders, want 2", err, len(own))
	}
	if cn, auth := served(ls[0]); cn != "internal" || auth != tls.RequireAndVerifyClientCert {
		t.Errorf("INTERNAL serves %q with %v", cn, auth)
	}
	if cn, auth := served(ls[1]); cn != "public" || auth != tls.NoClientCert || !slices.Equal(ls[1].Mechanisms, []string{"SCRAM-SHA-512"}) {
		t.Errorf("EXTERNAL serves %q with %v, mechanisms %v", cn, auth, ls[1].Mechanisms)
	}
	gc = gateway.Config{}
	if _, err := kafkaSecurity(&c.securityConfig, &gc, c.listenersConfig.allMechanisms(), slog.New(slog.DiscardHandler)); err != nil || gc.SASL == nil {
		t.Fatalf("kafkaSecurity without shared mechanisms: %v %+v", err, gc.SASL)
	}
}

// tlsHandshake runs a TLS handshake between server and client over a
// pipe and returns the server's error.
func tlsHandshake(server, client *tls.Config) error {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		c := tls.Client(b, client)
		err := c.Handshake()
		if err == nil {
			// TLS 1.3: the server checks the client's certificate after
			// the client's handshake ends; read its verdict.
			_, err = c.Read(make([]byte, 1))
		}
		b.Close()
		done <- err
	}()
	s := tls.Server(a, server)
	err := s.Handshake()
	a.Close()
	<-done
	return err
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// testCerts writes a fresh CA and a certificate it signs for cn.
func testCerts(t *testing.T, dir, cn string) (cert, key, ca string) {
	t.Helper()
	authority, err := certs.NewCA(cn+" CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issued, err := authority.Issue(cn, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if cert, key, err = issued.WriteFiles(dir, cn); err != nil {
		t.Fatal(err)
	}
	ca = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, authority.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return cert, key, ca
}

func reloader(t *testing.T, f certs.Files) *certs.Reloader {
	t.Helper()
	rl, err := certs.NewReloader(f, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return rl
}

// TestListenerSASLOverrides: each SASL listener gets its own failure
// delay, session lifetime and OAUTHBEARER keys and rules where given, each
// setting falling back on the shared flag, from flags or the environment.
func TestListenerSASLOverrides(t *testing.T) {
	dir := t.TempDir()
	jwks := func(name string) string { return writeJWKS(t, dir, name) }
	users := filepath.Join(dir, "users")
	os.WriteFile(users, []byte("admin:secret\n"), 0o600)
	sharedKeys, partnerKeys := jwks("shared"), jwks("partner")
	c, err := parseConfig([]string{"--kafka-addr", "127.0.0.1:9092", "--kafka-listener-name", "INTERNAL",
		"--listeners", "PARTNER://127.0.0.1:9093,OPEN://127.0.0.1:9094",
		"--listener-security-protocol-map", "INTERNAL:SASL_PLAINTEXT,PARTNER:SASL_PLAINTEXT,OPEN:PLAINTEXT",
		"--sasl-enabled-mechanisms", "PLAIN,OAUTHBEARER", "--sasl-plain-users-file", users,
		"--sasl-oauthbearer-jwks-file", sharedKeys, "--sasl-oauthbearer-expected-issuer", "https://shared.test",
		"--sasl-oauthbearer-expected-audience", "kafka", "--connection-failed-authentication-delay", "250ms", "--connections-max-reauth", "1h",
		"--listener-connection-failed-authentication-delay", "PARTNER:3s",
		"--listener-sasl-oauthbearer-jwks-file", "PARTNER:" + partnerKeys,
		"--listener-sasl-oauthbearer-expected-audience", "PARTNER:orders,PARTNER:payments"},
		env("KGATE_LISTENER_CONNECTIONS_MAX_REAUTH", "PARTNER:10m,INTERNAL:0s", "KGATE_LISTENER_SASL_OAUTHBEARER_EXPECTED_ISSUER", "PARTNER:https://partner.test",
			"KGATE_LISTENER_SASL_OAUTHBEARER_CLOCK_SKEW", "PARTNER:5s"))
	if err != nil {
		t.Fatal(err)
	}
	ls, _, err := c.listenersConfig.gatewayListeners(nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	internal, partner, open := ls[0], ls[1], ls[2]
	// INTERNAL: the shared delay and keys, its own lifetime (0: unlimited).
	if internal.FailureDelay != nil || internal.SessionLifetime == nil || *internal.SessionLifetime != 0 || internal.OAuthKeys != nil || internal.OAuthRules != nil {
		t.Errorf("INTERNAL: delay %v lifetime %v own keys %v own rules %+v", internal.FailureDelay, internal.SessionLifetime, internal.OAuthKeys != nil, internal.OAuthRules)
	}
	if partner.FailureDelay == nil || *partner.FailureDelay != 3*time.Second || partner.SessionLifetime == nil || *partner.SessionLifetime != 10*time.Minute {
		t.Errorf("PARTNER: delay %v lifetime %v", partner.FailureDelay, partner.SessionLifetime)
	}
	// PARTNER's rules: its issuer, audiences and skew, the shared claim name.
	if r := partner.OAuthRules; r == nil || r.Issuer != "https://partner.test" || !slices.Equal(r.Audiences, []string{"orders", "payments"}) || r.SubClaim != "sub" || r.ClockSkew != 5*time.Second {
		t.Errorf("PARTNER's token rules: %+v", r)
	}
	if partner.OAuthKeys == nil {
		t.Fatal("PARTNER has no key set of its own")
	}
	if ks, err := partner.OAuthKeys(); err != nil || ks == nil {
		t.Errorf("PARTNER's key set: %v", err)
	}
	if open.FailureDelay != nil || open.SessionLifetime != nil || open.OAuthKeys != nil || open.OAuthRules != nil {
		t.Errorf("OPEN (PLAINTEXT) has SASL settings: %+v", open)
	}
	// The shared settings stay the gateway's.
	gc := gateway.Config{}
	if _, err := kafkaSecurity(&c.securityConfig, &gc, c.listenersConfig.allMechanisms(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if s := gc.SASL; s == nil || s.FailureDelay != 250*time.Millisecond || s.SessionLifetime != time.Hour || s.OAuthRules.Issuer != "https://shared.test" || s.OAuthKeys == nil {
		t.Errorf("shared SASL settings: %+v", gc.SASL)
	}
}

// TestClientCertificateInsteadOfSASL: the flag reaches the gateway's SASL
// settings (off by default, as Kafka wants SASL on SASL_SSL listeners).
func TestClientCertificateInsteadOfSASL(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := testCerts(t, dir, "node-1")
	users := filepath.Join(dir, "users")
	os.WriteFile(users, []byte("admin:secret\n"), 0o600)
	for _, on := range []bool{false, true} {
		args := []string{"--kafka-tls-cert", cert, "--kafka-tls-key", key, "--kafka-tls-client-ca", ca,
			"--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", users}
		if on {
			args = append(args, "--client-certificate-instead-of-sasl")
		}
		c, err := parseConfig(args, env())
		if err != nil {
			t.Fatal(err)
		}
		gc := gateway.Config{}
		if _, err := kafkaSecurity(&c.securityConfig, &gc, nil, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		if gc.SASL.CertificateInsteadOfSASL != on {
			t.Errorf("--client-certificate-instead-of-sasl=%v: gateway has %v", on, gc.SASL.CertificateInsteadOfSASL)
		}
	}
}

// TestListenerClientCertificateInsteadOfSASL: each SASL_SSL listener takes
// its own --listener-client-certificate-instead-of-sasl value, the others
// none (the gateway then applies --client-certificate-instead-of-sasl).
func TestListenerClientCertificateInsteadOfSASL(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := testCerts(t, dir, "node-1")
	users := filepath.Join(dir, "users")
	os.WriteFile(users, []byte("admin:secret\n"), 0o600)
	base := []string{"--kafka-listener-name", "A", "--listeners", "B://127.0.0.1:9093,C://127.0.0.1:9094,D://127.0.0.1:9095",
		"--listener-security-protocol-map", "A:SASL_SSL,B:SASL_SSL,C:SASL_SSL,D:SSL",
		"--kafka-tls-cert", cert, "--kafka-tls-key", key, "--kafka-tls-client-ca", ca,
		"--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", users}
	for _, tc := range []struct {
		args []string
		env  []string
		want map[string]*bool // by listener; nil: the shared setting
	}{
		{nil, nil, map[string]*bool{"A": nil, "B": nil, "C": nil, "D": nil}},
		{[]string{"--listener-client-certificate-instead-of-sasl", "A:true,b:False"}, nil, map[string]*bool{"A": ptr(true), "B": ptr(false), "C": nil, "D": nil}},
		{[]string{"--client-certificate-instead-of-sasl"}, []string{"KGATE_LISTENER_CLIENT_CERTIFICATE_INSTEAD_OF_SASL", "C:0"}, map[string]*bool{"A": nil, "B": nil, "C": ptr(false), "D": nil}},
	} {
		c, err := parseConfig(append(slices.Clone(base), tc.args...), env(tc.env...))
		if err != nil {
			t.Fatalf("%v %v: %v", tc.args, tc.env, err)
		}
		ls, _, err := c.listenersConfig.gatewayListeners(reloader(t, certs.Files{Cert: cert, Key: key, ClientCA: ca}), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			got, want := l.CertificateInsteadOfSASL, tc.want[l.Name]
			if (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Errorf("%v %v: listener %s has %v, want %v", tc.args, tc.env, l.Name, fmtBool(got), fmtBool(want))
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func fmtBool(b *bool) string {
	if b == nil {
		return "the shared setting"
	}
	return strconv.FormatBool(*b)
}

// writeJWKS writes a key set of one fresh RSA key to dir/name.json.
func writeJWKS(t *testing.T, dir, name string) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": name, "n": enc.EncodeToString(k.N.Bytes()), "e": "AQAB"}}})
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestListenerKeySetsOnly: OAUTHBEARER enabled for every SASL listener
// by the shared flag needs no shared key set when each has its own.
func TestListenerKeySetsOnly(t *testing.T) {
	dir := t.TempDir()
	c, err := parseConfig([]string{"--kafka-listener-name", "INT", "--listeners", "EXT://127.0.0.1:9093", "--listener-security-protocol-map", "INT:SASL_PLAINTEXT,EXT:SASL_PLAINTEXT",
		"--sasl-enabled-mechanisms", "OAUTHBEARER", "--listener-sasl-oauthbearer-jwks-file", "INT:" + writeJWKS(t, dir, "int") + ",EXT:" + writeJWKS(t, dir, "ext")}, env())
	if err != nil {
		t.Fatal(err)
	}
	ls, _, err := c.listenersConfig.gatewayListeners(nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.OAuthKeys == nil {
			t.Errorf("%s has no key set of its own", l.Name)
		}
	}
}
