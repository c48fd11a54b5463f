package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/admin"
	"github.com/kgate/kgate/gateway/authz"
	"github.com/kgate/kgate/gateway/certs"
	"github.com/kgate/kgate/gateway/sasl"
)

// securityConfig is the flags of listener TLS, SASL, the admin token and
// secrets read from files (docs/security.md).
type securityConfig struct {
	KafkaTLSCert       string
	KafkaTLSKey        string
	KafkaTLSClientCA   string
	TLSReloadInterval  time.Duration
	SASLMechanisms     string
	SASLPlainUsersFile string
	FailedAuthDelay    time.Duration
	MaxReauth          time.Duration
	AdminTokenFile     string
	AdminPprof         bool
	IggyPasswordFile   string
	IggyTokenFile      string
	GossipKeyFile      string
	RaftTLSCert        string
	RaftTLSKey         string
	RaftTLSCA          string
	AdminTLSCert       string
	AdminTLSKey        string
	AdminTLSClientCA   string
	OAuthJWKSFile      string
	OAuthIssuer        string
	OAuthAudience      string
	OAuthSubClaim      string
	OAuthClockSkew     time.Duration
	Authorizer         bool
	SuperUsers         string
	AllowIfNoACL       bool
	// CertificateInsteadOfSASL keeps kgate's former rule on SASL_SSL
	// listeners: a verified client certificate authenticates on its own.
	CertificateInsteadOfSASL bool

	// listenerKeySets is set by config.validate when some listener has an
	// OAUTHBEARER key set of its own: --sasl-enabled-mechanisms may then
	// enable OAUTHBEARER without the shared one, each listener checked.
	listenerKeySets bool
}

