package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/certs"
	"github.com/kgate/kgate/gateway/sasl"
)

// listenersConfig is the flags of named Kafka listeners, with Kafka's
// names: --listeners, --advertised-listeners and
// --listener-security-protocol-map add listeners beside --kafka-addr's,
// and --kafka-listener-name names that one.
type listenersConfig struct {
	KafkaListenerName   string
	Listeners           string
	AdvertisedListeners string
	ProtocolMap         string
	// Per-listener overrides, NAME:value comma-separated (Kafka's
	// listener.name.<name>.ssl.* and .sasl.enabled.mechanisms).
	ListenerTLSCert     string
	ListenerTLSKey      string
	ListenerTLSClientCA string
	ListenerClientAuth  string
	ListenerMechanisms  string
	ListenerPlainUsers  string
	// Kafka's listener.name.<name>.connections.max.reauth.ms and
	// .oauthbearer.sasl.* settings, and a per-listener failure delay (Kafka
	// has connection.failed.authentication.delay.ms broker-wide only).
	ListenerFailedAuthDelay string
	ListenerMaxReauth       string
	ListenerOAuthJWKSFile   string
	ListenerOAuthIssuer     string
	ListenerOAuthAudience   string
	ListenerOAuthSubClaim   string
	ListenerOAuthClockSkew  string
	// Per-listener --client-certificate-instead-of-sasl, NAME:true|false
	// (kgate's own setting; Kafka always wants SASL on SASL_SSL).
	ListenerCertInsteadOfSASL string

	// Set by validate: every listener, --kafka-addr's first; nil when
	// there is only that one, unnamed.
	named []namedListener
}

type namedListener struct {
	name, bind, advertised, protocol string
	// The listener's security, its overrides applied over the shared
	// flags: certificate files (SSL listeners) and mechanisms (SASL ones).
	tls        certs.Files
	ownTLS     bool // tls differs from --kafka-tls-*
	requested  bool // a client certificate is asked for, not required
	mechanisms []string
	plainUsers string // its own PLAIN users file ("": the shared one)
	// Its own failure delay and session lifetime (nil: the shared ones).
	failureDelay, maxReauth *time.Duration
	// Its own OAUTHBEARER key set file ("": the shared one) and token
	// rules (nil: the shared ones).
	oauthJWKS  string
	oauthRules *sasl.TokenRules
	// Its own --client-certificate-instead-of-sasl (nil: the shared one).
	certInsteadOfSASL *bool
}

