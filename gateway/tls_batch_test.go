package gateway

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/certs"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes++
	return c.Conn.Write(p)
}

// tlsPair is a handshaken TLS connection over loopback TCP whose server
// side writes through a recordBatcher over a countingConn.
func tlsPair(t *testing.T) (server *tls.Conn, batcher *recordBatcher, counter *countingConn, client *tls.Conn) {
	t.Helper()
	ca, err := certs.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issued, err := ca.Issue("node-1", []string{"node-1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- nc
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client = tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "node-1"})
	nc := <-accepted
	counter = &countingConn{Conn: nc}
	batcher = &recordBatcher{Conn: counter}
	server = tls.Server(batcher, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	t.Cleanup(func() { client.Close(); server.Close() })

	done := make(chan error, 1)
	go func() { done <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatalf("client handshake through the batcher: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	batcher.handshook.Store(true)
	return server, batcher, counter, client
}

func TestRecordBatcherSendsAnAnswerInFewWrites(t *testing.T) {
	server, batcher, counter, client := tlsPair(t)
	answer := bytes.Repeat([]byte("kgate-record-"), 1<<20/13) // ~1 MiB: 64 TLS records
	counter.writes = 0

	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(answer))
		if _, err := io.ReadFull(client, b); err != nil {
			got <- nil
			return
		}
		got <- b
	}()
	if _, err := server.Write(answer); err != nil {
		t.Fatal(err)
	}
	if err := flushTLS(server); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, answer) {
		t.Fatal("the client did not read the answer back intact")
	}
	// 1 MiB in 256 KiB batches: 4 or 5 writes, where crypto/tls alone
	// makes one per 16 KiB record (64).
	if counter.writes > len(answer)/batchLimit+1 {
		t.Errorf("a 1 MiB answer took %d socket writes; want at most %d", counter.writes, len(answer)/batchLimit+1)
	}
	if len(batcher.buf) != 0 {
		t.Errorf("%d bytes left in the batcher after a flush", len(batcher.buf))
	}
}

func TestRecordBatcherHoldsSmallWritesUntilFlush(t *testing.T) {
	server, _, counter, client := tlsPair(t)
	counter.writes = 0
	if _, err := server.Write([]byte("small answer")); err != nil {
		t.Fatal(err)
	}
	if counter.writes != 0 {
		t.Fatalf("a small write reached the socket before the flush (%d writes)", counter.writes)
	}
	if err := flushTLS(server); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, len("small answer"))
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(client, b); err != nil || string(b) != "small answer" {
		t.Fatalf("read %q, %v after the flush", b, err)
	}
}

func TestRecordBatcherCloseSendsWhatIsBuffered(t *testing.T) {
	server, _, _, client := tlsPair(t)
	if _, err := server.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(client)
	if string(b) != "last words" || err != nil {
		t.Fatalf("client read %q, %v after the server wrote and closed; want the words and a clean end", b, err)
	}
}

// TestRecordBatcherIdleHoldsNoBuffer: after an answer is flushed the
// batcher holds no buffer (it went back to the pool), and each next
// answer takes one again and reaches the client intact.
func TestRecordBatcherIdleHoldsNoBuffer(t *testing.T) {
	server, batcher, _, client := tlsPair(t)
	var pool sync.Pool
	batcher.bufs = &pool
	answer := bytes.Repeat([]byte("x"), 100<<10)
	got := make(chan error, 1)
	go func() {
		b := make([]byte, len(answer))
		for range 3 {
			if _, err := io.ReadFull(client, b); err != nil || !bytes.Equal(b, answer) {
				got <- fmt.Errorf("client read %d bytes, %v", len(b), err)
				return
			}
		}
		got <- nil
	}()
	for i := range 3 {
		if _, err := server.Write(answer); err != nil {
			t.Fatal(err)
		}
		batcher.mu.Lock()
		held := cap(batcher.buf)
		batcher.mu.Unlock()
		if held < len(answer) {
			t.Fatalf("answer %d: the batcher holds %d bytes before its flush, want the answer's records", i, held)
		}
		if err := flushTLS(server); err != nil {
			t.Fatal(err)
		}
		batcher.mu.Lock()
		held = cap(batcher.buf)
		batcher.mu.Unlock()
		if held != 0 {
			t.Fatalf("answer %d: an idle batcher holds a %d-byte buffer", i, held)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
