package gateway

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// tlsListener accepts TLS connections whose records are gathered below the
// TLS layer (recordBatcher) and sent once per answer, not once per record.
type tlsListener struct {
	net.Listener
	config *tls.Config
	bufs   *sync.Pool // the batchers' buffers (Server.batchBufs)
}

func (l tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&recordBatcher{Conn: nc, bufs: l.bufs}, l.config), nil
}

// recordBatcher sits between a TLS connection and its socket. crypto/tls
// writes every record (at most 16 KiB of payload) with its own system call,
// so a 1 MiB fetch answer would take 64; the batcher keeps the records until
// the connection's writer flushes after its answer, or until batchLimit is
// buffered. Until the handshake is done every Read sends what is buffered
// first, so the handshake's flights are never held back. The buffer is
// taken from bufs (when set) for an answer and given back at each flush:
// a connection that once read a large fetch and now idles, as most group
// members' do, holds none (crypto/tls keeps its own 16 KiB record buffer).
type recordBatcher struct {
	net.Conn
	handshook atomic.Bool
	bufs      *sync.Pool // of *[]byte; nil: a buffer of its own each time

	mu   sync.Mutex
	buf  []byte
	held *[]byte // buf's pool entry, while buf is held
}

const batchLimit = 256 << 10

func (b *recordBatcher) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil && b.bufs != nil {
		if b.held, _ = b.bufs.Get().(*[]byte); b.held == nil {
			b.held = new([]byte)
		}
		b.buf = (*b.held)[:0]
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= batchLimit {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (b *recordBatcher) Read(p []byte) (int, error) {
	if !b.handshook.Load() {
		if err := b.Flush(); err != nil {
			return 0, err
		}
	}
	return b.Conn.Read(p)
}

// Flush sends what is buffered.
func (b *recordBatcher) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *recordBatcher) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	if b.held != nil && cap(b.buf) <= 2*batchLimit {
		*b.held = b.buf[:0]
		b.bufs.Put(b.held)
	}
	b.buf, b.held = nil, nil
	return err
}

// Close sends what is buffered (the TLS close_notify alert, usually) if no
// write is in progress, waiting at most a second for a peer that does not
// read, then closes the socket.
func (b *recordBatcher) Close() error {
	if b.mu.TryLock() {
		if len(b.buf) > 0 {
			b.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			b.flushLocked()
		}
		b.mu.Unlock()
	}
	return b.Conn.Close()
}

// flushTLS sends the records a TLS connection's batcher holds; a no-op for
// other connections.
func flushTLS(nc net.Conn) error {
	if tc, ok := nc.(*tls.Conn); ok {
		if b, ok := tc.NetConn().(*recordBatcher); ok {
			return b.Flush()
		}
	}
	return nil
}