func addListenerFlags(fs *flag.FlagSet, c *listenersConfig) {
	fs.StringVar(&c.KafkaListenerName, "kafka-listener-name", "", "name of the --kafka-addr listener (default with --listeners: its security protocol, e.g. SASL_SSL)")
	fs.StringVar(&c.Listeners, "listeners", "", "more Kafka listeners, NAME://host:port comma-separated (Kafka's listeners), beside --kafka-addr's")
	fs.StringVar(&c.AdvertisedListeners, "advertised-listeners", "", "addresses clients of each --listeners listener are given, NAME://host:port comma-separated (default: its listen address)")
	fs.StringVar(&c.ListenerTLSCert, "listener-tls-cert", "", "per-listener --kafka-tls-cert, NAME:file comma-separated (Kafka's listener.name.<name>.ssl.keystore.location); with --listener-tls-key")
	fs.StringVar(&c.ListenerTLSKey, "listener-tls-key", "", "per-listener --kafka-tls-key, NAME:file comma-separated")
	fs.StringVar(&c.ListenerTLSClientCA, "listener-tls-client-ca", "", "per-listener --kafka-tls-client-ca, NAME:file comma-separated: that listener's clients must present a certificate these CAs sign (Kafka's listener.name.<name>.ssl.client.auth=required)")
	fs.StringVar(&c.ListenerClientAuth, "listener-tls-client-auth", "", "per-listener client certificates, NAME:required|requested|none comma-separated (Kafka's listener.name.<name>.ssl.client.auth); default required where a client CA applies")
	fs.StringVar(&c.ListenerMechanisms, "listener-sasl-enabled-mechanisms", "", "per-listener --sasl-enabled-mechanisms, NAME:MECHANISM comma-separated, a listener named once per mechanism, e.g. EXTERNAL:SCRAM-SHA-512,EXTERNAL:PLAIN (Kafka's listener.name.<name>.sasl.enabled.mechanisms)")
	fs.StringVar(&c.ListenerPlainUsers, "listener-sasl-plain-users-file", "", "per-listener --sasl-plain-users-file, NAME:file comma-separated: that listener's PLAIN users instead of the shared ones (Kafka's listener.name.<name>.plain.sasl.jaas.config)")
	fs.StringVar(&c.ListenerFailedAuthDelay, "listener-connection-failed-authentication-delay", "", "per-listener --connection-failed-authentication-delay, NAME:duration comma-separated (Kafka has connection.failed.authentication.delay.ms broker-wide only)")
	fs.StringVar(&c.ListenerMaxReauth, "listener-connections-max-reauth", "", "per-listener --connections-max-reauth, NAME:duration comma-separated, 0 = unlimited (Kafka's listener.name.<name>.connections.max.reauth.ms)")
	fs.StringVar(&c.ListenerOAuthJWKSFile, "listener-sasl-oauthbearer-jwks-file", "", "per-listener --sasl-oauthbearer-jwks-file, NAME:file comma-separated: that listener's OAUTHBEARER tokens are checked against these keys only (Kafka's listener.name.<name>.oauthbearer.sasl.oauthbearer.jwks.endpoint.url)")
	fs.StringVar(&c.ListenerOAuthIssuer, "listener-sasl-oauthbearer-expected-issuer", "", "per-listener --sasl-oauthbearer-expected-issuer, NAME:issuer comma-separated")
	fs.StringVar(&c.ListenerOAuthAudience, "listener-sasl-oauthbearer-expected-audience", "", "per-listener --sasl-oauthbearer-expected-audience, NAME:audience comma-separated, a listener named once per audience")
	fs.StringVar(&c.ListenerOAuthSubClaim, "listener-sasl-oauthbearer-sub-claim-name", "", "per-listener --sasl-oauthbearer-sub-claim-name, NAME:claim comma-separated")
	fs.StringVar(&c.ListenerOAuthClockSkew, "listener-sasl-oauthbearer-clock-skew", "", "per-listener --sasl-oauthbearer-clock-skew, NAME:duration comma-separated")
	fs.StringVar(&c.ListenerCertInsteadOfSASL, "listener-client-certificate-instead-of-sasl", "", "per-listener --client-certificate-instead-of-sasl, NAME:true|false comma-separated: on that SASL_SSL listener with a client CA, a verified client certificate authenticates without SASL (true) or SASL is still required (false)")
	fs.StringVar(&c.ProtocolMap, "listener-security-protocol-map", "", "NAME:PROTOCOL comma-separated, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (default: the name when it is a protocol)")
}

var (
	listenerName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	protocols    = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
)

// parseListenerList reads NAME://host:port,...
func parseListenerList(flagName, v string) ([][2]string, error) {
	var out [][2]string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "://")
		if !ok || !listenerName.MatchString(name) {
			return nil, fmt.Errorf("invalid value %q for --%s: %q is not NAME://host:port", v, flagName, item)
		}
		if err := checkHostPort(addr); err != nil {
			return nil, fmt.Errorf("invalid value %q for --%s: %q: %v", v, flagName, item, err)
		}
		for _, o := range out {
			if strings.EqualFold(o[0], name) {
				return nil, fmt.Errorf("invalid value %q for --%s: listener %s named twice", v, flagName, name)
			}
		}
		out = append(out, [2]string{strings.ToUpper(name), addr})
	}
	return out, nil
}

