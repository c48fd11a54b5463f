// Package gateway is kgate's Kafka wire server: framing, bounds,
// ApiVersions, dispatch by API key (one handler file per API) and the
// Backend seam that Produce, Fetch, ListOffsets and topic admin use.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/coordinator"
	"github.com/kgate/kgate/coordinator/txn"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway/authz"
)

// Config bounds and tunes the server.
type Config struct {
	Addr           string // listen address
	MaxFrameBytes  int32  // largest request accepted (socket.request.max.bytes)
	MaxConnections int    // client connections beyond this are closed at once; other nodes' links are counted apart, to the same bound
	// MaxConnectionsPerIP bounds the client connections from one address
	// (Kafka's max.connections.per.ip; 0: no bound; negative: none, as
	// Kafka's 0), except for the addresses in ConnectionsPerIPOverrides,
	// which have their own (max.connections.per.ip.overrides; 0 refuses
	// the address).
	MaxConnectionsPerIP       int
	ConnectionsPerIPOverrides map[netip.Addr]int
	IdleTimeout               time.Duration // a connection with no request for this long is closed
	ReadTimeout               time.Duration // a started frame must arrive within this, and an answer be taken
	MaxInFlight               int           // pipelined requests per connection being worked on
	MaxElements               int           // topics x partitions (or similar) in one request
	MaxMessageBytes           int           // largest record batch accepted (message.max.bytes)
	LeaderWait                time.Duration // Metadata and FindCoordinator wait this long for an election to end
	// CutOffAfter is how long a node goes without knowing a leader before
	// it takes itself to be cut off from the majority (elections take
	// well under a second or two): Metadata and FindCoordinator then
	// reset the client's connection instead of answering "no leader", so
	// the client asks another node at once, and Produce and Fetch answer
	// NOT_LEADER_OR_FOLLOWER without waiting (see cutoff.go).
	// 0: 2 s; negative: never (answer "no leader" after LeaderWait).
	CutOffAfter time.Duration
	// StopDrain bounds how long a stopping server waits for its
	// connections to answer what they read (default 1 s); see Serve.
	StopDrain         time.Duration
	AutoCreateTopics  bool
	DefaultPartitions int32
	// Groups serves the consumer-group APIs; without it they are not offered.
	Groups *coordinator.Coordinator
	// Transactions serves the transaction APIs (with the embedded backend,
	// which stores transaction markers); without it a transactional
	// producer is refused.
	Transactions *txn.Coordinator
	// MarkerRouter, when set, is the coordinator's txn.Markers (the Iggy
	// backend): it writes markers through the partitions' leaders over
	// this server's links to other nodes.
	MarkerRouter *MarkerRouter
	// Quotas keeps client quotas; nil uses the backend's if it has them,
	// and without any the quota APIs are not offered.
	Quotas QuotaStore
	// QuotaWindow is one sample of the quota rate (Kafka's
	// quota.window.size.seconds, 1 s); rates are measured over 11 of them.
	QuotaWindow time.Duration
	// TLS, when set, makes the listener speak TLS only (TLS 1.2+).
	TLS *tls.Config
	// SASL, when set, requires clients to authenticate (auth.go).
	SASL *SASL
	// Listeners, when set, are the Kafka listeners instead of the one on
	// Addr with TLS and SASL above (listeners.go); SASL then holds the
	// mechanisms of those that authenticate.
	Listeners []Listener
	// Credentials stores SCRAM users; with it DescribeUserScramCredentials
	// and AlterUserScramCredentials are offered.
	Credentials Credentials
	// ACLs stores ACL bindings; with it DescribeAcls, CreateAcls and
	// DeleteAcls are offered (answered SECURITY_DISABLED without an
	// Authorizer, as Kafka does).
	ACLs ACLStore
	// Authorizer, when set, authorizes every request with the ACLs
	// (authorize.go).
	Authorizer *authz.Authorizer
	Logger     *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = 100 << 20
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 10000
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 10 * time.Minute
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 32
	}
	if c.MaxElements <= 0 {
		c.MaxElements = 100000
	}
	if c.LeaderWait <= 0 {
		c.LeaderWait = 5 * time.Second
	}
	if c.CutOffAfter == 0 {
		c.CutOffAfter = 2 * time.Second
	}
	if c.StopDrain <= 0 {
		c.StopDrain = time.Second
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 1048588
	}
	if c.QuotaWindow <= 0 {
		c.QuotaWindow = time.Second
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SASL != nil && c.SASL.FailureDelay < 0 {
		c.SASL.FailureDelay = 0
	}
}

