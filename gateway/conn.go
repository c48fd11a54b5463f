package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgate/kgate/internal/worktime"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection: a reader that decodes and starts requests
// in order, and a writer that sends their answers in the same order.
type conn struct {
	s  *Server
	nc net.Conn
	// remote is nc's remote address, formatted once: requests carry it
	// and log lines name it.
	remote string
	peer   bool // another node's connection for forwarded requests
	// listener is the Kafka listener the connection came in on; nil for
	// another node's.
	listener *Listener
	order    inOrder
	sess     session // authentication (auth.go); only the reader touches it
	// mutedUntil (unix nanoseconds) holds the next request back while a
	// quota throttle runs (KIP-219).
	mutedUntil atomic.Int64
	// encoding is the writer's time encoding its last answer, counted
	// against the request quota with the next one (Kafka counts network
	// thread time without a throttle of its own).
	encoding time.Duration
	// unanswered counts requests begun (their size read) and not yet
	// answered (flushed, or needing no answer); answered counts answers
	// flushed to requests other than the connection's set-up (ApiVersions,
	// SASL), which clients read before they count a request as answered.
	// A stopping server closes the connection once it has answered such a
	// request and nothing is pending (Server.drain).
	unanswered, answered atomic.Int64
	// stopping ends when the server stops: handlers then stop waiting
	// (long polls, waits for a leader) and answer with what they have, so
	// that the drain can send their answers.
	stopping context.Context
	opened   time.Time // when the connection was accepted (cutOffMinAge)
}

func newConn(s *Server, nc net.Conn) *conn {
	return &conn{s: s, nc: nc, remote: nc.RemoteAddr().String(), opened: time.Now()}
}

// logger is the server's logger naming the connection: made when a line is
// logged, not kept with every connection.
func (c *conn) logger() *slog.Logger { return c.s.log.With("remote", c.remote) }

// hangUp closes the connection under its reader and writer, which then end.
func (c *conn) hangUp() { c.nc.Close() }

type pending struct {
	corr     int32
	hdr      Header
	reply    Reply
	observe  func(kmsg.Response) // counts the request once its answer is ready
	throttle time.Duration       // quota throttle already incurred (Produce)
	user     string              // the principal quotas apply to
	started  time.Time           // when the request's frame was read
	work     *worktime.Meter     // the request's waits (request quotas)
	// raw: token is a bare SASL token to send size-prefixed, without a
	// Kafka header (after SaslHandshake v0).
	raw   bool
	token []byte
}

// busy is how long the request kept this node busy until its answer was
// ready: its time since started less its waits.
func (p pending) busy(now time.Time) time.Duration {
	end := now
	if p.reply.answered != nil {
		end = *p.reply.answered // read after the answer came: set before
	}
	return p.work.Busy(end.Sub(p.started))
}

func (c *conn) serve(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	defer c.nc.Close()
	q := &answerQueue{ch: make(chan *pending, c.s.cfg.MaxInFlight), done: make(chan struct{})}
	q.start = func() {
		go func() {
			if !c.write(ctx, q) {
				cancel()
				c.nc.Close() // unblock the reader
				q.failed()
			}
		}()
	}
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	if c.stopping != nil {
		defer context.AfterFunc(c.stopping, hcancel)()
	}
	c.read(ctx, hctx, q)
	q.finish()
}

// answerQueue carries a connection's answers, in request order, to its
// writer: a goroutine that runs only while answers are queued or being
// sent, so an idle connection has one goroutine (its reader) and not two.
type answerQueue struct {
	// ch holds pointers: its buffer is allocated, and scanned by every
	// GC, for as long as the connection is open, busy or idle.
	ch    chan *pending
	start func() // starts a writer goroutine

	mu       sync.Mutex
	running  bool          // a writer runs; at most one does
	finished bool          // the reader is done: no more answers come
	broken   bool          // a writer failed: no other starts
	done     chan struct{} // closed once finished and no writer runs
}

// push queues an answer and makes sure a writer runs. false: ctx ended.
func (q *answerQueue) push(ctx context.Context, p *pending) bool {
	select {
	case q.ch <- p:
	case <-ctx.Done():
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.running && !q.broken {
		q.running = true
		q.start()
	}
	return true
}

// idle is the writer finding nothing queued: it stops unless an answer
// came meanwhile (whose push saw it running and started no other).
func (q *answerQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ch) > 0 {
		return false
	}
	q.running = false
	if q.finished {
		close(q.done)
	}
	return true
}

