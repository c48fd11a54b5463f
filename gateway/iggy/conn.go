package iggy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Options configure connections to one Iggy server.
type Options struct {
	Addr string // host:port
	// Dialect is Current, Legacy, or 0 to detect it at connect time (§0.1).
	Dialect Dialect
	// Username/Password log in; Token (a personal access token) is used
	// instead when set.
	Username, Password string
	Token              string
	// TLS, when set, wraps every connection (ServerName defaults to the
	// host of Addr).
	TLS *tls.Config
	// DialTimeout bounds connect + probe + login; default 5 s.
	DialTimeout time.Duration
	// RequestTimeout bounds a request whose context has no deadline;
	// default 30 s (the SDKs' read timeout).
	RequestTimeout time.Duration
	// SDKName/SDKVersion are sent at login; default "kgate" / "0.1.0".
	SDKName, SDKVersion string
}

func (o *Options) defaults() {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.SDKName == "" {
		o.SDKName = "kgate"
	}
	if o.SDKVersion == "" {
		o.SDKVersion = "0.1.0"
	}
}

// ErrConnClosed reports a request on a connection that failed or was
// closed; the pool replaces such connections.
var ErrConnClosed = errors.New("iggy: connection closed")

// ErrNoProbeReply reports a server that answered neither dialect's probe.
var ErrNoProbeReply = errors.New("iggy: no reply to the dialect probe")

// transientRetryDelay is how long to wait before resending a frame that
// got TransientNotCommitted / TransientNotAccepted (§3).
const transientRetryDelay = 50 * time.Millisecond

// Conn is one logged-in connection. It carries one request at a time
// (lockstep, §1); callers serialise, the pool does it for them.
type Conn struct {
	nc      net.Conn
	br      *bufio.Reader
	dialect Dialect
	timeout time.Duration
	client  [16]byte
	session uint64
	reqID   uint64 // last replicated request id (§2)
	user    LoginReply

	mu     sync.Mutex
	broken error
}

// Dial connects, detects the dialect when opts.Dialect is 0, and logs in.
func Dial(ctx context.Context, opts Options) (*Conn, error) {
	opts.defaults()
	ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	d := opts.Dialect
	if d == 0 {
		c, found, err := probe(ctx, opts)
		if err != nil {
			return nil, err
		}
		if c != nil {
			if err := c.login(ctx, opts); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}
		d = found
	}
	c, err := connect(ctx, opts, d)
	if err != nil {
		return nil, err
	}
	if err := c.login(ctx, opts); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func connect(ctx context.Context, opts Options, d Dialect) (*Conn, error) {
	var dialer net.Dialer
	nc, err := dialer.DialContext(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("iggy: connect %s: %w", opts.Addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if opts.TLS != nil {
		cfg := opts.TLS.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(opts.Addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("iggy: TLS handshake with %s: %w", opts.Addr, err)
		}
		nc = tc
	}
	c := &Conn{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), dialect: d, timeout: opts.RequestTimeout}
	if _, err := rand.Read(c.client[:]); err != nil {
		nc.Close()
		return nil, err
	}
	c.client[0] |= 1 // never zero
	return c, nil
}

// legacyBusy is what a legacy 0.8 server answers to each 8-byte chunk of a
// current-dialect frame (§0.1).
var legacyBusy = []byte{3, 0, 0, 0, 0, 0, 0, 0}

// probe sends a current-dialect Ping (§0.1). A current server answers it
// and the connection is kept; a legacy server answers status 3 or closes,
// and the connection is dropped (a 0.8 server is stuck mid-frame).
func probe(ctx context.Context, opts Options) (*Conn, Dialect, error) {
	c, err := connect(ctx, opts, Current)
	if err != nil {
		return nil, 0, err
	}
	c.reqID = 0
	frame, err := Ping().Frame(Current, RequestHeader{Client: c.client, Request: 1})
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	stop := c.deadline(ctx)
	defer stop()
	if _, err := c.nc.Write(frame); err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("iggy: dialect probe: %w", err)
	}
	first := make([]byte, LegacyHeaderSize)
	n, err := io.ReadFull(c.br, first)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		c.Close() // a 0.7 server closes on code 0
		return nil, Legacy, nil
	case err != nil:
		c.Close()
		if isTimeout(err) {
			return nil, 0, fmt.Errorf("%w from %s: %v", ErrNoProbeReply, opts.Addr, err)
		}
		return nil, 0, fmt.Errorf("iggy: dialect probe: %w", err)
	case bytes.Equal(first, legacyBusy):
		c.Close()
		return nil, Legacy, nil
	}
	rest := make([]byte, HeaderSize-LegacyHeaderSize)
	if _, err := io.ReadFull(c.br, rest); err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("iggy: dialect probe: %w", err)
	}
	r, n2, err := DecodeReplyHeader(Current, append(first, rest...))
	if err == nil && n2 > 0 {
		_, err = c.br.Discard(n2)
	}
	if err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("iggy: dialect probe: %w", err)
	}
	if r.Kind != FrameReply || r.Status != 0 {
		c.Close()
		return nil, 0, fmt.Errorf("iggy: dialect probe: %w", r.Err())
	}
	return c, Current, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *Conn) login(ctx context.Context, opts Options) error {
	var req Request
	var err error
	if opts.Token != "" {
		req, err = LoginToken(c.dialect, opts.Token, opts.SDKName, opts.SDKVersion)
	} else {
		req, err = LoginUser(c.dialect, Login{Username: opts.Username, Password: opts.Password,
			SDKName: opts.SDKName, SDKVersion: opts.SDKVersion})
	}
	if err != nil {
		return err
	}
	r, err := c.Do(ctx, req)
	if err != nil {
		return fmt.Errorf("iggy: login to %s: %w", opts.Addr, err)
	}
	lr, err := DecodeLoginReply(c.dialect, r.Body)
	if err != nil {
		c.fail(err)
		return fmt.Errorf("iggy: login to %s: %w", opts.Addr, err)
	}
	c.user = lr
	c.session = lr.Session
	return nil
}