func addSecurityFlags(fs *flag.FlagSet, c *securityConfig) {
	fs.StringVar(&c.KafkaTLSCert, "kafka-tls-cert", "", "PEM certificate chain of the Kafka listener; with --kafka-tls-key the listener speaks TLS 1.2+ only")
	fs.StringVar(&c.KafkaTLSKey, "kafka-tls-key", "", "PEM private key of --kafka-tls-cert")
	fs.StringVar(&c.KafkaTLSClientCA, "kafka-tls-client-ca", "", "PEM CA certificates; clients must present a certificate they sign (mutual TLS)")
	fs.DurationVar(&c.TLSReloadInterval, "tls-reload-interval", 10*time.Second, "how often certificate files are checked for changes (SIGHUP reloads at once)")
	fs.StringVar(&c.SASLMechanisms, "sasl-enabled-mechanisms", "", "comma list of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; when set every client must authenticate (Kafka's sasl.enabled.mechanisms)")
	fs.StringVar(&c.OAuthJWKSFile, "sasl-oauthbearer-jwks-file", "", "JWKS file of the keys OAUTHBEARER tokens are signed with, re-read when it changes (Kafka's sasl.oauthbearer.jwks.endpoint.url)")
	fs.StringVar(&c.OAuthIssuer, "sasl-oauthbearer-expected-issuer", "", "iss an OAUTHBEARER token must carry (Kafka's sasl.oauthbearer.expected.issuer)")
	fs.StringVar(&c.OAuthAudience, "sasl-oauthbearer-expected-audience", "", "comma list; an OAUTHBEARER token's aud must name one (Kafka's sasl.oauthbearer.expected.audience)")
	fs.StringVar(&c.OAuthSubClaim, "sasl-oauthbearer-sub-claim-name", "sub", "claim naming an OAUTHBEARER token's principal (Kafka's sasl.oauthbearer.sub.claim.name)")
	fs.DurationVar(&c.OAuthClockSkew, "sasl-oauthbearer-clock-skew", 30*time.Second, "clock difference allowed when checking a token's exp and nbf (Kafka's sasl.oauthbearer.clock.skew.seconds)")
	fs.BoolVar(&c.CertificateInsteadOfSASL, "client-certificate-instead-of-sasl", false, "on SASL_SSL listeners, a client certificate their client CA verified authenticates the connection without SASL (kgate's rule before it followed Kafka, which always requires SASL there)")
	fs.StringVar(&c.SASLPlainUsersFile, "sasl-plain-users-file", "", "file of PLAIN users, one user:password a line")
	fs.DurationVar(&c.FailedAuthDelay, "connection-failed-authentication-delay", 100*time.Millisecond, "delay before answering a failed authentication and closing (Kafka's connection.failed.authentication.delay.ms)")
	fs.DurationVar(&c.MaxReauth, "connections-max-reauth", 0, "SASL session lifetime; clients re-authenticate before it ends or are disconnected, 0 = unlimited (Kafka's connections.max.reauth.ms)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "file holding the bearer token the admin API requires (all but /healthz and /readyz)")
	fs.StringVar(&c.AdminTLSCert, "admin-tls-cert", "", "PEM certificate chain of the admin API; with --admin-tls-key it speaks HTTPS only")
	fs.StringVar(&c.AdminTLSKey, "admin-tls-key", "", "PEM private key of --admin-tls-cert")
	fs.StringVar(&c.AdminTLSClientCA, "admin-tls-client-ca", "", "PEM CA certificates; every admin path but /healthz and /readyz wants a client certificate they sign (401 otherwise)")
	fs.BoolVar(&c.AdminPprof, "admin-pprof", false, "serve Go profiles on the admin API under /debug/pprof/")
	fs.StringVar(&c.IggyPasswordFile, "iggy-password-file", "", "file holding the Iggy password (instead of --iggy-password)")
	fs.StringVar(&c.IggyTokenFile, "iggy-token-file", "", "file holding the Iggy personal access token (instead of --iggy-token)")
	fs.StringVar(&c.RaftTLSCert, "raft-tls-cert", "", "PEM certificate chain this node presents on the Raft port (Raft and forwarded requests), naming it node-<id> or kgate-<id>; with --raft-tls-key and --raft-tls-ca every node-to-node link uses mutual TLS")
	fs.StringVar(&c.RaftTLSKey, "raft-tls-key", "", "PEM private key of --raft-tls-cert")
	fs.StringVar(&c.RaftTLSCA, "raft-tls-ca", "", "PEM CA certificates that sign every node's --raft-tls-cert (the cluster's CA)")
	fs.BoolVar(&c.Authorizer, "authorizer", false, "authorize every Kafka request with the cluster's ACLs (kafka-acls.sh manages them); off: everything is allowed and the ACL APIs answer SECURITY_DISABLED")
	fs.StringVar(&c.SuperUsers, "super-users", "", "semicolon list of principals allowed everything with --authorizer, e.g. User:admin;User:CN=ops (Kafka's super.users)")
	fs.BoolVar(&c.AllowIfNoACL, "allow-everyone-if-no-acl-found", false, "with --authorizer, allow an action on a resource no ACL names (Kafka's allow.everyone.if.no.acl.found)")
	fs.StringVar(&c.GossipKeyFile, "gossip-key-file", "", "file of base64 gossip encryption keys (16, 24 or 32 bytes), one a line: the first encrypts, all decrypt; SIGHUP reloads it (key rotation)")
}

var knownMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

func (c *securityConfig) validate() error {
	if (c.KafkaTLSCert == "") != (c.KafkaTLSKey == "") {
		return fmt.Errorf("invalid value for --kafka-tls-cert/--kafka-tls-key: give both or neither")
	}
	if c.KafkaTLSClientCA != "" && c.KafkaTLSCert == "" {
		return fmt.Errorf("invalid value for --kafka-tls-client-ca: needs --kafka-tls-cert and --kafka-tls-key")
	}
	if (c.AdminTLSCert == "") != (c.AdminTLSKey == "") {
		return fmt.Errorf("invalid value for --admin-tls-cert/--admin-tls-key: give both or neither")
	}
	if c.AdminTLSClientCA != "" && c.AdminTLSCert == "" {
		return fmt.Errorf("invalid value for --admin-tls-client-ca: needs --admin-tls-cert and --admin-tls-key")
	}
	if n := countSet(c.RaftTLSCert, c.RaftTLSKey, c.RaftTLSCA); n != 0 && n != 3 {
		return fmt.Errorf("invalid value for --raft-tls-cert/--raft-tls-key/--raft-tls-ca: give all three or none")
	}
	for _, f := range []struct{ name, path string }{
		{"kafka-tls-cert", c.KafkaTLSCert}, {"kafka-tls-key", c.KafkaTLSKey}, {"kafka-tls-client-ca", c.KafkaTLSClientCA},
		{"sasl-plain-users-file", c.SASLPlainUsersFile}, {"admin-token-file", c.AdminTokenFile}, {"iggy-password-file", c.IggyPasswordFile}, {"iggy-token-file", c.IggyTokenFile}, {"gossip-key-file", c.GossipKeyFile}, {"sasl-oauthbearer-jwks-file", c.OAuthJWKSFile},
		{"admin-tls-cert", c.AdminTLSCert}, {"admin-tls-key", c.AdminTLSKey}, {"admin-tls-client-ca", c.AdminTLSClientCA},
		{"raft-tls-cert", c.RaftTLSCert}, {"raft-tls-key", c.RaftTLSKey}, {"raft-tls-ca", c.RaftTLSCA},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("invalid value %q for --%s: %v", f.path, f.name, err)
		}
	}
	if c.GossipKeyFile != "" {
		if _, err := loadGossipKeys(c.GossipKeyFile); err != nil {
			return err
		}
	}
	if c.TLSReloadInterval < 100*time.Millisecond {
		return fmt.Errorf("invalid value %s for --tls-reload-interval: must be at least 100ms", c.TLSReloadInterval)
	}
	if err := c.checkMechanisms("sasl-enabled-mechanisms", c.SASLMechanisms, c.mechanisms(), false, c.listenerKeySets); err != nil {
		return err
	}
	if why := checkFailedAuthDelay(c.FailedAuthDelay); why != "" {
		return fmt.Errorf("invalid value %s for --connection-failed-authentication-delay: %s", c.FailedAuthDelay, why)
	}
	for _, u := range c.superUsers() {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return fmt.Errorf("invalid value %q for --super-users: %q is not a principal of the form User:name", c.SuperUsers, u)
		}
	}
	if !c.Authorizer && (c.SuperUsers != "" || c.AllowIfNoACL) {
		return fmt.Errorf("invalid value for --super-users/--allow-everyone-if-no-acl-found: they need --authorizer")
	}
	if why := checkMaxReauth(c.MaxReauth); why != "" {
		return fmt.Errorf("invalid value %s for --connections-max-reauth: %s", c.MaxReauth, why)
	}
	return nil
}