// failed is the writer stopping on a failed connection.
func (q *answerQueue) failed() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running, q.broken = false, true
	if q.finished {
		close(q.done)
	}
}

// finish is the reader ending: it waits until the writer has sent what is
// queued (or failed).
func (q *answerQueue) finish() {
	q.mu.Lock()
	q.finished = true
	running := q.running
	q.mu.Unlock()
	if running {
		<-q.done
	}
}

// read reads and starts requests until the connection ends (ctx); their
// handlers run under hctx, which also ends when the server stops.
func (c *conn) read(ctx, hctx context.Context, queue *answerQueue) {
	br := &connReader{nc: c.nc, pool: &c.s.readBufs}
	defer br.release()
	var sizeBuf [4]byte
	for ctx.Err() == nil {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if err := br.wait(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.logger().Debug("read", "err", err)
			}
			return
		}
		// From a frame's first byte on (its size prefix included), the
		// whole frame must arrive within ReadTimeout: a client trickling
		// or stalling mid-request (slowloris) is closed then, not after
		// the idle timeout.
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			c.logger().Debug("read", "err", err)
			return
		}
		c.unanswered.Add(1)
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if c.sess.rawTokens {
			p, ok := c.rawToken(ctx, br, size)
			if !ok {
				return
			}
			if !queue.push(ctx, &p) {
				return
			}
			continue
		}
		if size < 8 || size > c.s.cfg.MaxFrameBytes {
			c.logger().Warn("closing connection: bad frame size", "size", size, "max", c.s.cfg.MaxFrameBytes)
			return
		}
		frame, err := c.s.frames.read(br, int(size))
		if err != nil {
			c.logger().Debug("read frame", "err", err)
			return
		}
		if !c.waitUnmuted(ctx) {
			return
		}
		p, ok := c.start(ctx, hctx, frame)
		if !ok {
			return
		}
		if p.reply.none {
			c.unanswered.Add(-1)
			continue
		}
		if !queue.push(ctx, &p) {
			return
		}
		if p.reply.closeAfter {
			return // the writer sends the answer, then the connection closes
		}
	}
}

// connReader reads a connection through a buffer that it holds only while
// bytes wait in it: between requests, where a group member's connection
// spends nearly all its time, the buffer is back in the server's pool, and
// 10,000 idle connections do not keep 10,000 buffers for the GC to count.
// A small request arrives whole in head, its own small buffer, and needs
// no other.
type connReader struct {
	nc     net.Conn
	pool   *sync.Pool    // of *bufio.Reader
	br     *bufio.Reader // nil while nothing is buffered in it
	head   [connHeadBytes]byte
	hr, hw int // head[hr:hw] is still to be read
}

// connHeadBytes holds a Heartbeat, OffsetCommit or small Metadata request.
const connHeadBytes = 256

// wait blocks until bytes of the next frame are there. With none buffered
// it reads into head straight from the connection, holding no buffer
// while it waits.
func (r *connReader) wait() error {
	if r.hr < r.hw || r.br != nil && r.br.Buffered() > 0 {
		return nil
	}
	r.release()
	for {
		n, err := r.nc.Read(r.head[:])
		if n > 0 || err != nil {
			r.hr, r.hw = 0, n
			return err
		}
	}
}

// Read reads what head holds, then through the buffer, taking one from
// the pool if none is held.
func (r *connReader) Read(p []byte) (int, error) {
	if r.hr < r.hw {
		n := copy(p, r.head[r.hr:r.hw])
		r.hr += n
		return n, nil
	}
	if r.br == nil {
		r.br, _ = r.pool.Get().(*bufio.Reader)
		if r.br == nil {
			r.br = bufio.NewReaderSize(nil, connBufferBytes)
		}
		r.br.Reset(r.nc)
	}
	return r.br.Read(p)
}

// release gives the buffer back to the pool; what it held is dropped.
func (r *connReader) release() {
	if r.br != nil {
		r.br.Reset(nil)
		r.pool.Put(r.br)
		r.br = nil
	}
}

// writeBufs are a connection's write buffer and the buffer its answers are
// encoded in, held while answers are being sent (conn.write).
type writeBufs struct {
	bw  *bufio.Writer
	out []byte // at most connBufferBytes; larger ones go to Server.answerBufs
}

