package gateway

import (
	"crypto/tls"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		kept := r.Brokers[:0]
		listed := map[int32]bool{}
		for _, b := range r.Brokers {
			if host, port, ok := addr(b.NodeID); ok {
				b.Host, b.Port = host, port
				kept = append(kept, b)
				listed[b.NodeID] = true
			}
		}
		r.Brokers = kept
		for ti := range r.Topics {
			for pi := range r.Topics[ti].Partitions {
				p := &r.Topics[ti].Partitions[pi]
				if p.ErrorCode == 0 && p.Leader >= 0 && !listed[p.Leader] {
					p.ErrorCode = kerr.ListenerNotFound.Code
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 {
			if r.ErrorCode == 0 {
				if host, port, ok := addr(r.NodeID); ok {
					r.Host, r.Port = host, port
				} else {
					r.ErrorCode, r.NodeID, r.Host, r.Port = kerr.CoordinatorNotAvailable.Code, -1, "", -1
				}
			}
			return
		}
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			if c.ErrorCode != 0 {
				continue
			}
			if host, port, ok := addr(c.NodeID); ok {
				c.Host, c.Port = host, port
			} else {
				c.ErrorCode, c.NodeID, c.Host, c.Port = kerr.CoordinatorNotAvailable.Code, -1, "", -1
			}
		}
	case *kmsg.DescribeClusterResponse:
		kept := r.Brokers[:0]
		for _, b := range r.Brokers {
			if host, port, ok := addr(b.NodeID); ok {
				b.Host, b.Port = host, port
				kept = append(kept, b)
			}
		}
		r.Brokers = kept
	case *kmsg.ProduceResponse:
		kept := r.Brokers[:0]
		for _, b := range r.Brokers {
			if host, port, ok := addr(b.NodeID); ok {
				b.Host, b.Port = host, port
				kept = append(kept, b)
			}
		}
		r.Brokers = kept
	case *kmsg.FetchResponse:
		kept := r.Brokers[:0]
		for _, b := range r.Brokers {
			if host, port, ok := addr(b.NodeID); ok {
				b.Host, b.Port = host, port
				kept = append(kept, b)
			}
		}
		r.Brokers = kept
	}
}