// checkMechanisms checks a list of SASL mechanisms that flag (whose
// value is v) enables: known names, and the settings each one needs
// (ownPlainUsers, ownJWKS: PLAIN users, OAUTHBEARER keys come from a
// listener's own file).
func (c *securityConfig) checkMechanisms(flag, v string, mechs []string, ownPlainUsers, ownJWKS bool) error {
	for _, m := range mechs {
		if !slices.Contains(knownMechanisms, m) {
			return fmt.Errorf("invalid value %q for --%s: %q is not one of %s", v, flag, m, strings.Join(knownMechanisms, ", "))
		}
	}
	if slices.Contains(mechs, "PLAIN") && c.SASLPlainUsersFile == "" && !ownPlainUsers {
		return fmt.Errorf("invalid value for --%s: PLAIN needs --sasl-plain-users-file", flag)
	}
	if slices.Contains(mechs, "OAUTHBEARER") {
		if c.OAuthJWKSFile == "" && !ownJWKS {
			also := ""
			if strings.HasPrefix(flag, "listener-") {
				also = " or --listener-sasl-oauthbearer-jwks-file"
			}
			return fmt.Errorf("invalid value for --%s: OAUTHBEARER needs --sasl-oauthbearer-jwks-file%s", flag, also)
		}
		if c.OAuthJWKSFile != "" {
			if _, err := loadKeySet(c.OAuthJWKSFile); err != nil {
				return err
			}
		}
		if c.OAuthSubClaim == "" {
			return fmt.Errorf("invalid value for --sasl-oauthbearer-sub-claim-name: must not be empty")
		}
		if why := checkClockSkew(c.OAuthClockSkew); why != "" {
			return fmt.Errorf("invalid value %s for --sasl-oauthbearer-clock-skew: %s", c.OAuthClockSkew, why)
		}
	}
	return nil
}

// tokenRules is what the shared --sasl-oauthbearer-* flags ask of a token.
func (c *securityConfig) tokenRules() sasl.TokenRules {
	r := sasl.TokenRules{Issuer: c.OAuthIssuer, SubClaim: c.OAuthSubClaim, ClockSkew: c.OAuthClockSkew}
	for _, a := range strings.Split(c.OAuthAudience, ",") {
		if a = strings.TrimSpace(a); a != "" {
			r.Audiences = append(r.Audiences, a)
		}
	}
	return r
}

