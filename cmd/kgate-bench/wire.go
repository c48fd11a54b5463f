package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wireConn is one raw Kafka connection used by the group benchmarks, which
// drive the group protocol for thousands of simulated members over a few
// hundred connections instead of one kgo client per member. Requests are
// pipelined: each is written whole under wmu and queued; a reader goroutine
// (owned by the conn, stopped by close) answers the queue in order, as Kafka
// requires, stamping each answer with its arrival time.
type wireConn struct {
	nc   net.Conn
	fmtr *kmsg.RequestFormatter

	wmu  sync.Mutex // serialises writes; guards corr and wbuf
	corr int32
	wbuf []byte

	pmu     sync.Mutex // guards pending, closed and err
	pending []*wireCall
	closed  bool
	err     error

	readerDone chan struct{}
}

// wireCall is one request in flight.
type wireCall struct {
	corr int32
	resp kmsg.Response
	sent time.Time
	recv time.Time
	err  error
	done chan struct{}
}

// errConnClosed is the error of requests on a closed connection.
var errConnClosed = errors.New("connection closed")

// dialWire connects to addr and starts the reader.
func dialWire(ctx context.Context, addr, clientID string) (*wireConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	w := &wireConn{
		nc:         nc,
		fmtr:       kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		readerDone: make(chan struct{}),
	}
	go w.read()
	return w, nil
}

// close closes the connection and waits for the reader; requests still in
// flight fail with errConnClosed.
func (w *wireConn) close() {
	w.fail(errConnClosed)
	<-w.readerDone
}

// broken reports whether the connection failed or was closed.
func (w *wireConn) broken() bool {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	return w.closed
}

// fail marks the connection dead with err, closes the socket and fails
// every request in flight. Later calls keep the first error.
func (w *wireConn) fail(err error) {
	w.pmu.Lock()
	if !w.closed {
		w.closed = true
		w.err = err
	}
	calls := w.pending
	w.pending = nil
	err = w.err
	w.pmu.Unlock()
	w.nc.Close()
	for _, c := range calls {
		c.err = err
		close(c.done)
	}
}

// do sends req and waits for its answer. It returns the decoded response and
// the time from the write to the arrival of the answer. On ctx's end it
// returns at once; the answer, when it comes, is read and dropped.
func (w *wireConn) do(ctx context.Context, req kmsg.Request) (kmsg.Response, time.Duration, error) {
	c := &wireCall{resp: req.ResponseKind(), done: make(chan struct{})}

	w.wmu.Lock()
	w.corr++
	c.corr = w.corr
	w.wbuf = w.fmtr.AppendRequest(w.wbuf[:0], req, c.corr)
	w.pmu.Lock()
	if w.closed {
		err := w.err
		w.pmu.Unlock()
		w.wbuf = w.wbuf[:0]
		w.wmu.Unlock()
		return nil, 0, err
	}
	w.pending = append(w.pending, c)
	w.pmu.Unlock()
	w.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	c.sent = time.Now()
	_, err := w.nc.Write(w.wbuf)
	if cap(w.wbuf) > 64<<10 {
		w.wbuf = nil
	}
	w.wmu.Unlock()
	if err != nil {
		w.fail(fmt.Errorf("write: %w", err))
	}

	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	if c.err != nil {
		return nil, 0, c.err
	}
	return c.resp, c.recv.Sub(c.sent), nil
}