// validate checks the listener flags against the Kafka address and the
// security flags, and fills named.
func (c *listenersConfig) validate(kafkaAddr, advertiseKafka string, sec *securityConfig) error {
	if sec.CertificateInsteadOfSASL && (sec.KafkaTLSClientCA == "" && c.ListenerTLSClientCA == "" || sec.SASLMechanisms == "" && c.ListenerMechanisms == "") {
		return fmt.Errorf("invalid value for --client-certificate-instead-of-sasl: it needs SASL (--sasl-enabled-mechanisms or --listener-sasl-enabled-mechanisms) and a client CA (--kafka-tls-client-ca or --listener-tls-client-ca)")
	}
	if c.Listeners == "" && c.KafkaListenerName == "" {
		if c.AdvertisedListeners != "" || c.ProtocolMap != "" {
			return fmt.Errorf("invalid value for --advertised-listeners/--listener-security-protocol-map: no --listeners or --kafka-listener-name")
		}
		if countSet(c.ListenerTLSCert, c.ListenerTLSKey, c.ListenerTLSClientCA, c.ListenerClientAuth, c.ListenerMechanisms, c.ListenerPlainUsers,
			c.ListenerFailedAuthDelay, c.ListenerMaxReauth, c.ListenerOAuthJWKSFile, c.ListenerOAuthIssuer, c.ListenerOAuthAudience, c.ListenerOAuthSubClaim, c.ListenerOAuthClockSkew, c.ListenerCertInsteadOfSASL) > 0 {
			return fmt.Errorf("invalid value for --listener-tls-*/--listener-sasl-*/--listener-connection*: they name listeners, and there are none: name them with --listeners or --kafka-listener-name")
		}
		return nil
	}
	ov, err := c.overrides()
	if err != nil {
		return err
	}
	protoMap := map[string]string{}
	for _, item := range strings.Split(c.ProtocolMap, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		if !ok || !listenerName.MatchString(name) || !slices.Contains(protocols, strings.ToUpper(proto)) {
			return fmt.Errorf("invalid value %q for --listener-security-protocol-map: %q is not NAME:PROTOCOL with PROTOCOL one of %s",
				c.ProtocolMap, item, strings.Join(protocols, ", "))
		}
		protoMap[strings.ToUpper(name)] = strings.ToUpper(proto)
	}
	extra, err := parseListenerList("listeners", c.Listeners)
	if err != nil {
		return err
	}
	advertised, err := parseListenerList("advertised-listeners", c.AdvertisedListeners)
	if err != nil {
		return err
	}
	first := strings.ToUpper(c.KafkaListenerName)
	// --kafka-addr's listener: named, or by the protocol its flags give.
	derived := "PLAINTEXT"
	switch tlsOn, saslOn := sec.KafkaTLSCert != "" || ov.cert[first] != "", len(sec.mechanisms()) > 0 || len(ov.mechanisms[first]) > 0; {
	case tlsOn && saslOn:
		derived = "SASL_SSL"
	case tlsOn:
		derived = "SSL"
	case saslOn:
		derived = "SASL_PLAINTEXT"
	}
	if first == "" {
		first = derived
	}
	if !listenerName.MatchString(first) {
		return fmt.Errorf("invalid value %q for --kafka-listener-name: letters, digits and _ only", c.KafkaListenerName)
	}
	firstProto, ok := protoMap[first]
	if !ok {
		firstProto = derived
	}
	c.named = []namedListener{{name: first, bind: kafkaAddr, advertised: advertiseKafka, protocol: firstProto}}
	for _, l := range extra {
		if l[0] == first {
			return fmt.Errorf("invalid value %q for --listeners: %s is --kafka-addr's listener (--kafka-listener-name)", c.Listeners, l[0])
		}
		proto, ok := protoMap[l[0]]
		if !ok {
			if !slices.Contains(protocols, l[0]) {
				return fmt.Errorf("invalid value %q for --listener-security-protocol-map: no protocol for listener %s", c.ProtocolMap, l[0])
			}
			proto = l[0]
		}
		nl := namedListener{name: l[0], bind: l[1], protocol: proto}
		for _, a := range advertised {
			if a[0] == l[0] {
				nl.advertised = a[1]
			}
		}
		if nl.advertised == "" {
			if unspecifiedHost(nl.bind) {
				return fmt.Errorf("--listeners %s://%s binds every interface: give its address in --advertised-listeners", l[0], l[1])
			}
			nl.advertised = nl.bind
		} else if unspecifiedHost(nl.advertised) {
			return fmt.Errorf("invalid value %q for --advertised-listeners: %s must be an address clients can reach, not a wildcard", c.AdvertisedListeners, l[0])
		}
		c.named = append(c.named, nl)
	}
	for _, a := range advertised {
		if !slices.ContainsFunc(c.named[1:], func(n namedListener) bool { return n.name == a[0] }) {
			return fmt.Errorf("invalid value %q for --advertised-listeners: %s is not in --listeners (--advertise-kafka-addr sets --kafka-addr's)", c.AdvertisedListeners, a[0])
		}
	}
	return c.applyOverrides(ov, sec)
}

