package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Some requests only the Raft leader can apply, yet clients send them to
// any broker: InitProducerId for an idempotent producer, and topic config
// changes (Kafka brokers forward those to the controller). A follower
// passes such a request on to the leader's Kafka listener, unchanged and at
// the client's version, and relays the answer.

// forwardClientID marks forwarded requests; they are never forwarded
// again (two nodes that each believe the other leads must not bounce a
// request between them).
const forwardClientID = "kgate-forward"

// viaLeader answers a leader-only request: on a follower it forwards it
// to the leader; on the leader, for a forwarded request, or when the
// leader cannot be reached, it runs local (which then answers with the
// backend's retriable "not the leader" code).
func (s *Server) viaLeader(ctx context.Context, r *Request, local func() kmsg.Response) kmsg.Response {
	if r.ClientID == nil || *r.ClientID != forwardClientID {
		resp, err := s.forwardToLeader(ctx, r.Body)
		if err == nil {
			return resp
		}
		if !errors.Is(err, errForwardToSelf) {
			s.log.Debug("forwarding to the leader failed", "api", r.Key, "err", err)
		}
	}
	return local()
}

// errForwardToSelf means this node is the leader: handle locally.
var errForwardToSelf = errors.New("this node is the leader")

// forwardTimeout bounds one forwarded request.
const forwardTimeout = 10 * time.Second

// forwarder keeps one connection to the current leader, one request at a
// time.
type forwarder struct {
	mu     sync.Mutex
	addr   string
	nc     net.Conn
	br     *bufio.Reader
	corr   int32
	fmtr   *kmsg.RequestFormatter
	closed bool
	tls    *tls.Config // set when the listeners speak TLS
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.drop()
}

func (f *forwarder) drop() {
	if f.nc != nil {
		f.nc.Close()
		f.nc, f.br = nil, nil
	}
}

// forwardToLeader sends req to the leader and returns its response, or
// errForwardToSelf when this node leads.
func (s *Server) forwardToLeader(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	leader, ok := s.cluster.AwaitLeader(ctx)
	if !ok {
		return nil, errors.New("no leader")
	}
	if leader == s.cluster.Self().ID {
		return nil, errForwardToSelf
	}
	addr := ""
	for _, b := range s.cluster.Brokers() {
		if b.ID == leader {
			addr = b.KafkaAddr
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("leader %d has no known Kafka address", leader)
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	return s.fwd.roundTrip(ctx, addr, req)
}

func (f *forwarder) roundTrip(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("server closing")
	}
	if f.nc != nil && f.addr != addr {
		f.drop()
	}
	if f.nc == nil {
		nc, err := f.dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		f.nc, f.br, f.addr = nc, bufio.NewReader(nc), addr
		if f.fmtr == nil {
			f.fmtr = kmsg.NewRequestFormatter(kmsg.FormatterClientID(forwardClientID))
		}
	}
	resp, err := f.exchange(ctx, req)
	if err != nil {
		f.drop()
	}
	return resp, err
}

func (f *forwarder) dial(ctx context.Context, addr string) (net.Conn, error) {
	if f.tls == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	cfg := f.tls.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
		cfg.ServerName = host
	}
	d := tls.Dialer{Config: cfg}
	return d.DialContext(ctx, "tcp", addr)
}

func (f *forwarder) exchange(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = f.nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	f.corr++
	frame := f.fmtr.AppendRequest(nil, req, f.corr)
	if _, err := f.nc.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(f.br, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("forwarded response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(f.br, body); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != f.corr {
		return nil, fmt.Errorf("forwarded response to %d, sent %d", corr, f.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions responses have no header tags
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}