// Cluster is what the gateway needs to know about the kgate cluster;
// *cluster.Node provides it.
type Cluster interface {
	Self() cluster.NodeInfo
	Brokers() []cluster.NodeInfo
	// LiveNodes is every node gossip sees alive, with none left out for
	// failover's sake (see cluster.Node.LiveNodes), and its version.
	LiveNodes() ([]cluster.NodeInfo, uint64)
	LeaderID() (int32, bool)
	// AwaitLeader is LeaderID, waiting (bounded by ctx) while an election runs.
	AwaitLeader(ctx context.Context) (int32, bool)
	// ServingLeader is the leader to send clients to: known, in contact,
	// with a known address and done catching up.
	ServingLeader() (cluster.NodeInfo, bool)
	// AwaitServingLeader is ServingLeader, waiting (bounded by ctx) while
	// an election runs or the new leader catches up.
	AwaitServingLeader(ctx context.Context) (cluster.NodeInfo, bool)
	// AwaitFreshLeader is AwaitServingLeader on word from the leader newer
	// than the call (a follower that has not yet seen its leader die must
	// not name it).
	AwaitFreshLeader(ctx context.Context) (cluster.NodeInfo, bool)
	// LeaderlessFor is how long this node has known no leader (0 while
	// it knows one).
	LeaderlessFor() time.Duration
	// CutOff reports whether this node stopped leading because a majority
	// stopped answering it, and has known no leader since.
	CutOff() bool
	// ConfirmLeader reports whether this node still leads, confirmed by a
	// majority after the call (false once ctx ends).
	ConfirmLeader(ctx context.Context) bool
	// LeaderEpoch is the partitions' leader epoch; it grows with every
	// election.
	LeaderEpoch() int32
	// CaughtUp reports whether this node has applied every entry it knows
	// to be committed; AwaitCaughtUp waits (bounded by ctx) until it has
	// applied those committed when called.
	CaughtUp() bool
	AwaitCaughtUp(ctx context.Context) bool
	ClusterID() string
	// Replicas are the Raft voters; ISR those of them in contact.
	Replicas() (replicas, isr []int32)
	// PeerListener yields the connections other nodes open to forward
	// requests to this one (nil: none arrive).
	PeerListener() net.Listener
	// DialPeer opens a connection for forwarded requests to another node.
	DialPeer(ctx context.Context, to cluster.NodeInfo) (net.Conn, error)
	// AppliedIndex is the index of the last log entry this node applied.
	AppliedIndex() uint64
	// FeatureLevel is the cluster's feature level as this node has
	// applied it (ApiVersions' finalized kgate.version).
	FeatureLevel() fsm.Level
}

// Server is the Kafka listener.
type Server struct {
	cfg     Config
	log     *slog.Logger
	backend Backend
	cluster Cluster
	groups  *coordinator.Coordinator
	txns    *txn.Coordinator
	// txnBackend is the backend's transaction view, nil when it has none.
	txnBackend TransactionalBackend
	// frames holds produce request buffers for reuse; nil unless the
	// backend is a ProduceDataReleaser.
	frames *framePool
	// answerBufs holds the encoding buffers of answers larger than a
	// connection keeps (connBufferBytes).
	answerBufs sync.Pool // of *[]byte
	// readerInto is the backend's reading into given buffers, nil when it
	// has none; readPools holds fetches' read buffers between fetches
	// (readArena).
	readerInto ReaderInto
	readPools  readPools
	// batchBufs holds the TLS record batchers' buffers between answers,
	// so an idle TLS connection holds none (recordBatcher).
	batchBufs sync.Pool // of *[]byte
	// readBufs and writeBufs hold the connections' read and write
	// buffers while they idle (connReader, conn.write).
	readBufs  sync.Pool // of *bufio.Reader
	writeBufs writeBufPool
	quotas    QuotaStore
	throttle  throttler
	handlers  map[int16]handler

	// alterMu serializes topic config changes: IncrementalAlterConfigs
	// reads a topic's configs and writes the whole new set, so two changes
	// must not interleave; they all run on the leader (followers forward).
	alterMu sync.Mutex
	// aclMu serializes ACL deletions on the leader (delete_acls.go).
	aclMu sync.Mutex
	fwd   forwarder

	metrics *metrics

	lns []boundListener
	// listening: Listen bound every listener and Unlisten has not closed
	// them since (/readyz waits for it).
	listening atomic.Bool
	mu        sync.Mutex
	cut       cutOffWatch
	conns     map[*conn]struct{}
	// clients counts the conns of clients, which MaxConnections bounds;
	// other nodes' links are counted apart (peers), under the same bound:
	// Kafka admits inter-broker connections past max.connections, so a
	// client flood cannot cut a follower off from forwarding to the leader.
	clients, peers int
	perIP          map[netip.Addr]int // client connections by remote address, when bounded
	wg             sync.WaitGroup
}