// listenerOverrides is the per-listener flags, by listener name.
type listenerOverrides struct {
	cert, key, clientCA, clientAuth, plainUsers map[string]string
	mechanisms                                  map[string][]string
	// SASL settings beyond mechanisms and users: failure delay, session
	// lifetime, and OAUTHBEARER's key set file and token rules.
	failureDelay, maxReauth, oauthSkew map[string]time.Duration
	oauthJWKS, oauthIssuer, oauthSub   map[string]string
	oauthAudience                      map[string][]string
	certInsteadOfSASL                  map[string]bool
}

// parseOverride reads NAME:value,...; with many, a name may come again
// (one mechanism each), else only once.
func parseOverride(flagName, v string, many bool) (map[string][]string, error) {
	out := map[string][]string{}
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, ":")
		value = strings.TrimSpace(value)
		if !ok || !listenerName.MatchString(name) || value == "" {
			return nil, fmt.Errorf("invalid value %q for --%s: %q is not NAME:value", v, flagName, item)
		}
		name = strings.ToUpper(name)
		if _, dup := out[name]; dup && !many {
			return nil, fmt.Errorf("invalid value %q for --%s: listener %s named twice", v, flagName, name)
		}
		if slices.Contains(out[name], value) {
			return nil, fmt.Errorf("invalid value %q for --%s: %s named twice for listener %s", v, flagName, value, name)
		}
		out[name] = append(out[name], value)
	}
	return out, nil
}

