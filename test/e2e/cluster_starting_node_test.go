package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A node that is starting refuses Kafka connections until it can serve, as
// a Kafka broker's port refuses until the broker serves (a 4.3 broker
// refused for the 39 s of its start, then answered at once). A client
// whose broker list sends it to a node restarting after a crash then moves
// on to another node at once; a port that accepted would hold it, its
// requests unanswered, until the node was ready (4.1 s in the campaign's
// replay where a franz-go member read nothing until the killed leader was
// back). Its admin API serves meanwhile: /healthz answers and /readyz says
// 503 (both waited, unanswered, for the node to be ready before).
func TestClusterStartingNodeRefusesClientsUntilReady(t *testing.T) {
	c := startCluster(t)
	c.stopAll()

	// Alone, node 1 has no quorum: it cannot become ready.
	n := c.node(1)
	n.start()
	step(t, "node 1's admin API answers while it waits for a quorum", 30*time.Second, func(ctx context.Context) error {
		return retry(ctx, 100*time.Millisecond, func() error {
			resp, err := c.http.Get("http://" + n.addrs["admin-addr"] + "/healthz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
	})
	resp, err := c.http.Get("http://" + n.addrs["admin-addr"] + "/readyz")
	var nc net.Conn
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("node 1 without a quorum: /readyz %s, want 503", resp.Status)
	}
	nc, err = net.DialTimeout("tcp", n.kafka(), 5*time.Second)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, aerr := apiVersions(ctx, nc)
		cancel()
		nc.Close()
		t.Fatalf("node 1 accepted a Kafka connection before it was ready (ApiVersions: %v); want it refused", aerr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialling node 1 before it was ready: %v; want connection refused", err)
	}
	t.Logf("before it was ready: %v", err)

	// With node 2 the quorum is back: node 1 serves.
	c.node(2).start()
	step(t, "node 1 answers ApiVersions once ready", time.Minute, func(ctx context.Context) error {
		return retry(ctx, 100*time.Millisecond, func() error {
			if err := c.ready(ctx, n); err != nil {
				return err
			}
			nc, err := net.DialTimeout("tcp", n.kafka(), 5*time.Second)
			if err != nil {
				return fmt.Errorf("ready, but the Kafka port: %w", err)
			}
			defer nc.Close()
			resp, err := apiVersions(ctx, nc)
			if err != nil {
				return err
			}
			if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
				return fmt.Errorf("ApiVersions answered error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
			}
			return nil
		})
	})
}

// retry calls fn every interval until it succeeds or ctx ends (then with
// fn's last error).
func retry(ctx context.Context, every time.Duration, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(every):
		}
	}
}

// apiVersions sends ApiVersions v2 on nc and reads the answer (until ctx's
// deadline). v2: floodConn reads a flexible answer's header tags, which an
// ApiVersions answer never has.
func apiVersions(ctx context.Context, nc net.Conn) (*kmsg.ApiVersionsResponse, error) {
	fc := &floodConn{nc: nc, br: bufio.NewReader(nc)}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 2
	resp, err := fc.do(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ApiVersionsResponse), nil
}
