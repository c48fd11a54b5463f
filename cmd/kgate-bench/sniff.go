package main

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// heartbeatKey is the Heartbeat API key.
const heartbeatKey = 12

// sniffConn wraps a kgo client's connection and reports the error code of
// every Heartbeat answer read on it, with its arrival time. kgo has no hook
// that sees response bodies, and the failover benchmark needs to know when
// the group's first successful heartbeat through the new leader arrived.
// Only frame headers are inspected; everything else passes through.
type sniffConn struct {
	net.Conn
	addr   string
	report func(addr string, code int16, at time.Time)

	mu sync.Mutex
	hb map[int32]int16 // correlation id → version of Heartbeats in flight

	w, r frameScanner // write side: requests; read side: responses

	// The response frame being read; only the reading goroutine uses these.
	rHeartbeat bool
	rVersion   int16
}

func newSniffConn(nc net.Conn, addr string, report func(string, int16, time.Time)) *sniffConn {
	c := &sniffConn{Conn: nc, addr: addr, report: report, hb: map[int32]int16{}}
	c.w = frameScanner{size: -1, peek: 8, decide: c.request}
	c.r = frameScanner{size: -1, peek: 4, decide: c.response, end: c.responseEnd}
	return c
}

// sniffDialer is a kgo.Dialer that wraps each connection in a sniffConn.
func sniffDialer(report func(string, int16, time.Time)) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return newSniffConn(nc, host, report), nil
	}
}

func (c *sniffConn) Write(p []byte) (int, error) {
	// Parse first so the correlation id is known before the answer can come.
	c.w.feed(p)
	return c.Conn.Write(p)
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.r.feed(p[:n])
	}
	return n, err
}

// request sees the first bytes of a request: api key, version, correlation id.
func (c *sniffConn) request(b []byte) int {
	if len(b) < 8 || int16(binary.BigEndian.Uint16(b)) != heartbeatKey {
		return 0
	}
	c.mu.Lock()
	c.hb[int32(binary.BigEndian.Uint32(b[4:]))] = int16(binary.BigEndian.Uint16(b[2:]))
	c.mu.Unlock()
	return 0
}

// response sees a response's correlation id and asks for the whole frame of
// a Heartbeat answer.
func (c *sniffConn) response(b []byte) int {
	c.rHeartbeat = false
	if len(b) < 4 {
		return 0
	}
	corr := int32(binary.BigEndian.Uint32(b))
	c.mu.Lock()
	v, ok := c.hb[corr]
	delete(c.hb, corr)
	c.mu.Unlock()
	if !ok {
		return 0
	}
	c.rHeartbeat, c.rVersion = true, v
	return 64 // a Heartbeat answer is a few bytes
}

func (c *sniffConn) responseEnd(b []byte) {
	if !c.rHeartbeat {
		return
	}
	c.rHeartbeat = false
	if code, ok := heartbeatCode(c.rVersion, b[4:]); ok {
		c.report(c.addr, code, time.Now())
	}
}

// heartbeatCode extracts the error code of a Heartbeat response body of
// version v (the part after the correlation id).
func heartbeatCode(v int16, b []byte) (int16, bool) {
	if v >= 4 { // flexible: tagged fields end the header
		var err error
		if b, err = skipTags(b); err != nil {
			return 0, false
		}
	}
	if v >= 1 {
		if len(b) < 4 {
			return 0, false
		}
		b = b[4:] // throttle_time_ms
	}
	if len(b) < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(b)), true
}

// frameScanner follows a stream of size-prefixed Kafka frames fed in
// arbitrary pieces. Of each frame it captures the first peek bytes and calls
// decide with them (or with the whole frame if shorter); decide returns how
// many bytes of the frame to capture in all. end gets the captured bytes
// when the frame is over.
type frameScanner struct {
	peek   int
	decide func(b []byte) int
	end    func(b []byte)

	pre     [4]byte
	npre    int
	size    int // of the current frame; -1 while reading the size
	seen    int // bytes of the current frame consumed
	want    int // bytes of the current frame to capture
	decided bool
	buf     []byte
}

func (s *frameScanner) feed(p []byte) {
	for {
		if s.size >= 0 {
			if s.seen == s.want && !s.decided {
				s.decided = true
				s.want = min(max(s.decide(s.buf), s.want), s.size)
				continue
			}
			if s.seen == s.size && s.decided {
				if s.end != nil {
					s.end(s.buf)
				}
				s.size = -1
				continue
			}
		}
		if len(p) == 0 {
			return
		}
		switch {
		case s.size < 0:
			n := copy(s.pre[s.npre:], p)
			s.npre += n
			p = p[n:]
			if s.npre == 4 {
				s.npre = 0
				s.size = max(int(int32(binary.BigEndian.Uint32(s.pre[:]))), 0)
				s.seen, s.decided, s.buf = 0, false, s.buf[:0]
				s.want = min(s.peek, s.size)
			}
		case s.seen < s.want:
			n := min(s.want-s.seen, len(p))
			s.buf = append(s.buf, p[:n]...)
			s.seen += n
			p = p[n:]
		default:
			n := min(s.size-s.seen, len(p))
			s.seen += n
			p = p[n:]
		}
	}
}
