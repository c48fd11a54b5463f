package gateway

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/sasl"
)

// Listener is one Kafka listener, as Kafka's listeners: several may run
// side by side (plaintext on loopback for local tools, SASL_SSL for the
// rest), each with its own advertised address on every node. A client
// learns the addresses of the listener it came in on: Metadata,
// FindCoordinator, DescribeCluster and the leader hints of Produce and
// Fetch name every node by its address on that listener.
type Listener struct {
	// Name is the listener's name (Kafka's listener name, such as
	// INTERNAL); "" for a node's only, unnamed listener.
	Name string
	Addr string      // listen address
	TLS  *tls.Config // nil: plaintext
	// SASL: clients must authenticate, with Config.SASL's mechanisms.
	SASL bool
	// Mechanisms, when set, replace Config.SASL's on this listener
	// (Kafka's listener.name.<name>.sasl.enabled.mechanisms).
	Mechanisms []string
	// PlainUsers, when set, replaces Config.SASL's PLAIN users on this
	// listener (Kafka's listener.name.<name>.plain.sasl.jaas.config).
	PlainUsers func(user string) (password string, ok bool)
	// FailureDelay and SessionLifetime, when set, replace Config.SASL's
	// on this listener (Kafka's listener.name.<name>.connections.max.reauth.ms;
	// Kafka's failure delay is broker-wide only).
	FailureDelay    *time.Duration
	SessionLifetime *time.Duration
	// OAuthKeys and OAuthRules, when set, replace Config.SASL's on this
	// listener (Kafka's listener.name.<name>.oauthbearer.sasl.*): its
	// OAUTHBEARER tokens come from its own identity provider.
	OAuthKeys  func() (*sasl.KeySet, error)
	OAuthRules *sasl.TokenRules
	// CertificateInsteadOfSASL, when set, replaces Config.SASL's on this
	// listener: whether a verified client certificate authenticates a
	// connection without SASL.
	CertificateInsteadOfSASL *bool
}

type boundListener struct {
	*Listener
	ln net.Listener
}

// localizeEndpoints rewrites the node addresses of a response for a client
// of the named listener: handlers answer with each node's KafkaAddr, and a
// node without that listener is left out, as Kafka leaves out brokers
// without the client's listener (partitions it leads answer
// LISTENER_NOT_FOUND, a coordinator on it COORDINATOR_NOT_AVAILABLE).
func (s *Server) localizeEndpoints(resp kmsg.Response, listener string) {
	addr := func(id int32) (string, int32, bool) {
		n, ok := s.node(id)
		if !ok {
			return "", 0, false
		}
		a, ok := n.ListenerAddr(listener)
		if !ok {
			return "", 0, false
		}
		n.KafkaAddr = a
		host, port := brokerAddr(n)
		return host, port, true
	}
	// endpoint relocates one broker entry, reporting whether to keep it.
	endpoint := func(id int32, host *string, port *int32) bool {
		h, p, ok := addr(id)
		*host, *port = h, p
		return ok
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		listed := map[int32]bool{}
		r.Brokers = keepBrokers(r.Brokers, func(b *kmsg.MetadataResponseBroker) bool {
			listed[b.NodeID] = endpoint(b.NodeID, &b.Host, &b.Port)
			return listed[b.NodeID]
		})
		for ti := range r.Topics {
			for pi := range r.Topics[ti].Partitions {
				p := &r.Topics[ti].Partitions[pi]
				if p.ErrorCode == 0 && p.Leader >= 0 && !listed[p.Leader] {
					p.ErrorCode = kerr.ListenerNotFound.Code
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		coordinator := func(code *int16, id *int32, host *string, port *int32) {
			if *code == 0 && !endpoint(*id, host, port) {
				*code, *id, *host, *port = kerr.CoordinatorNotAvailable.Code, -1, "", -1
			}
		}
		if r.Version < 4 {
			coordinator(&r.ErrorCode, &r.NodeID, &r.Host, &r.Port)
			return
		}
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			coordinator(&c.ErrorCode, &c.NodeID, &c.Host, &c.Port)
		}
	case *kmsg.DescribeClusterResponse:
		r.Brokers = keepBrokers(r.Brokers, func(b *kmsg.DescribeClusterResponseBroker) bool { return endpoint(b.NodeID, &b.Host, &b.Port) })
	case *kmsg.ProduceResponse:
		r.Brokers = keepBrokers(r.Brokers, func(b *kmsg.ProduceResponseBroker) bool { return endpoint(b.NodeID, &b.Host, &b.Port) })
	case *kmsg.FetchResponse:
		r.Brokers = keepBrokers(r.Brokers, func(b *kmsg.FetchResponseBroker) bool { return endpoint(b.NodeID, &b.Host, &b.Port) })
	}
}

// keepBrokers keeps, in place, the entries keep (which may edit them) says to.
func keepBrokers[T any](bs []T, keep func(*T) bool) []T {
	kept := bs[:0]
	for i := range bs {
		if keep(&bs[i]) {
			kept = append(kept, bs[i])
		}
	}
	return kept
}
