package gateway

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

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/internal/worktime"
)

// Some requests only the Raft leader can apply, yet clients send them to
// any broker: topic creation (CreateTopics and Metadata's auto-creation),
// deletion, new partitions, config changes and InitProducerId. Kafka brokers
// forward such requests to the controller; a kgate follower forwards them to
// the leader, unchanged and at the client's version, and relays the answer.
//
// Forwarded requests travel over the cluster's own link, the Raft port
// (cluster.Node.DialPeer), never the Kafka listener. A request that arrives
// that way is marked Forwarded and always handled where it lands, so two
// nodes that each believe the other leads cannot bounce it between them,
// and no client can claim that mark.

// viaLeader answers a leader-only request: on a follower it forwards it
// to the leader; on the leader, for a forwarded request, or when the
// leader cannot be reached, it runs local (which then answers with the
// backend's retriable "not the leader" code).
func (s *Server) viaLeader(ctx context.Context, r *Request, local func() kmsg.Response) kmsg.Response {
	return s.onLeader(ctx, r.Body, r.Forwarded, local)
}

// onLeader is viaLeader for a request built here. A forwarded answer is
// returned once this node has applied as much of the log as the leader had
// when it answered, so the client's next request on the same connection
// sees the change here too (rule 9).
func (s *Server) onLeader(ctx context.Context, req kmsg.Request, arrivedForwarded bool, local func() kmsg.Response) kmsg.Response {
	if !arrivedForwarded {
		resp, applied, err := s.forwardToLeader(ctx, req)
		if err == nil {
			s.metrics.forwarded.WithLabelValues(kmsg.NameForKey(req.Key()), "ok").Inc()
			s.awaitLocal(ctx, func() bool { return s.cluster.AppliedIndex() >= applied })
			return resp
		}
		if !errors.Is(err, errForwardToSelf) {
			s.metrics.forwarded.WithLabelValues(kmsg.NameForKey(req.Key()), "error").Inc()
			s.log.Debug("forwarding to the leader failed", "api", kmsg.NameForKey(req.Key()), "err", err)
		}
	}
	return local()
}

// awaitLocal waits, bounded by LeaderWait, until done: a follower applies
// the leader's log a moment after the leader.
func (s *Server) awaitLocal(ctx context.Context, done func() bool) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaderWait)
	defer cancel()
	wait := time.Millisecond
	for !done() {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// errForwardToSelf means this node is the leader: handle locally.
var errForwardToSelf = errors.New("this node is the leader")

// forwardTimeout bounds one forwarded request.
const forwardTimeout = 10 * time.Second

// forwardToLeader sends req to the leader and returns its response and
// the leader's applied log index when it answered, or errForwardToSelf
// when this node leads.
func (s *Server) forwardToLeader(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error) {
	leader, ok := s.cluster.AwaitLeader(ctx)
	if !ok {
		return nil, 0, errors.New("no leader")
	}
	if leader == s.cluster.Self().ID {
		return nil, 0, errForwardToSelf
	}
	var to cluster.NodeInfo
	for _, b := range s.cluster.Brokers() {
		if b.ID == leader {
			to = b
		}
	}
	if to.ID != leader {
		return nil, 0, fmt.Errorf("leader %d is not a known node", leader)
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	return s.fwd.roundTrip(ctx, s.cluster, to, req)
}

// forwarder is a small pool of connections to other nodes: each forwarded
// request takes an idle connection (or dials one) for its exchange alone,
// bounded by its own deadline, so one slow answer holds up no other.
type forwarder struct {
	mu     sync.Mutex
	idle   map[string][]*peerConn // by the peer's Raft address
	closed bool
}

// maxIdlePeerConns is how many idle connections are kept per peer.
const maxIdlePeerConns = 4

type peerConn struct {
	nc   net.Conn
	br   *bufio.Reader
	corr int32
	fmtr *kmsg.RequestFormatter
	// spoiled: not to be reused.
	spoiled bool
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, conns := range f.idle {
		for _, pc := range conns {
			pc.nc.Close()
		}
	}
	f.idle = nil
}

func (f *forwarder) get(ctx context.Context, dialer Cluster, to cluster.NodeInfo) (*peerConn, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errors.New("server closing")
	}
	if conns := f.idle[to.RaftAddr]; len(conns) > 0 {
		pc := conns[len(conns)-1]
		f.idle[to.RaftAddr] = conns[:len(conns)-1]
		f.mu.Unlock()
		return pc, nil
	}
	f.mu.Unlock()
	nc, err := dialer.DialPeer(ctx, to)
	if err != nil {
		return nil, err
	}
	return &peerConn{nc: nc, br: bufio.NewReader(nc), fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("kgate-forward"))}, nil
}

func (f *forwarder) put(addr string, pc *peerConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.idle[addr]) >= maxIdlePeerConns {
		pc.nc.Close()
		return
	}
	if f.idle == nil {
		f.idle = map[string][]*peerConn{}
	}
	f.idle[addr] = append(f.idle[addr], pc)
}

func (f *forwarder) roundTrip(ctx context.Context, dialer Cluster, to cluster.NodeInfo, req kmsg.Request) (kmsg.Response, uint64, error) {
	pc, err := f.get(ctx, dialer, to)
	if err != nil {
		return nil, 0, err
	}
	resp, applied, err := pc.exchange(ctx, req)
	if err != nil || pc.spoiled {
		pc.nc.Close()
		return resp, applied, err
	}
	f.put(to.RaftAddr, pc)
	return resp, applied, nil
}

// exchange sends one request and reads its answer: a Kafka response frame
// followed, on the cluster's link, by the responder's applied log index
// (8 bytes, big-endian).
func (pc *peerConn) exchange(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error) {
	defer worktime.Wait(ctx)()
	if dl, ok := ctx.Deadline(); ok {
		_ = pc.nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = pc.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	pc.corr++
	frame := pc.fmtr.AppendRequest(nil, req, pc.corr)
	if _, err := pc.nc.Write(frame); err != nil {
		return nil, 0, err
	}
	var size [4]byte
	if _, err := io.ReadFull(pc.br, size[:]); err != nil {
		return nil, 0, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 64<<20 {
		return nil, 0, fmt.Errorf("forwarded response of %d bytes", n)
	}
	body := make([]byte, n+peerTrailerBytes)
	if _, err := io.ReadFull(pc.br, body); err != nil {
		return nil, 0, err
	}
	applied := binary.BigEndian.Uint64(body[n:])
	body = body[:n]
	if corr := int32(binary.BigEndian.Uint32(body)); corr != pc.corr {
		return nil, 0, fmt.Errorf("forwarded response to %d, sent %d", corr, pc.corr)
	}
	if stop() {
		_ = pc.nc.SetDeadline(time.Time{})
	} else {
		pc.spoiled = true // ctx ended just now and set a past deadline
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions responses have no header tags
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, 0, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, 0, err
	}
	return resp, applied, nil
}

// peerTrailerBytes follow each response on a peer connection: the applied
// log index.
const peerTrailerBytes = 8