// Dialect is the dialect this connection speaks.
func (c *Conn) Dialect() Dialect { return c.dialect }

// Login is what the server answered at login.
func (c *Conn) Login() LoginReply { return c.user }

// Err is the error that broke the connection, or nil while it is usable.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// closedByPeer reports, without blocking, whether the server has closed
// the connection while it sat in the pool (after a server restart every
// pooled connection is dead, and a send on one would fail with an unknown
// outcome). Bytes nobody asked for also make it unusable. TLS connections
// are not inspected; they rely on the idle ping.
func (c *Conn) closedByPeer() bool {
	if err := c.Err(); err != nil {
		return true
	}
	if _, isTLS := c.nc.(*tls.Conn); isTLS {
		return false
	}
	closed, _ := peerClosed(c.nc)
	if !closed && c.br.Buffered() > 0 {
		closed = true
	}
	if closed {
		c.fail(fmt.Errorf("%w: closed by the server while idle", ErrConnClosed))
	}
	return closed
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.fail(ErrConnClosed)
	return nil
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = err
		c.nc.Close()
	}
}

// deadline applies ctx's deadline (or the request timeout) to the socket
// and unblocks it early when ctx is cancelled.
func (c *Conn) deadline(ctx context.Context) func() {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(c.timeout)
	}
	_ = c.nc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	return func() { stop() }
}

// requestID picks the header request id for req (§2). Every replicated
// op (logout, metadata, and the partition ops SendMessages and the
// consumer-offset writes) takes a new id from one sequence, as the
// released 0.11 SDKs do: a 0.9 server dedups partition writes by request
// id, so a reused id would be taken for a replay and not appended.
// Non-replicated ops carry the current id, which the server ignores.
func (c *Conn) requestID(req Request) uint64 {
	switch req.Operation {
	case OpRegister:
		return 0
	case OpNonReplicated:
		return max(c.reqID, 1)
	}
	c.reqID++
	return c.reqID
}

// Do sends req and waits for its reply, resending after a transient
// result (57/58). A reply with a non-zero status, a failed result section
// or an eviction is returned as an error; an eviction, an I/O error or a
// framing error also closes the connection. The reply body of a
// result-framed command still holds its result section.
func (c *Conn) Do(ctx context.Context, req Request) (*Reply, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	stop := c.deadline(ctx)
	defer stop()
	var hdr []byte
	var id uint64
	var err error
	if c.dialect == Current {
		id = c.requestID(req)
		hdr, err = req.header(Current, RequestHeader{Client: c.client, Request: id, Session: c.session})
	} else {
		hdr, err = req.header(Legacy, RequestHeader{})
	}
	if err != nil {
		return nil, err
	}
	for {
		r, err := c.roundTrip(hdr, req.Body, req.reply, id)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = fmt.Errorf("%w (%v)", ctxErr, err)
			} else if isTimeout(err) { // only our deadlines time the socket out
				err = fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
			}
			return nil, err
		}
		err = r.Err()
		if err == nil && c.dialect == Current && resultFramed(req) {
			_, err = splitResult(r.Body)
		}
		if err == nil {
			return r, nil
		}
		// A transient code (57/58), in the reply status or in a result
		// section, gets the same frame again: the server dedups by request
		// id, so a replay cannot apply twice.
		var ie *Error
		if c.dialect == Current && errors.As(err, &ie) && ie.Transient() {
			select {
			case <-time.After(transientRetryDelay):
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if r.Eviction != nil {
			c.fail(err)
		}
		return nil, err
	}
}

// resultFramed reports whether the Current reply to req starts with a
// result section (§3).
func resultFramed(req Request) bool {
	op := req.Operation
	return op == OpRegister || (op >= 128 && op < 160) || op == OpStoreConsumerOffset || op == OpDeleteConsumerOffset
}

func (c *Conn) roundTrip(hdr, body, replyBuf []byte, id uint64) (*Reply, error) {
	if err := c.send(hdr, body); err != nil {
		c.fail(err)
		return nil, fmt.Errorf("%w: %w", ErrConnClosed, err)
	}
	r, err := readReplyInto(c.dialect, c.br, replyBuf)
	if err != nil {
		c.fail(err)
		return nil, fmt.Errorf("%w: %w", ErrConnClosed, err)
	}
	if c.dialect == Current && r.Kind == FrameReply && r.Request != id {
		err := fmt.Errorf("%w: reply to request %d, sent %d", ErrMalformed, r.Request, id)
		c.fail(err)
		return nil, err
	}
	if dropsSession(c.dialect, r.Status) {
		c.fail(CodeError(r.Status))
	}
	return r, nil
}

// send writes a frame's header and body; a small body is appended to the
// header (one write), a large one follows it in the same writev.
func (c *Conn) send(hdr, body []byte) error {
	if len(body) <= cap(hdr)-len(hdr) {
		_, err := c.nc.Write(append(hdr, body...))
		return err
	}
	bufs := net.Buffers{hdr, body}
	_, err := bufs.WriteTo(c.nc)
	return err
}

// dropsSession reports statuses after which the connection is not reused:
// the session is gone (40), the server closes it (8, 30, 100), or a legacy
// server may have stopped reading mid-frame (3, 6, 82; §13.7).
func dropsSession(d Dialect, status uint32) bool {
	switch status {
	case 40:
		return true
	case 3, 6, 8, 30, 82, 100:
		return d == Legacy
	}
	return false
}