// New makes a server over a backend.
func New(cfg Config, backend Backend, cluster Cluster) *Server {
	cfg.setDefaults()
	if len(cfg.Listeners) == 0 {
		cfg.Listeners = []Listener{{Addr: cfg.Addr, TLS: cfg.TLS, SASL: cfg.SASL != nil}}
	}
	s := &Server{cfg: cfg, log: cfg.Logger, backend: backend, cluster: cluster, groups: cfg.Groups, txns: cfg.Transactions, quotas: cfg.Quotas,
		throttle: throttler{window: cfg.QuotaWindow, now: time.Now}, conns: map[*conn]struct{}{}, metrics: newMetrics()}
	s.txnBackend, _ = backend.(TransactionalBackend)
	s.readerInto, _ = backend.(ReaderInto)
	if cfg.MarkerRouter != nil {
		cfg.MarkerRouter.srv.Store(s)
	}
	if r, ok := backend.(ProduceDataReleaser); ok && r.ReleasesProduceData() {
		s.frames = new(framePool)
	}
	if s.quotas == nil {
		s.quotas, _ = backend.(QuotaStore)
	}
	s.handlers = s.handlerTable()
	return s
}

// Listen binds the Kafka listeners.
func (s *Server) Listen() error {
	for i := range s.cfg.Listeners {
		l := &s.cfg.Listeners[i]
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			s.Unlisten()
			if l.Name != "" {
				return fmt.Errorf("listener %s: %w", l.Name, err)
			}
			return err
		}
		if l.TLS != nil {
			ln = tlsListener{Listener: ln, config: l.TLS, bufs: &s.batchBufs}
		}
		s.lns = append(s.lns, boundListener{Listener: l, ln: ln})
	}
	s.listening.Store(true)
	return nil
}

// Listening reports whether the Kafka listeners are bound (Listen) and not
// closed again by Unlisten.
func (s *Server) Listening() bool { return s.listening.Load() }

// Unlisten closes what Listen bound, so that a later Listen binds it again:
// a starting node checks its ports at once but takes no client until it
// can serve.
func (s *Server) Unlisten() {
	s.listening.Store(false)
	for _, b := range s.lns {
		b.ln.Close()
	}
	s.lns = nil
}

// Addr is the bound address of the first listener.
func (s *Server) Addr() net.Addr { return s.lns[0].ln.Addr() }

// ListenerAddr is the bound address of the named listener; nil if none.
func (s *Server) ListenerAddr(name string) net.Addr {
	for _, b := range s.lns {
		if b.Name == name {
			return b.ln.Addr()
		}
	}
	return nil
}

// Serve accepts connections, of clients and of other nodes forwarding
// requests, until ctx ends, then closes them all and waits.
func (s *Server) Serve(ctx context.Context) error {
	peers := s.cluster.PeerListener()
	go func() {
		<-ctx.Done()
		for _, b := range s.lns {
			b.ln.Close()
		}
		if peers != nil {
			peers.Close()
		}
	}()
	// Connections outlive ctx by the drain below.
	connCtx, stopConns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConns()
	if peers != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.accept(ctx, connCtx, peers, nil)
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.cut.watch(ctx, s.cutOffNow)
	}()
	var accepting sync.WaitGroup
	for _, b := range s.lns {
		accepting.Add(1)
		go func() {
			defer accepting.Done()
			s.accept(ctx, connCtx, b.ln, b.Listener)
		}()
	}
	accepting.Wait()
	s.drain()
	stopConns()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.fwd.close()
	return nil
}