// listenerTokenRules is the token rules of a listener with OAUTHBEARER
// settings of its own, each falling back on the shared flag; nil when it
// has none.
func (c *securityConfig) listenerTokenRules(ov listenerOverrides, name string) *sasl.TokenRules {
	r := c.tokenRules()
	own := false
	if v, ok := ov.oauthIssuer[name]; ok {
		r.Issuer, own = v, true
	}
	if v, ok := ov.oauthAudience[name]; ok {
		r.Audiences, own = v, true
	}
	if v, ok := ov.oauthSub[name]; ok {
		r.SubClaim, own = v, true
	}
	if v, ok := ov.oauthSkew[name]; ok {
		r.ClockSkew, own = v, true
	}
	if !own {
		return nil
	}
	return &r
}

// superUsers splits --super-users (';', as Kafka's super.users, since
// certificate subjects hold commas).
func (c *securityConfig) superUsers() []string {
	var out []string
	for _, u := range strings.Split(c.SuperUsers, ";") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

func (c *securityConfig) mechanisms() []string {
	var out []string
	for _, m := range strings.Split(c.SASLMechanisms, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// readSecret reads a one-line secret file (trailing newline dropped).
func readSecret(flagName, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flagName, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("--%s: %s is empty", flagName, path)
	}
	return s, nil
}

// loadPlainUsers reads user:password lines; '#' starts a comment line.
func loadPlainUsers(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sasl-plain-users-file: %w", err)
	}
	users := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		user, pass, ok := strings.Cut(l, ":")
		if !ok || user == "" || pass == "" {
			// Never echo the line: it may hold a password.
			return nil, fmt.Errorf("--sasl-plain-users-file: %s line %d: want user:password", path, line)
		}
		users[user] = pass
	}
	return users, nil
}

// kafkaSecurity fills the gateway's TLS and SASL settings and returns the
// certificate reloader (nil without TLS). listenerMechs, when not nil, is
// every mechanism the named listeners enable (their own and the shared).
func kafkaSecurity(c *securityConfig, gc *gateway.Config, listenerMechs []string, log *slog.Logger) (*certs.Reloader, error) {
	var rl *certs.Reloader
	if c.KafkaTLSCert != "" {
		var err error
		rl, err = certs.NewReloader(certs.Files{Cert: c.KafkaTLSCert, Key: c.KafkaTLSKey, ClientCA: c.KafkaTLSClientCA}, log)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-cert: %w", err)
		}
		gc.TLS = rl.ServerConfig()
	}
	all := c.mechanisms()
	if listenerMechs != nil {
		all = listenerMechs
	}
	if mechs := c.mechanisms(); len(all) > 0 {
		s := &gateway.SASL{Mechanisms: mechs, FailureDelay: c.FailedAuthDelay, SessionLifetime: c.MaxReauth, CertificateInsteadOfSASL: c.CertificateInsteadOfSASL}
		if c.SASLPlainUsersFile != "" {
			users, err := loadPlainUsers(c.SASLPlainUsersFile)
			if err != nil {
				return nil, err
			}
			s.PlainUsers = func(u string) (string, bool) { p, ok := users[u]; return p, ok }
		}
		if slices.Contains(all, "OAUTHBEARER") {
			if c.OAuthJWKSFile != "" {
				s.OAuthKeys = keySetFile(c.OAuthJWKSFile, log)
			}
			s.OAuthRules = c.tokenRules()
		}
		if listenerMechs == nil && rl == nil && slices.Contains(mechs, "PLAIN") {
			log.Warn("SASL PLAIN without --kafka-tls-cert: passwords cross the network in clear")
		}
		gc.SASL = s
	}
	if c.Authorizer {
		if gc.ACLs == nil {
			return nil, fmt.Errorf("--authorizer: no ACL store")
		}
		gc.Authorizer = authz.New(gc.ACLs, authz.Config{SuperUsers: c.superUsers(), AllowIfNoACL: c.AllowIfNoACL})
	}
	return rl, nil
}

func countSet(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

// linkSecurity is the Raft port's mutual TLS and its certificate reloader
// (both nil without --raft-tls-cert).
func linkSecurity(c *securityConfig, log *slog.Logger) (*cluster.LinkTLS, *certs.Reloader, error) {
	if c.RaftTLSCert == "" {
		return nil, nil, nil
	}
	rl, err := certs.NewReloader(certs.Files{Cert: c.RaftTLSCert, Key: c.RaftTLSKey, ClientCA: c.RaftTLSCA}, log)
	if err != nil {
		return nil, nil, fmt.Errorf("--raft-tls-cert: %w", err)
	}
	return &cluster.LinkTLS{Server: rl.ServerConfig(), Client: rl.ClientConfig}, rl, nil
}

func loadKeySet(path string) (*sasl.KeySet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sasl-oauthbearer-jwks-file: %w", err)
	}
	ks, err := sasl.ParseKeySet(b)
	if err != nil {
		return nil, fmt.Errorf("--sasl-oauthbearer-jwks-file: %s: %w", path, err)
	}
	return ks, nil
}