func (c *listenersConfig) overrides() (listenerOverrides, error) {
	ov := listenerOverrides{cert: map[string]string{}, key: map[string]string{}, clientCA: map[string]string{}, clientAuth: map[string]string{}, plainUsers: map[string]string{}}
	for _, f := range []struct {
		flag, v string
		into    map[string]string
	}{{"listener-tls-cert", c.ListenerTLSCert, ov.cert}, {"listener-tls-key", c.ListenerTLSKey, ov.key}, {"listener-tls-client-ca", c.ListenerTLSClientCA, ov.clientCA},
		{"listener-sasl-plain-users-file", c.ListenerPlainUsers, ov.plainUsers}} {
		m, err := parseOverride(f.flag, f.v, false)
		if err != nil {
			return ov, err
		}
		for name, vs := range m {
			if _, err := os.Stat(vs[0]); err != nil {
				return ov, fmt.Errorf("invalid value %q for --%s: listener %s: %v", f.v, f.flag, name, err)
			}
			f.into[name] = vs[0]
		}
	}
	auth, err := parseOverride("listener-tls-client-auth", c.ListenerClientAuth, false)
	if err != nil {
		return ov, err
	}
	for name, vs := range auth {
		switch v := strings.ToLower(vs[0]); v {
		case "required", "requested", "none":
			ov.clientAuth[name] = v
		default:
			return ov, fmt.Errorf("invalid value %q for --listener-tls-client-auth: listener %s: %q is not required, requested or none", c.ListenerClientAuth, name, vs[0])
		}
	}
	if ov.mechanisms, err = parseOverride("listener-sasl-enabled-mechanisms", c.ListenerMechanisms, true); err != nil {
		return ov, err
	}
	ov.failureDelay, ov.maxReauth, ov.oauthSkew = map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}
	for _, f := range []struct {
		flag, v string
		into    map[string]time.Duration
		check   func(time.Duration) string // "" when the value is fine
	}{
		{"listener-connection-failed-authentication-delay", c.ListenerFailedAuthDelay, ov.failureDelay, checkFailedAuthDelay},
		{"listener-connections-max-reauth", c.ListenerMaxReauth, ov.maxReauth, checkMaxReauth},
		{"listener-sasl-oauthbearer-clock-skew", c.ListenerOAuthClockSkew, ov.oauthSkew, checkClockSkew},
	} {
		m, err := parseOverride(f.flag, f.v, false)
		if err != nil {
			return ov, err
		}
		for name, vs := range m {
			d, err := time.ParseDuration(vs[0])
			if err != nil {
				return ov, fmt.Errorf("invalid value %q for --%s: listener %s: %q is not a duration such as 500ms or 1h", f.v, f.flag, name, vs[0])
			}
			if why := f.check(d); why != "" {
				return ov, fmt.Errorf("invalid value %q for --%s: listener %s: %s %s", f.v, f.flag, name, d, why)
			}
			f.into[name] = d
		}
	}
	ov.oauthJWKS, ov.oauthIssuer, ov.oauthSub = map[string]string{}, map[string]string{}, map[string]string{}
	for _, f := range []struct {
		flag, v string
		into    map[string]string
	}{{"listener-sasl-oauthbearer-jwks-file", c.ListenerOAuthJWKSFile, ov.oauthJWKS}, {"listener-sasl-oauthbearer-expected-issuer", c.ListenerOAuthIssuer, ov.oauthIssuer},
		{"listener-sasl-oauthbearer-sub-claim-name", c.ListenerOAuthSubClaim, ov.oauthSub}} {
		m, err := parseOverride(f.flag, f.v, false)
		if err != nil {
			return ov, err
		}
		for name, vs := range m {
			f.into[name] = vs[0]
		}
	}
	for name, path := range ov.oauthJWKS {
		if _, err := loadKeySet(path); err != nil {
			return ov, fmt.Errorf("invalid value %q for --listener-sasl-oauthbearer-jwks-file: listener %s: %w", c.ListenerOAuthJWKSFile, name, err)
		}
	}
	ov.oauthAudience, err = parseOverride("listener-sasl-oauthbearer-expected-audience", c.ListenerOAuthAudience, true)
	if err != nil {
		return ov, err
	}
	instead, err := parseOverride("listener-client-certificate-instead-of-sasl", c.ListenerCertInsteadOfSASL, false)
	if err != nil {
		return ov, err
	}
	ov.certInsteadOfSASL = map[string]bool{}
	for name, vs := range instead {
		on, err := strconv.ParseBool(vs[0])
		if err != nil {
			return ov, fmt.Errorf("invalid value %q for --listener-client-certificate-instead-of-sasl: listener %s: %q is not true or false", c.ListenerCertInsteadOfSASL, name, vs[0])
		}
		ov.certInsteadOfSASL[name] = on
	}
	return ov, nil
}

// The bounds of the failure delay, the session lifetime and the clock
// skew, shared and per listener: why d is refused, "" when it is not.
func checkFailedAuthDelay(d time.Duration) string {
	if d < 0 || d > time.Minute {
		return "must be 0..1m"
	}
	return ""
}

func checkMaxReauth(d time.Duration) string {
	if d < 0 || (d > 0 && d < time.Second) {
		return "must be 0 or at least 1s"
	}
	return ""
}

func checkClockSkew(d time.Duration) string {
	if d < 0 {
		return "must not be negative"
	}
	return ""
}

// keys is the listener names m has settings for, as the name set unknown
// checks.
func keys[V any](m map[string]V) map[string]string {
	out := make(map[string]string, len(m))
	for name := range m {
		out[name] = ""
	}
	return out
}