// writeBufPool keeps writeBufs for the connections that send answers.
type writeBufPool struct {
	p sync.Pool // of *writeBufs
}

func (wp *writeBufPool) get(w io.Writer) *writeBufs {
	wb, _ := wp.p.Get().(*writeBufs)
	if wb == nil {
		wb = &writeBufs{bw: bufio.NewWriterSize(nil, connBufferBytes)}
	}
	wb.bw.Reset(w)
	return wb
}

func (wp *writeBufPool) put(wb *writeBufs) {
	wb.bw.Reset(nil)
	wp.p.Put(wb)
}

// maxTokenBytes bounds a bare SASL token (Kafka's
// sasl.server.max.receive.size).
const maxTokenBytes = 512 << 10

// rawToken reads one bare SASL token after a SaslHandshake v0 and carries
// it through the exchange; the answer is the server's bare token. A failed
// exchange closes the connection after the failure delay without an
// answer: v0 has no way to say why, and Kafka closes it too.
func (c *conn) rawToken(ctx context.Context, br io.Reader, size int32) (pending, bool) {
	if size < 0 || size > maxTokenBytes || c.sess.exchange == nil {
		c.logger().Warn("closing connection: bad SASL token size", "size", size, "max", maxTokenBytes)
		return pending{}, false
	}
	token, err := readFrameBody(br, int(size))
	if err != nil {
		c.logger().Debug("read SASL token", "err", err)
		return pending{}, false
	}
	out, _, fail := c.s.saslStep(&c.sess, token, c.remote)
	if fail != nil {
		sleepCtx(ctx, c.sess.failureDelay)
		return pending{}, false
	}
	return pending{raw: true, token: out, started: time.Now()}, true
}

// frameChunk is the most a frame body gets before any of it arrived.
const frameChunk = 64 << 10