// read answers the queued calls in order until the connection fails.
func (w *wireConn) read() {
	defer close(w.readerDone)
	br := bufio.NewReaderSize(w.nc, 16<<10)
	var size [4]byte
	for {
		if _, err := io.ReadFull(br, size[:]); err != nil {
			w.fail(fmt.Errorf("read: %w", err))
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > 64<<20 {
			w.fail(fmt.Errorf("bad response size %d", n))
			return
		}
		// A fresh buffer per answer: decoded responses may alias it.
		frame := make([]byte, n)
		if _, err := io.ReadFull(br, frame); err != nil {
			w.fail(fmt.Errorf("read: %w", err))
			return
		}
		recv := time.Now()
		w.pmu.Lock()
		if len(w.pending) == 0 {
			w.pmu.Unlock()
			w.fail(errors.New("answer with no request in flight"))
			return
		}
		c := w.pending[0]
		w.pending[0] = nil
		w.pending = w.pending[1:]
		w.pmu.Unlock()
		if corr := int32(binary.BigEndian.Uint32(frame)); corr != c.corr {
			c.err = fmt.Errorf("correlation id %d, want %d", corr, c.corr)
			close(c.done)
			w.fail(c.err)
			return
		}
		c.recv = recv
		c.err = decodeResponse(c.resp, frame[4:])
		close(c.done)
	}
}

// decodeResponse decodes a response body that follows the correlation id:
// flexible versions have a tag section first, except ApiVersions, whose
// response header is always v0.
func decodeResponse(resp kmsg.Response, b []byte) error {
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if b, err = skipTags(b); err != nil {
			return err
		}
	}
	if err := resp.ReadFrom(b); err != nil {
		return fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	num, ok := uv()
	if !ok {
		return nil, errors.New("bad tag section")
	}
	for ; num > 0; num-- {
		if _, ok := uv(); !ok {
			return nil, errors.New("bad tag")
		}
		size, ok := uv()
		if !ok || size > uint64(len(b)) {
			return nil, errors.New("bad tag")
		}
		b = b[size:]
	}
	return b, nil
}

// apiRanges are a broker's supported versions by API key.
type apiRanges map[int16][2]int16

// apiVersions asks the broker which versions it supports.
func (w *wireConn) apiVersions(ctx context.Context) (apiRanges, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "kgate-bench"
	req.ClientSoftwareVersion = "0"
	r, _, err := w.do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	out := apiRanges{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out, nil
}

// pick returns the highest version of req's API both sides support.
func (a apiRanges) pick(req kmsg.Request) (int16, error) {
	r, ok := a[req.Key()]
	v := min(req.MaxVersion(), r[1])
	if !ok || v < r[0] {
		return 0, fmt.Errorf("broker does not support a usable %s version", kmsg.NameForKey(req.Key()))
	}
	return v, nil
}

// groupVersions are the group API versions used on a link.
type groupVersions struct {
	join, sync, heartbeat int16
}

func (a apiRanges) groupVersions() (groupVersions, error) {
	var v groupVersions
	var err error
	if v.join, err = a.pick(kmsg.NewPtrJoinGroupRequest()); err != nil {
		return v, err
	}
	if v.join < 4 {
		// Older versions park a JoinGroup without a member id.
		return v, fmt.Errorf("broker supports JoinGroup up to v%d; v4 (KIP-394) is needed", v.join)
	}
	if v.sync, err = a.pick(kmsg.NewPtrSyncGroupRequest()); err != nil {
		return v, err
	}
	v.heartbeat, err = a.pick(kmsg.NewPtrHeartbeatRequest())
	return v, err
}

// link is one pooled connection to a group coordinator, shared by the
// members assigned to it and redialled after a failure.
type link struct {
	addr     string
	clientID string

	mu   sync.Mutex
	cur  *wireConn
	vers groupVersions
}

// get returns the live connection, dialling a new one if needed.
func (l *link) get(ctx context.Context) (*wireConn, groupVersions, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil && !l.cur.broken() {
		return l.cur, l.vers, nil
	}
	if l.cur != nil {
		l.cur.close()
		l.cur = nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := dialWire(dctx, l.addr, l.clientID)
	if err != nil {
		return nil, groupVersions{}, err
	}
	ranges, err := w.apiVersions(dctx)
	if err == nil {
		l.vers, err = ranges.groupVersions()
	}
	if err != nil {
		w.close()
		return nil, groupVersions{}, fmt.Errorf("%s: %w", l.addr, err)
	}
	l.cur = w
	return w, l.vers, nil
}

// do sends req, with its version set by set, on the link's connection.
func (l *link) do(ctx context.Context, req kmsg.Request, set func(groupVersions) int16) (kmsg.Response, time.Duration, error) {
	w, vers, err := l.get(ctx)
	if err != nil {
		return nil, 0, err
	}
	req.SetVersion(set(vers))
	return w.do(ctx, req)
}

// close closes the link's connection, if any.
func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		l.cur.close()
		l.cur = nil
	}
}