// keySetFile serves the JWKS file's keys, read again whenever the file's
// size or modification time changed (key rotation); a file that no longer
// parses keeps the previous keys.
func keySetFile(path string, log *slog.Logger) func() (*sasl.KeySet, error) {
	var mu sync.Mutex
	var keys *sasl.KeySet
	var stamp string
	return func() (*sasl.KeySet, error) {
		mu.Lock()
		defer mu.Unlock()
		fi, err := os.Stat(path)
		if err == nil {
			if now := fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano()); now != stamp {
				stamp = now
				ks, err := loadKeySet(path)
				if err != nil {
					log.Error("OAUTHBEARER key set reload failed; keeping the previous keys", "err", err)
				} else {
					keys = ks
					log.Info("OAUTHBEARER key set loaded", "file", path)
				}
			}
		}
		if keys == nil {
			return nil, errors.New("no OAUTHBEARER key set loaded")
		}
		return keys, nil
	}
}

// loadGossipKeys reads base64 keys, one a line ('#' comments).
func loadGossipKeys(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file: %w", err)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(l)
		if err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
			return nil, fmt.Errorf("--gossip-key-file: %s line %d: want a base64 key of 16, 24 or 32 bytes (openssl rand -base64 32)", path, line)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("--gossip-key-file: no key in %s", path)
	}
	return keys, nil
}

// notifyHangup starts catching SIGHUP when something reloads on it (else
// SIGHUP keeps its default meaning and this returns nil). It is called
// before any listener opens, so a SIGHUP sent once the node answers never
// finds it unprepared.
func notifyHangup(c *securityConfig, listenerTLS bool) chan os.Signal {
	if c.KafkaTLSCert == "" && c.GossipKeyFile == "" && c.RaftTLSCert == "" && c.AdminTLSCert == "" && !listenerTLS {
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// reloadOnHangup reloads, on SIGHUP, the certificates (which also follow
// file changes) and the gossip keys, until ctx ends.
func reloadOnHangup(ctx context.Context, hup chan os.Signal, c *securityConfig, reloaders []*certs.Reloader, node *cluster.Node, log *slog.Logger) {
	if hup == nil {
		return
	}
	defer signal.Stop(hup)
	var certHups []chan os.Signal
	var watchers sync.WaitGroup
	defer watchers.Wait()
	for _, rl := range reloaders {
		if rl == nil {
			continue
		}
		certHup := make(chan os.Signal, 1)
		certHups = append(certHups, certHup)
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			rl.Watch(ctx, c.TLSReloadInterval, certHup)
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-hup:
			for _, certHup := range certHups {
				select {
				case certHup <- sig:
				case <-ctx.Done():
					return
				}
			}
			if c.GossipKeyFile == "" {
				continue
			}
			keys, err := loadGossipKeys(c.GossipKeyFile)
			if err == nil {
				err = node.SetGossipKeys(keys)
			}
			if err != nil {
				log.Error("gossip key reload failed; keeping the previous keys", "err", err)
			} else {
				log.Info("gossip keys reloaded", "keys", len(keys))
			}
		}
	}
}

// adminOptions reads the admin token file and sets up the admin API's
// TLS; the reloader (nil without TLS) follows the certificate files.
func adminOptions(c *securityConfig, log *slog.Logger) ([]admin.Option, *certs.Reloader, error) {
	var opts []admin.Option
	var rl *certs.Reloader
	if c.AdminTLSCert != "" {
		var err error
		rl, err = certs.NewReloader(certs.Files{Cert: c.AdminTLSCert, Key: c.AdminTLSKey, ClientCA: c.AdminTLSClientCA}, log)
		if err != nil {
			return nil, nil, fmt.Errorf("--admin-tls-cert: %w", err)
		}
		// Ask for a client certificate but do not require one at the
		// handshake: probes reach /healthz and /readyz without one.
		tc := certificateRequested(rl.ServerConfig())
		opts = append(opts, admin.WithTLS(tc, c.AdminTLSClientCA != ""))
	}
	if c.AdminTokenFile != "" {
		tok, err := readSecret("admin-token-file", c.AdminTokenFile)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, admin.WithToken(tok))
	}
	if c.AdminPprof {
		opts = append(opts, admin.WithPprof())
	}
	return opts, rl, nil
}
