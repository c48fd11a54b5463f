package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"
)

// LinkTLS secures the Raft port, which carries Raft and the Kafka requests
// nodes forward to the leader, with mutual TLS: every node presents a
// certificate from the cluster's CA that names it (node-<id> or kgate-<id>,
// as the subject common name or a DNS name), and a node dialling another
// checks that the certificate it gets names the node it meant. Without it,
// whoever reaches the port could speak Raft or send forwarded requests that
// skip client authentication.
type LinkTLS struct {
	// Server configures the listener; it must require and verify client
	// certificates against the cluster's CA.
	Server *tls.Config
	// Client returns the configuration for dialling another node: this
	// node's certificate and the cluster's CA as roots.
	Client func() *tls.Config
}

// nodeNamePattern is how a certificate names a node.
var nodeNamePattern = regexp.MustCompile(`^(?:node|kgate)-([0-9]{1,9})$`)

// certNodeID is the node a certificate names; ok is false when it names
// none, or several.
func certNodeID(c *x509.Certificate) (int32, bool) {
	id, found := int32(-1), false
	for _, name := range append([]string{c.Subject.CommonName}, c.DNSNames...) {
		m := nodeNamePattern.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || found && int32(v) != id {
			return -1, false
		}
		id, found = int32(v), true
	}
	return id, found
}

// peerNode is the node the verified peer certificate of cs names.
func peerNode(cs tls.ConnectionState) (int32, error) {
	if len(cs.PeerCertificates) == 0 {
		return -1, errors.New("no peer certificate")
	}
	id, ok := certNodeID(cs.PeerCertificates[0])
	if !ok {
		return -1, fmt.Errorf("certificate %q names no kgate node (want node-<id> or kgate-<id>)", cs.PeerCertificates[0].Subject.CommonName)
	}
	return id, nil
}

// acceptTLS runs the server handshake of an inbound link connection and
// checks that the client is a node of the cluster.
func (lt *LinkTLS) acceptTLS(nc net.Conn, timeout time.Duration) (net.Conn, error) {
	tc := tls.Server(nc, lt.Server)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	if _, err := peerNode(tc.ConnectionState()); err != nil {
		return nil, err
	}
	return tc, nil
}

// dialTLS opens a link connection to the node want (-1: any node of the
// cluster, when the address is not yet known to belong to one).
func (lt *LinkTLS) dialTLS(ctx context.Context, addr string, want int32) (net.Conn, error) {
	cfg := lt.Client().Clone()
	roots := cfg.RootCAs
	// The chain is checked against the cluster's CA below, and the identity
	// by node name rather than host name: a node's certificate names the
	// node, whatever address it is reached at.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("no server certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return err
		}
		id, err := peerNode(cs)
		if err != nil {
			return err
		}
		if want >= 0 && id != want {
			return fmt.Errorf("%s presented the certificate of node %d, not of node %d", addr, id, want)
		}
		return nil
	}
	d := tls.Dialer{Config: cfg}
	return d.DialContext(ctx, "tcp", addr)
}

// nodeAt is the id of the node gossip knows at Raft address addr, or -1.
func (n *Node) nodeAt(addr string) int32 {
	g := n.linkNames.Load()
	if g == nil {
		return -1
	}
	for _, m := range g.snapshot() {
		if m.meta.RaftAddr == addr {
			return m.meta.ID
		}
	}
	return -1
}
