package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// The Raft port is the cluster's own link between nodes, and it carries two
// kinds of connections, told apart by their first byte as Consul's RPC port
// does: Raft's (whose first byte is an RPC type, 0 to a handful) and Kafka
// requests one node forwards to the leader (first byte peerTag). Forwarded
// requests reach a node only this way, never on its Kafka listener, so no
// client can mark a request as already forwarded; whoever can reach the
// Raft port can already speak Raft, so this adds nothing an operator must
// protect beyond what Raft needs; LinkTLS (link_tls.go) protects both.

// peerTag opens a connection carrying forwarded Kafka requests. After it
// come Kafka request frames; each response frame is followed by the
// answering node's applied log index (8 bytes, big-endian), which the
// forwarding node waits to reach before it answers its client.
const peerTag byte = 0xF0

// classifyTimeout bounds how long an accepted connection may take to send
// its first byte.
const classifyTimeout = 10 * time.Second

// maxInboundRaftConns bounds the Raft connections open on this node's port
// at once; more are closed. Raft reads each through a 256 KiB buffer with
// no deadline, so without a bound anyone reaching the port could hold
// memory without end by opening connections that send one byte and stall.
// A peer opens a handful (a pool of 4, a pipeline, heartbeats): 128 serves
// a cluster of well over ten nodes.
const maxInboundRaftConns = 128

// muxStream is the Raft stream layer over TCP that hands connections opening
// with peerTag to a separate listener.
type muxStream struct {
	ln    net.Listener
	adv   net.Addr
	raftC chan net.Conn
	peers *PeerListener
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	// raftConns counts the inbound Raft connections open (maxInboundRaftConns).
	raftConns atomic.Int32
	// closed is called when an inbound Raft connection ends; nil: not watched.
	closed func()
	// tls secures every connection (nil: clear); nodeAt names the node a
	// Raft address belongs to, so a dial checks it reached that node.
	tls    *LinkTLS
	nodeAt func(addr string) int32
	log    hclog.Logger
}

// tcpTransport is the Raft TCP transport with forwarded-request connections
// split off; tests use one whose network they can cut (Config.transport).
//
// Each inbound Raft connection calls closed when it ends (see
// noteConnClosed: a follower learns at once that its leader went away).
func tcpTransport(bind string, advertise net.Addr, log hclog.Logger, closed func(), lt *LinkTLS, nodeAt func(string) int32) (*raftTransport, *PeerListener, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, nil, errors.New("local bind address is not advertisable")
	}
	m := &muxStream{ln: ln, adv: advertise, raftC: make(chan net.Conn), done: make(chan struct{}), closed: closed,
		tls: lt, nodeAt: nodeAt, log: log}
	m.peers = &PeerListener{m: m, c: make(chan net.Conn), closed: make(chan struct{})}
	m.wg.Add(1)
	go m.acceptLoop()
	return newRaftTransport(m, log), m.peers, nil
}

func (m *muxStream) acceptLoop() {
	defer m.wg.Done()
	for {
		nc, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		m.wg.Add(1)
		go m.classify(nc)
	}
}

// classify reads the first byte off the accepting loop, so a silent peer
// cannot hold up Raft's connections.
func (m *muxStream) classify(nc net.Conn) {
	defer m.wg.Done()
	if m.tls != nil {
		tc, err := m.tls.acceptTLS(nc, classifyTimeout)
		if err != nil {
			m.log.Warn("refused a connection to the Raft port: not a node of this cluster", "remote", nc.RemoteAddr().String(), "error", err)
			nc.Close()
			return
		}
		nc = tc
	}
	var first [1]byte
	_ = nc.SetReadDeadline(time.Now().Add(classifyTimeout))
	if _, err := nc.Read(first[:]); err != nil {
		nc.Close()
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	if first[0] == peerTag {
		select {
		case m.peers.c <- nc:
		case <-m.peers.closed:
			nc.Close()
		case <-m.done:
			nc.Close()
		}
		return
	}
	if m.raftConns.Add(1) > maxInboundRaftConns {
		m.raftConns.Add(-1)
		m.log.Warn("closing a connection to the Raft port: too many open", "remote", nc.RemoteAddr().String(), "limit", maxInboundRaftConns)
		nc.Close()
		return
	}
	counted := &countedConn{Conn: &peekedConn{Conn: nc, first: first[:]}, n: &m.raftConns}
	select {
	case m.raftC <- m.watch(counted):
	case <-m.done:
		counted.Close()
	}
}

// countedConn takes itself off a count when closed (once).
type countedConn struct {
	net.Conn
	n    *atomic.Int32
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.n.Add(-1) })
	return c.Conn.Close()
}

// watch makes a Raft connection report its end.
func (m *muxStream) watch(nc net.Conn) net.Conn {
	if m.closed == nil {
		return nc
	}
	return &watchedConn{Conn: nc, closed: m.closed}
}

// Accept gives Raft its connections.
func (m *muxStream) Accept() (net.Conn, error) {
	select {
	case nc := <-m.raftC:
		return nc, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close stops both listeners.
func (m *muxStream) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.wg.Wait()
	})
	return err
}

func (m *muxStream) Addr() net.Addr { return m.adv }

// Dial opens a Raft connection.
func (m *muxStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if m.tls == nil {
		return net.DialTimeout("tcp", string(address), timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return m.tls.dialTLS(ctx, string(address), m.nodeAt(string(address)))
}

// peekedConn gives back the byte read to classify it.
type peekedConn struct {
	net.Conn
	first []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// PeerListener yields the connections other nodes open on this node's Raft
// port to forward Kafka requests. Close stops it; the port stays Raft's.
type PeerListener struct {
	m      *muxStream
	c      chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *PeerListener) Accept() (net.Conn, error) {
	select {
	case nc := <-l.c:
		return nc, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.m.done:
		return nil, net.ErrClosed
	}
}

func (l *PeerListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *PeerListener) Addr() net.Addr { return l.m.adv }

// PeerListener is this node's listener for forwarded requests; nil when the
// Raft transport is a test's own.
func (n *Node) PeerListener() net.Listener {
	if n.peers == nil {
		return nil
	}
	return n.peers
}

// DialPeer opens a connection to another node's Raft port for forwarded
// Kafka requests.
func (n *Node) DialPeer(ctx context.Context, to NodeInfo) (net.Conn, error) {
	if to.RaftAddr == "" {
		return nil, errors.New("cluster: node has no known Raft address")
	}
	var nc net.Conn
	var err error
	if n.cfg.LinkTLS != nil {
		nc, err = n.cfg.LinkTLS.dialTLS(ctx, to.RaftAddr, to.ID)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", to.RaftAddr)
	}
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetWriteDeadline(dl)
	}
	if _, err := nc.Write([]byte{peerTag}); err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetWriteDeadline(time.Time{})
	return nc, nil
}

// AppliedIndex is the index of the last log entry this node's state machine
// applied.
func (n *Node) AppliedIndex() uint64 { return n.fsm.Applied() }
