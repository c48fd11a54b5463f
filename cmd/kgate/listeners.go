package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kgate/kgate/gateway"
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

	// Set by validate: every listener, --kafka-addr's first; nil when
	// there is only that one, unnamed.
	named []namedListener
}

type namedListener struct {
	name, bind, advertised, protocol string
}

func addListenerFlags(fs *flag.FlagSet, c *listenersConfig) {
	fs.StringVar(&c.KafkaListenerName, "kafka-listener-name", "", "name of the --kafka-addr listener (default with --listeners: its security protocol, e.g. SASL_SSL)")
	fs.StringVar(&c.Listeners, "listeners", "", "more Kafka listeners, NAME://host:port comma-separated (Kafka's listeners), beside --kafka-addr's")
	fs.StringVar(&c.AdvertisedListeners, "advertised-listeners", "", "addresses clients of each --listeners listener are given, NAME://host:port comma-separated (default: its listen address)")
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
	if c.Listeners == "" && c.KafkaListenerName == "" {
		if c.AdvertisedListeners != "" || c.ProtocolMap != "" {
			return fmt.Errorf("invalid value for --advertised-listeners/--listener-security-protocol-map: no --listeners or --kafka-listener-name")
		}
		return nil
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
	// --kafka-addr's listener: named, or by the protocol its flags give.
	derived := "PLAINTEXT"
	switch tlsOn, saslOn := sec.KafkaTLSCert != "", len(sec.mechanisms()) > 0; {
	case tlsOn && saslOn:
		derived = "SASL_SSL"
	case tlsOn:
		derived = "SSL"
	case saslOn:
		derived = "SASL_PLAINTEXT"
	}
	first := strings.ToUpper(c.KafkaListenerName)
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
	for _, n := range c.named {
		if strings.HasSuffix(n.protocol, "SSL") && sec.KafkaTLSCert == "" {
			return fmt.Errorf("listener %s is %s: set --kafka-tls-cert and --kafka-tls-key", n.name, n.protocol)
		}
		if strings.HasPrefix(n.protocol, "SASL") && len(sec.mechanisms()) == 0 {
			return fmt.Errorf("listener %s is %s: set --sasl-enabled-mechanisms", n.name, n.protocol)
		}
	}
	return nil
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

// gatewayListeners is the gateway's listeners; nil when there is only
// --kafka-addr's, unnamed (the gateway then follows its TLS and SASL).
func (c *listenersConfig) gatewayListeners(serverTLS *tls.Config) []gateway.Listener {
	var out []gateway.Listener
	for _, n := range c.named {
		l := gateway.Listener{Name: n.name, Addr: n.bind, SASL: strings.HasPrefix(n.protocol, "SASL")}
		if strings.HasSuffix(n.protocol, "SSL") {
			l.TLS = serverTLS
		}
		out = append(out, l)
	}
	return out
}
