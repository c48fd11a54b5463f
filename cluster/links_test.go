package cluster

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestInboundRaftConnsBounded: connections that open as Raft's (an RPC type
// byte) and stall are held only up to maxInboundRaftConns at once, each with
// Raft's 256 KiB read buffer; more are closed at once, and a place freed by
// a closed one is taken again.
func TestInboundRaftConnsBounded(t *testing.T) {
	trans, _, err := tcpTransport("127.0.0.1:0", nil, hclog.NewNullLogger(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	addr := trans.LocalAddr()
	dial := func() net.Conn {
		t.Helper()
		nc, err := net.DialTimeout("tcp", string(addr), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write([]byte{0}); err != nil { // AppendEntries, then nothing
			t.Fatal(err)
		}
		return nc
	}
	// closed reports whether the node closed nc within wait.
	closed := func(nc net.Conn, wait time.Duration) bool {
		nc.SetReadDeadline(time.Now().Add(wait))
		_, err := nc.Read(make([]byte, 1))
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	const extra = 8
	for range maxInboundRaftConns + extra {
		conns = append(conns, dial())
	}
	// Which ones are refused depends on the order they are classified in.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn
	refused := 0
	for _, nc := range conns {
		wg.Go(func() {
			c := closed(nc, 3*time.Second)
			mu.Lock()
			defer mu.Unlock()
			if c {
				refused++
			} else {
				held = append(held, nc)
			}
		})
	}
	wg.Wait()
	if refused != extra {
		t.Fatalf("%d of %d stalled Raft connections closed, want %d (the bound is %d)",
			refused, len(conns), extra, maxInboundRaftConns)
	}
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc := dial()
		if !closed(nc, 200*time.Millisecond) {
			nc.Close()
			break
		}
		nc.Close()
		if time.Now().After(deadline) {
			t.Fatal("no Raft connection taken after one of the held ones closed")
		}
	}
}