// drain closes each connection once it has answered every request it read,
// and at least one past the connection's set-up (ApiVersions, SASL): a
// client whose first request after the set-up gets no answer cannot tell
// whether it took effect, and franz-go fails it rather than retry (a
// connection that answered one before is retried on EOF). A connection
// opened just before the stop thus gets its first answer (after a leave:
// NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, the new leader's metadata; on
// a full disk KAFKA_STORAGE_ERROR). Kafka's controlled shutdown serves the
// same way, with its partitions led elsewhere, before it closes every
// connection (SocketServer.stopProcessingRequests drops what it has not
// answered). After StopDrain the connections left are closed, those
// without an answer past the set-up with a reset, which franz-go retries
// on another broker where it does not retry a clean close.
func (s *Server) drain() {
	deadline := time.Now().Add(s.cfg.StopDrain)
	for {
		left := 0
		s.mu.Lock()
		for c := range s.conns {
			if c.answered.Load() > 0 && c.unanswered.Load() == 0 {
				c.nc.Close()
			} else {
				left++
			}
		}
		if left > 0 && time.Now().After(deadline) {
			for c := range s.conns {
				if tc := tcpConnOf(c.nc); tc != nil && c.answered.Load() == 0 {
					tc.SetLinger(0)
				}
			}
		}
		s.mu.Unlock()
		if left == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// accept serves one listener's connections until ctx ends, each until
// connCtx ends; a nil listener marks those of other nodes, whose requests
// are forwarded ones.
func (s *Server) accept(ctx, connCtx context.Context, ln net.Listener, l *Listener) {
	var tempDelay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				tempDelay = max(5*time.Millisecond, min(2*tempDelay, time.Second))
				time.Sleep(tempDelay)
				continue
			}
			s.log.Error("accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		tempDelay = 0
		ip, bounded := s.perIPBound(l, nc)
		s.mu.Lock()
		open := s.clients
		if l == nil {
			open = s.peers
		}
		if open >= s.cfg.MaxConnections {
			s.mu.Unlock()
			s.metrics.refused.Inc()
			s.log.Warn("connection limit reached; closing new connection", "remote", nc.RemoteAddr().String(), "limit", s.cfg.MaxConnections)
			nc.Close()
			continue
		}
		if bounded >= 0 && s.perIP[ip] >= bounded {
			s.mu.Unlock()
			s.metrics.refused.Inc()
			s.log.Warn("connection limit of the address reached; closing new connection", "remote", nc.RemoteAddr().String(), "limit", bounded)
			nc.Close()
			continue
		}
		c := newConn(s, nc)
		c.stopping = ctx
		c.peer, c.listener = l == nil, l
		s.conns[c] = struct{}{}
		if c.peer {
			s.peers++
		} else {
			s.clients++
		}
		if bounded >= 0 {
			if s.perIP == nil {
				s.perIP = map[netip.Addr]int{}
			}
			s.perIP[ip]++
		}
		s.mu.Unlock()
		s.metrics.accepted.Inc()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if c.handshake(connCtx) {
				c.serve(connCtx)
			}
			s.mu.Lock()
			delete(s.conns, c)
			if c.peer {
				s.peers--
			} else {
				s.clients--
			}
			if bounded >= 0 {
				if s.perIP[ip]--; s.perIP[ip] <= 0 {
					delete(s.perIP, ip)
				}
			}
			s.mu.Unlock()
		}()
	}
}

// perIPBound returns a client connection's remote address and how many
// connections that address may have open (Kafka's max.connections.per.ip
// and its overrides), or -1 when it is not bounded: other nodes' links,
// or no bound configured.
func (s *Server) perIPBound(l *Listener, nc net.Conn) (netip.Addr, int) {
	if l == nil || (s.cfg.MaxConnectionsPerIP <= 0 && len(s.cfg.ConnectionsPerIPOverrides) == 0) {
		return netip.Addr{}, -1
	}
	ap, err := netip.ParseAddrPort(nc.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, -1
	}
	ip := ap.Addr().Unmap()
	if n, ok := s.cfg.ConnectionsPerIPOverrides[ip]; ok {
		return ip, n
	}
	switch {
	case s.cfg.MaxConnectionsPerIP < 0:
		return ip, 0
	case s.cfg.MaxConnectionsPerIP == 0:
		return ip, -1
	}
	return ip, s.cfg.MaxConnectionsPerIP
}

// Request is one decoded request as handlers see it.
type Request struct {
	Header
	Body   kmsg.Request
	Remote string
	// Forwarded: another node passed this request on (it arrived over the
	// cluster's own link); it is answered here, never forwarded again.
	Forwarded bool
	sess      *session // the connection's authentication state
	// release hands the request's frame back for reuse (Produce with a
	// ProduceDataReleaser backend; nil otherwise), once nothing reads
	// Body's bytes any more.
	release func()
	// hangUp closes the request's connection (Produce only; nil otherwise).
	hangUp func()
}

// done says the handler is through with the request's bytes.
func (r *Request) done() {
	if r.release != nil {
		r.release()
	}
}