// readFrameBody reads a frame body of size bytes. The buffer grows with
// the bytes that really arrive, never to more than four times what came
// (a client announcing a large frame and sending nothing holds little),
// and ends at exactly size: a 1 MiB produce costs 1.3 MiB of allocations,
// where growing a bytes.Buffer by doubling cost 4 MiB (it doubles once
// more when full), all of it zeroed.
func readFrameBody(r io.Reader, size int) ([]byte, error) {
	buf := make([]byte, min(size, frameChunk))
	n, err := io.ReadFull(r, buf)
	for err == nil && n < size {
		next := make([]byte, min(size, 4*len(buf)))
		copy(next, buf[:n])
		buf = next
		var m int
		m, err = io.ReadFull(r, buf[n:])
		n += m
	}
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// framePool keeps produce request buffers for reuse (Server.frames).
type framePool struct {
	p sync.Pool // of *[]byte
}

const (
	minPooledFrame = frameChunk // smaller frames cost little to allocate
	maxPooledFrame = 16 << 20
)

// read is readFrameBody into a kept buffer when one is large enough (a
// nil pool keeps none).
func (fp *framePool) read(r io.Reader, size int) ([]byte, error) {
	if fp != nil && size >= minPooledFrame {
		if bp, _ := fp.p.Get().(*[]byte); bp != nil && cap(*bp) >= size {
			buf := (*bp)[:size]
			if _, err := io.ReadFull(r, buf); err != nil {
				return nil, err
			}
			return buf, nil
		}
	}
	return readFrameBody(r, size)
}

// releaser returns the function that hands frame back, once, for a
// request whose bytes its handler says it is through with.
func (fp *framePool) releaser(frame []byte) func() {
	if fp == nil || len(frame) < minPooledFrame || cap(frame) > maxPooledFrame {
		return nil
	}
	var once atomic.Bool
	return func() {
		if !once.Swap(true) {
			b := frame[:0]
			fp.p.Put(&b)
		}
	}
}

// start decodes one frame and runs its handler under hctx (the request
// order waits under ctx). ok=false closes the connection.
func (c *conn) start(ctx, hctx context.Context, frame []byte) (pending, bool) {
	started := time.Now()
	hdr, req, body, err := ParseRequest(frame)
	if err != nil {
		c.logger().Warn("closing connection: bad request header", "api_key", hdr.Key, "version", hdr.Version, "err", err)
		return pending{}, false
	}
	h, known := c.s.handlers[hdr.Key]
	if hdr.Key == apiVersionsKey && (!known || hdr.Version > h.max || hdr.Version < h.min) {
		// KIP-511: answer in v0 with our ranges so the client can pick.
		return pending{corr: hdr.CorrelationID, reply: now(c.s.unsupportedAPIVersions())}, true
	}
	if !known || hdr.Version < h.min || hdr.Version > h.max {
		c.logger().Warn("closing connection: unsupported api version", "api", kmsg.NameForKey(hdr.Key), "api_key", hdr.Key, "version", hdr.Version)
		return pending{}, false
	}
	if !c.sess.admit(hdr.Key, time.Now()) {
		if c.sess.authed {
			// KIP-368: the client did not re-authenticate in time (a
			// client without re-authentication reconnects).
			c.logger().Info("closing connection: SASL session expired", "api", kmsg.NameForKey(hdr.Key), "listener", c.listener.Name)
		} else {
			c.logger().Info("closing connection: request before authentication", "api", kmsg.NameForKey(hdr.Key))
		}
		return pending{}, false
	}
	if err := DecodeBody(req, body); err != nil {
		c.logger().Warn("closing connection", "err", err)
		return pending{}, false
	}
	r := &Request{Header: hdr, Body: req, Remote: c.remote, Forwarded: c.peer, sess: &c.sess}
	if hdr.Key == 0 { // only handleProduce says when it is through (Request.done)
		r.release = c.s.frames.releaser(frame)
		r.hangUp = c.hangUp // an acks=0 produce that fails (handleProduce)
	}
	if !c.order.admit(ctx, hdr.Key) {
		return pending{}, false
	}
	observe := c.s.observer(r)
	user := c.sess.quotaUser()
	var throttle time.Duration
	if hdr.Key == 0 { // Kafka counts a produce request's whole size
		_, clientThrottles := (&kmsg.ProduceResponse{Version: hdr.Version}).Throttle() // KIP-219
		throttle = c.quotaThrottle(hdr, user, producerByteRate, float64(len(frame)), clientThrottles)
	}
	work := new(worktime.Meter)
	reply := h.fn(worktime.With(hctx, work), r)
	c.order.started(hdr.Key, reply.done)
	if reply.close {
		return pending{}, false
	}
	p := pending{corr: hdr.CorrelationID, hdr: hdr, reply: reply, observe: observe, throttle: throttle,
		user: user, started: started, work: work}
	if reply.none {
		observe(nil)
		c.recordRequestTime(p, p.busy(time.Now())) // no answer to carry a throttle
	}
	return p, true
}

// connBufferBytes sizes the read and write buffers a connection holds
// while it is busy (connReader, writeBufs), and the largest answer buffer
// kept with them. Frames and answers larger than that go straight between
// the socket and their own buffers, so a larger size saves no system call
// on bulk traffic. With 64 KiB buffers held for the connection's life,
// 10,000 group members' connections held 710 MB of a node's 754 MB heap;
// with 8 KiB ones held so, still 40 KB a connection
// (BenchmarkHeartbeatIdleConnections); an idle one now holds about 2.7 KB
// of heap and its reader's stack.
const connBufferBytes = 8 << 10

// write sends the queued answers in order until it finds the queue empty,
// everything sent and flushed (true), or the connection fails (false).
func (c *conn) write(ctx context.Context, q *answerQueue) bool {
	// The write buffers are held from an answer until the flush after it,
	// when no other answer is queued: an idle connection holds none.
	var wb *writeBufs
	hold := func() *writeBufs {
		if wb == nil {
			wb = c.s.writeBufs.get(c.nc)
		}
		return wb
	}
	var buffered int64 // answers written to wb since the last flush
	var settling int64 // of them, answers to requests past the set-up
	flush := func() error {
		if wb != nil {
			if err := wb.bw.Flush(); err != nil {
				return err
			}
			c.s.writeBufs.put(wb)
			wb = nil
		}
		if err := flushTLS(c.nc); err != nil {
			return err
		}
		c.answered.Add(settling)
		c.unanswered.Add(-buffered)
		buffered, settling = 0, 0
		return nil
	}
	for {
		var p *pending
		select {
		case p = <-q.ch:
		default:
			if q.idle() {
				return true
			}
			continue
		}
		if p.raw {
			w := hold()
			c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
			w.out = binary.BigEndian.AppendUint32(w.out[:0], uint32(len(p.token)))
			w.out = append(w.out, p.token...)
			if _, err := w.bw.Write(w.out); err != nil {
				return false
			}
			buffered++
			if len(q.ch) == 0 {
				if err := flush(); err != nil {
					return false
				}
			}
			continue
		}
		resp := p.reply.resp
		if p.reply.later != nil {
			select {
			case resp = <-p.reply.later:
			default:
				// Send what is buffered before waiting, so earlier answers
				// don't sit behind a long poll or a commit.
				if err := flush(); err != nil {
					return false
				}
				select {
				case resp = <-p.reply.later:
				case <-ctx.Done():
					return false
				}
			}
		}
		if _, reset := resp.(cutOffAnswer); reset {
			if err := flush(); err == nil {
				c.resetCutOff(ctx)
			}
			return false
		}
		if p.observe != nil {
			p.observe(resp)
		}
		if !c.applyThrottle(ctx, *p, resp) {
			return false
		}
		if c.listener != nil && c.listener.Name != "" {
			c.s.localizeEndpoints(resp, c.listener.Name)
		}
		w := hold()
		encoding := time.Now()
		out := w.out
		if out == nil {
			if bp, _ := c.s.answerBufs.Get().(*[]byte); bp != nil {
				out = *bp
			}
		}
		out = AppendResponse(out[:0], p.corr, resp)
		if p.reply.release != nil {
			p.reply.release()
		}
		c.encoding = time.Since(encoding)
		if c.peer {
			// The forwarding node waits until it has applied as much.
			out = binary.BigEndian.AppendUint64(out, c.s.cluster.AppliedIndex())
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
		_, err := w.bw.Write(out)
		w.out = out
		if cap(out) > connBufferBytes {
			// Not pinned to write buffers that may now idle, but kept for
			// the next large answer on any connection: growing a buffer to
			// a fetch's size afresh for every answer copied it several
			// times over.
			b := out[:0]
			c.s.answerBufs.Put(&b)
			w.out = nil
		}
		if err != nil {
			return false
		}
		buffered++
		if !setUp(p.hdr.Key) {
			settling++
		}
		if len(q.ch) == 0 {
			if err := flush(); err != nil {
				return false
			}
		}
	}
}

// setUp reports the APIs of a connection's set-up: franz-go reads their
// answers before it counts any request on the connection as answered, and
// fails a request (a produce, say) that is the first after them when the
// connection then closes cleanly, where it retries after a later one.
func setUp(key int16) bool {
	switch key {
	case 18, 17, 36: // ApiVersions, SaslHandshake, SaslAuthenticate
		return true
	}
	return false
}

// cutOffMinAge is the least time a connection is open before a cut-off
// node resets it: a client that reconnects at once (the whole cluster
// without a quorum resets everywhere) opens at most four a second to a
// node, whatever its own backoff.
const cutOffMinAge = 250 * time.Millisecond

// resetCutOff ends the connection of a node cut off from its leader
// (Server.cutOffNow) with a TCP reset rather than a clean close: franz-go
// does not retry a request whose connection closed cleanly before its
// first answer (it takes that for a TLS or SASL mismatch), and does retry
// one whose connection was reset, on the next broker. The answers before
// the reset are flushed; the reset waits (briefly) until the client has
// them, since a reset drops what the kernel still holds to send.
func (c *conn) resetCutOff(ctx context.Context) {
	if wait := cutOffMinAge - time.Since(c.opened); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	c.s.metrics.cutOff.Inc()
	c.logger().Debug("resetting connection: no leader in contact", "leaderless_for", c.s.cluster.LeaderlessFor())
	tc := tcpConnOf(c.nc)
	if tc == nil {
		return
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	wait := time.Millisecond
	for unsentBytes(tc) > 0 && time.Now().Before(deadline) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil {
			break
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
	tc.SetLinger(0) // Close now sends a reset
}

// tcpConnOf is the TCP connection under nc (TLS and its record batcher).
func tcpConnOf(nc net.Conn) *net.TCPConn {
	for {
		switch c := nc.(type) {
		case *net.TCPConn:
			return c
		case *tls.Conn:
			nc = c.NetConn()
		case *recordBatcher:
			nc = c.Conn
		default:
			return nil
		}
	}
}
