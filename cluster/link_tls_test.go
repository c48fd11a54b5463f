package cluster

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
)

// TestCertNodeID: a certificate names a node by its common name or a DNS
// name, node-<id> or kgate-<id>; one naming none or two nodes names none.
func TestCertNodeID(t *testing.T) {
	for _, tc := range []struct {
		cn   string
		dns  []string
		want int32
		ok   bool
	}{
		{"node-3", nil, 3, true},
		{"kgate-12", []string{"localhost"}, 12, true},
		{"broker.example.com", []string{"node-7", "broker.example.com"}, 7, true},
		{"node-2", []string{"node-2"}, 2, true},
		{"node-2", []string{"node-3"}, -1, false},
		{"client", []string{"localhost"}, -1, false},
		{"node-", nil, -1, false},
		{"node-1x", nil, -1, false},
		{"xnode-1", nil, -1, false},
	} {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: tc.cn}, DNSNames: tc.dns}
		got, ok := certNodeID(c)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("CN %q DNS %v: got %d, %v; want %d, %v", tc.cn, tc.dns, got, ok, tc.want, tc.ok)
		}
	}
}