// Reply is a handler's answer: a response now, one later, or none (acks=0).
type Reply struct {
	resp       kmsg.Response
	later      chan kmsg.Response
	none       bool
	close      bool // close the connection instead of answering
	closeAfter bool // answer, then close the connection (failed authentication)
	// done is closed once the request has taken effect (nil: it has when
	// the handler returns); see order.go.
	done chan struct{}
	// answered is when a later answer was ready; set before it is sent
	// on later.
	answered *time.Time
	// release, when set, is called once the answer is encoded (its
	// buffers may then be reused; see readArena).
	release func()
}

func now(resp kmsg.Response) Reply { return Reply{resp: resp} }

// later runs fn on its own goroutine so slow answers (commits, long polls)
// overlap; the connection still writes answers in request order.
func later(fn func() kmsg.Response) Reply {
	ch := make(chan kmsg.Response, 1)
	done := make(chan struct{})
	answered := new(time.Time)
	go func() {
		resp := fn()
		*answered = time.Now()
		close(done)
		ch <- resp
	}()
	return Reply{later: ch, done: done, answered: answered}
}

type handler struct {
	min, max int16
	fn       func(ctx context.Context, r *Request) Reply
}

// handshake runs the TLS handshake (bounded by ReadTimeout) and sets up
// the connection's authentication; false means the connection is closed.
func (c *conn) handshake(ctx context.Context) bool {
	tc, ok := c.nc.(*tls.Conn)
	if ok {
		c.nc.SetDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
		hctx, cancel := context.WithTimeout(ctx, c.s.cfg.ReadTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if b, ok := tc.NetConn().(*recordBatcher); ok && err == nil {
			b.handshook.Store(true)
		}
		c.nc.SetDeadline(time.Time{})
		if err != nil {
			// A plaintext client on a TLS listener ends here too.
			c.logger().Info("closing connection: TLS handshake failed", "err", err)
			c.nc.Close()
			return false
		}
	} else {
		tc = nil
	}
	if c.peer {
		// Another node's link: it carries requests its clients already
		// authenticated for there.
		c.sess.authed = true
		return true
	}
	c.s.startSession(&c.sess, tc, c.listener)
	return true
}

// awaitLeader waits, bounded by LeaderWait, for a leader clients can be
// sent to (Cluster.ServingLeader).
func (s *Server) awaitLeader(ctx context.Context) {
	if _, ok := s.cluster.ServingLeader(); ok {
		return
	}
	ctx, cancel := s.leaderWait(ctx)
	defer cancel()
	s.cluster.AwaitServingLeader(ctx)
}

// servesAsLeader reports whether this node is the serving leader and has
// applied everything committed: it may name itself at once.
func (s *Server) servesAsLeader() bool {
	info, ok := s.cluster.ServingLeader()
	return ok && info.ID == s.cluster.Self().ID && s.cluster.CaughtUp()
}

// confirmedLeader reports whether this node, the serving leader when the
// request came, still leads by a majority's word (bounded by LeaderWait):
// a leader cut off from the others believes it leads until its lease runs
// out, and a client it named itself to would keep that answer for its
// metadata backoff (franz-go: 5 s).
func (s *Server) confirmedLeader(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaderWait)
	defer cancel()
	return s.cluster.ConfirmLeader(ctx)
}

// awaitFreshLeader is awaitLeader on word from the leader that came after
// the call (Cluster.AwaitFreshLeader): what Metadata and FindCoordinator
// name on a follower.
func (s *Server) awaitFreshLeader(ctx context.Context) {
	ctx, cancel := s.leaderWait(ctx)
	defer cancel()
	s.cluster.AwaitFreshLeader(ctx)
}

// leaderWait bounds a wait for a leader. The wait is counted from when the
// leader went, not per request: a node leaderless for longer than
// LeaderWait is most likely cut off from the majority, and each request
// parked in turn on a client's connection would hold that client here
// (seen in make chaos: a deposed, isolated leader kept its producers for
// the whole partition). Answering at once sends the client to another node.
// The wait also ends once the node counts as cut off (CutOffAfter), even
// if it still knew a leader when the wait began.
func (s *Server) leaderWait(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, max(s.cfg.LeaderWait-s.cluster.LeaderlessFor(), 0))
	return s.untilCutOff(ctx, cancel)
}

// awaitCaughtUp waits, bounded by LeaderWait, for this node to apply what
// is committed (a restarted node replaying its log).
func (s *Server) awaitCaughtUp(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaderWait)
	defer cancel()
	s.cluster.AwaitCaughtUp(ctx)
}