// applyOverrides checks the per-listener flags against the listeners and
// settles each listener's certificate files and mechanisms: its own where
// given, else the shared flags', as Kafka falls back from
// listener.name.<name>.* to the unprefixed setting.
func (c *listenersConfig) applyOverrides(ov listenerOverrides, sec *securityConfig) error {
	var names []string
	for _, n := range c.named {
		names = append(names, n.name)
	}
	unknown := func(flag, v string, m map[string]string) error {
		for name := range m {
			if !slices.Contains(names, name) {
				return fmt.Errorf("invalid value %q for --%s: there is no listener %s (listeners: %s)", v, flag, name, strings.Join(names, ", "))
			}
		}
		return nil
	}
	mechNames := keys(ov.mechanisms)
	for _, f := range []struct {
		flag, v string
		m       map[string]string
	}{{"listener-tls-cert", c.ListenerTLSCert, ov.cert}, {"listener-tls-key", c.ListenerTLSKey, ov.key},
		{"listener-tls-client-ca", c.ListenerTLSClientCA, ov.clientCA}, {"listener-tls-client-auth", c.ListenerClientAuth, ov.clientAuth},
		{"listener-sasl-enabled-mechanisms", c.ListenerMechanisms, mechNames}, {"listener-sasl-plain-users-file", c.ListenerPlainUsers, ov.plainUsers}} {
		if err := unknown(f.flag, f.v, f.m); err != nil {
			return err
		}
	}
	// The SASL settings beyond mechanisms and users, by flag.
	saslOnly := []struct {
		flag, v string
		m       map[string]string
		oauth   bool // applies only where OAUTHBEARER is enabled
	}{
		{"listener-connection-failed-authentication-delay", c.ListenerFailedAuthDelay, keys(ov.failureDelay), false},
		{"listener-connections-max-reauth", c.ListenerMaxReauth, keys(ov.maxReauth), false},
		{"listener-sasl-oauthbearer-jwks-file", c.ListenerOAuthJWKSFile, ov.oauthJWKS, true},
		{"listener-sasl-oauthbearer-expected-issuer", c.ListenerOAuthIssuer, ov.oauthIssuer, true},
		{"listener-sasl-oauthbearer-expected-audience", c.ListenerOAuthAudience, keys(ov.oauthAudience), true},
		{"listener-sasl-oauthbearer-sub-claim-name", c.ListenerOAuthSubClaim, ov.oauthSub, true},
		{"listener-sasl-oauthbearer-clock-skew", c.ListenerOAuthClockSkew, keys(ov.oauthSkew), true},
	}
	for _, f := range saslOnly {
		if err := unknown(f.flag, f.v, f.m); err != nil {
			return err
		}
	}
	if err := unknown("listener-client-certificate-instead-of-sasl", c.ListenerCertInsteadOfSASL, keys(ov.certInsteadOfSASL)); err != nil {
		return err
	}
	for i := range c.named {
		n := &c.named[i]
		ssl, saslOn := strings.HasSuffix(n.protocol, "SSL"), strings.HasPrefix(n.protocol, "SASL")
		_, ownCert := ov.cert[n.name]
		_, ownKey := ov.key[n.name]
		_, ownCA := ov.clientCA[n.name]
		clientAuth, ownAuth := ov.clientAuth[n.name]
		ownMechs, hasOwnMechs := ov.mechanisms[n.name]
		if (ownCert || ownKey || ownCA || ownAuth) && !ssl {
			return fmt.Errorf("listener %s is %s: --listener-tls-cert, --listener-tls-key, --listener-tls-client-ca and --listener-tls-client-auth apply to SSL and SASL_SSL listeners only", n.name, n.protocol)
		}
		ownUsers, hasOwnUsers := ov.plainUsers[n.name]
		if (hasOwnMechs || hasOwnUsers) && !saslOn {
			return fmt.Errorf("listener %s is %s: --listener-sasl-enabled-mechanisms and --listener-sasl-plain-users-file apply to SASL_PLAINTEXT and SASL_SSL listeners only", n.name, n.protocol)
		}
		for _, f := range saslOnly {
			if _, ok := f.m[n.name]; ok && !saslOn {
				return fmt.Errorf("invalid value %q for --%s: listener %s is %s, and it applies to SASL_PLAINTEXT and SASL_SSL listeners only", f.v, f.flag, n.name, n.protocol)
			}
		}
		if _, ok := ov.certInsteadOfSASL[n.name]; ok && n.protocol != "SASL_SSL" {
			return fmt.Errorf("invalid value %q for --listener-client-certificate-instead-of-sasl: listener %s is %s, and it applies to SASL_SSL listeners only", c.ListenerCertInsteadOfSASL, n.name, n.protocol)
		}
		if ownCert != ownKey {
			return fmt.Errorf("listener %s: give both --listener-tls-cert and --listener-tls-key for it, or neither", n.name)
		}
		if ssl {
			n.tls = certs.Files{Cert: sec.KafkaTLSCert, Key: sec.KafkaTLSKey, ClientCA: sec.KafkaTLSClientCA}
			if ownCert {
				n.tls.Cert, n.tls.Key = ov.cert[n.name], ov.key[n.name]
			}
			if ownCA {
				n.tls.ClientCA = ov.clientCA[n.name]
			}
			if n.tls.Cert == "" {
				return fmt.Errorf("listener %s is %s: set --kafka-tls-cert and --kafka-tls-key, or --listener-tls-cert and --listener-tls-key for %s", n.name, n.protocol, n.name)
			}
			switch {
			case clientAuth == "none":
				n.tls.ClientCA = ""
			case ownAuth && n.tls.ClientCA == "":
				return fmt.Errorf("invalid value %q for --listener-tls-client-auth: listener %s has no client CA to check certificates with: set --listener-tls-client-ca for it or --kafka-tls-client-ca", c.ListenerClientAuth, n.name)
			}
			n.requested = clientAuth == "requested"
			if on, ok := ov.certInsteadOfSASL[n.name]; ok && saslOn {
				if on && n.tls.ClientCA == "" {
					return fmt.Errorf("invalid value %q for --listener-client-certificate-instead-of-sasl: listener %s has no client CA to verify certificates with: set --listener-tls-client-ca for it or --kafka-tls-client-ca", c.ListenerCertInsteadOfSASL, n.name)
				}
				n.certInsteadOfSASL = &on
			}
			n.ownTLS = n.tls != certs.Files{Cert: sec.KafkaTLSCert, Key: sec.KafkaTLSKey, ClientCA: sec.KafkaTLSClientCA}
		}
		if saslOn {
			n.mechanisms, n.plainUsers = sec.mechanisms(), ownUsers
			if hasOwnMechs {
				_, ownJWKS := ov.oauthJWKS[n.name]
				if err := sec.checkMechanisms("listener-sasl-enabled-mechanisms", c.ListenerMechanisms, ownMechs, hasOwnUsers, ownJWKS); err != nil {
					return err
				}
				n.mechanisms = ownMechs
			}
			if len(n.mechanisms) == 0 {
				return fmt.Errorf("listener %s is %s: set --sasl-enabled-mechanisms, or --listener-sasl-enabled-mechanisms for %s", n.name, n.protocol, n.name)
			}
			if _, ownJWKS := ov.oauthJWKS[n.name]; !hasOwnMechs && !ownJWKS && sec.OAuthJWKSFile == "" && slices.Contains(n.mechanisms, "OAUTHBEARER") {
				return fmt.Errorf("invalid value for --sasl-enabled-mechanisms: OAUTHBEARER on listener %s needs --sasl-oauthbearer-jwks-file or --listener-sasl-oauthbearer-jwks-file for %s", n.name, n.name)
			}
			if hasOwnUsers && !slices.Contains(n.mechanisms, "PLAIN") {
				return fmt.Errorf("invalid value %q for --listener-sasl-plain-users-file: listener %s does not enable PLAIN", c.ListenerPlainUsers, n.name)
			}
			if hasOwnUsers {
				if _, err := loadPlainUsers(ownUsers); err != nil {
					return fmt.Errorf("invalid value for --listener-sasl-plain-users-file: listener %s: %w", n.name, err)
				}
			}
			for _, f := range saslOnly {
				if _, ok := f.m[n.name]; ok && f.oauth && !slices.Contains(n.mechanisms, "OAUTHBEARER") {
					return fmt.Errorf("invalid value %q for --%s: listener %s does not enable OAUTHBEARER", f.v, f.flag, n.name)
				}
			}
			if d, ok := ov.failureDelay[n.name]; ok {
				n.failureDelay = &d
			}
			if d, ok := ov.maxReauth[n.name]; ok {
				n.maxReauth = &d
			}
			n.oauthJWKS = ov.oauthJWKS[n.name]
			n.oauthRules = sec.listenerTokenRules(ov, n.name)
		}
	}
	return nil
}

// allMechanisms is every mechanism some listener enables, its own or
// the shared ones.
func (c *listenersConfig) allMechanisms() []string {
	out := []string{}
	for _, n := range c.named {
		for _, m := range n.mechanisms {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// ownTLS reports whether some listener has its own certificate files.
func (c *listenersConfig) ownTLS() bool {
	return slices.ContainsFunc(c.named, func(n namedListener) bool { return n.ownTLS })
}

// advertised is every named listener's advertised address; nil when
// there is only --kafka-addr's, unnamed.
func (c *listenersConfig) advertised() map[string]string {
	if c.named == nil {
		return nil
	}
	out := map[string]string{}
	for _, n := range c.named {
		out[n.name] = n.advertised
	}
	return out
}

// certificateRequested asks clients for a certificate without requiring
// one (Kafka's ssl.client.auth=requested): one given must verify, and
// authenticates the connection; without one the client may use SASL.
func certificateRequested(tc *tls.Config) *tls.Config {
	perHello := tc.GetConfigForClient
	tc.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		cfg, err := perHello(h)
		if cfg != nil && cfg.ClientAuth == tls.RequireAndVerifyClientCert {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
		return cfg, err
	}
	return tc
}

// gatewayListeners is the gateway's listeners and the certificate
// reloaders of those with their own files (one per set of files); nil when
// there is only --kafka-addr's, unnamed (the gateway then follows its TLS
// and SASL). shared is --kafka-tls-*'s reloader (nil without them).
func (c *listenersConfig) gatewayListeners(shared *certs.Reloader, log *slog.Logger) ([]gateway.Listener, []*certs.Reloader, error) {
	var out []gateway.Listener
	var reloaders []*certs.Reloader
	byFiles := map[certs.Files]*certs.Reloader{}
	for _, n := range c.named {
		l := gateway.Listener{Name: n.name, Addr: n.bind, SASL: strings.HasPrefix(n.protocol, "SASL")}
		if strings.HasSuffix(n.protocol, "SSL") {
			rl := shared
			if n.ownTLS {
				if rl = byFiles[n.tls]; rl == nil {
					var err error
					// The listener's name in its reload messages tells
					// which certificate was renewed.
					if rl, err = certs.NewReloader(n.tls, log.With("listener", n.name)); err != nil {
						return nil, nil, fmt.Errorf("listener %s: %w", n.name, err)
					}
					byFiles[n.tls] = rl
					reloaders = append(reloaders, rl)
				}
			}
			l.TLS = rl.ServerConfig()
			if n.requested {
				l.TLS = certificateRequested(l.TLS)
			}
		}
		if l.SASL {
			l.Mechanisms = n.mechanisms
			if n.plainUsers != "" {
				users, err := loadPlainUsers(n.plainUsers)
				if err != nil {
					return nil, nil, fmt.Errorf("listener %s: %w", n.name, err)
				}
				l.PlainUsers = func(u string) (string, bool) { p, ok := users[u]; return p, ok }
			}
			l.FailureDelay, l.SessionLifetime, l.OAuthRules = n.failureDelay, n.maxReauth, n.oauthRules
			l.CertificateInsteadOfSASL = n.certInsteadOfSASL
			if n.oauthJWKS != "" {
				l.OAuthKeys = keySetFile(n.oauthJWKS, log.With("listener", n.name))
			}
			if l.TLS == nil && slices.Contains(n.mechanisms, "PLAIN") {
				log.Warn("SASL PLAIN on a SASL_PLAINTEXT listener: passwords cross the network in clear", "listener", n.name)
			}
		}
		out = append(out, l)
	}
	return out, reloaders, nil
}
