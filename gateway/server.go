// Package gateway is kgate's Kafka wire server: framing, bounds,
// ApiVersions, dispatch by API key (one handler file per API) and the
// Backend seam that Produce, Fetch, ListOffsets and topic admin use.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/coordinator"
)

// Config bounds and tunes the server.
type Config struct {
	Addr              string        // listen address
	MaxFrameBytes     int32         // largest request accepted (socket.request.max.bytes)
	MaxConnections    int           // connections beyond this are closed at once
	IdleTimeout       time.Duration // a connection with no request for this long is closed
	ReadTimeout       time.Duration // a started frame must arrive within this
	MaxInFlight       int           // pipelined requests per connection being worked on
	MaxElements       int           // topics x partitions (or similar) in one request
	MaxMessageBytes   int           // largest record batch accepted (message.max.bytes)
	LeaderWait        time.Duration // Metadata and FindCoordinator wait this long for an election to end
	AutoCreateTopics  bool
	DefaultPartitions int32
	// Groups serves the consumer-group APIs; without it they are not offered.
	Groups *coordinator.Coordinator
	Logger *slog.Logger
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
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 1048588
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Cluster is what the gateway needs to know about the kgate cluster;
// *cluster.Node provides it.
type Cluster interface {
	Self() cluster.NodeInfo
	Brokers() []cluster.NodeInfo
	LeaderID() (int32, bool)
	// AwaitLeader is LeaderID, waiting (bounded by ctx) while an election runs.
	AwaitLeader(ctx context.Context) (int32, bool)
	// ServingLeader is the leader to send clients to: known, in contact,
	// with a known address and done catching up.
	ServingLeader() (cluster.NodeInfo, bool)
	// AwaitServingLeader is ServingLeader, waiting (bounded by ctx) while
	// an election runs or the new leader catches up.
	AwaitServingLeader(ctx context.Context) (cluster.NodeInfo, bool)
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
}

// Server is the Kafka listener.
type Server struct {
	cfg      Config
	log      *slog.Logger
	backend  Backend
	cluster  Cluster
	groups   *coordinator.Coordinator
	handlers map[int16]handler

	// alterMu serializes topic config changes: IncrementalAlterConfigs
	// reads a topic's configs and writes the whole new set, so two changes
	// must not interleave; they all run on the leader (followers forward).
	alterMu sync.Mutex
	fwd     forwarder

	ln    net.Listener
	mu    sync.Mutex
	conns map[*conn]struct{}
	wg    sync.WaitGroup
}

// New makes a server over a backend.
func New(cfg Config, backend Backend, cluster Cluster) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, backend: backend, cluster: cluster, groups: cfg.Groups, conns: map[*conn]struct{}{}}
	s.handlers = s.handlerTable()
	return s
}

// Listen binds the Kafka port.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	s.ln = ln
	return nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until ctx ends, then closes them all and waits.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	var tempDelay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
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
		s.mu.Lock()
		if len(s.conns) >= s.cfg.MaxConnections {
			s.mu.Unlock()
			s.log.Warn("connection limit reached; closing new connection", "remote", nc.RemoteAddr().String(), "limit", s.cfg.MaxConnections)
			nc.Close()
			continue
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve(ctx)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.fwd.close()
	return nil
}

// Request is one decoded request as handlers see it.
type Request struct {
	Header
	Body   kmsg.Request
	Remote string
}

// Reply is a handler's answer: a response now, one later, or none (acks=0).
type Reply struct {
	resp  kmsg.Response
	later chan kmsg.Response
	none  bool
	close bool // close the connection instead of answering
}

func now(resp kmsg.Response) Reply { return Reply{resp: resp} }

// later runs fn on its own goroutine so slow answers (commits, long polls)
// overlap; the connection still writes answers in request order.
func later(fn func() kmsg.Response) Reply {
	ch := make(chan kmsg.Response, 1)
	go func() { ch <- fn() }()
	return Reply{later: ch}
}

type handler struct {
	min, max int16
	fn       func(ctx context.Context, r *Request) Reply
}

// awaitLeader waits, bounded by LeaderWait, for a leader clients can be
// sent to (Cluster.ServingLeader).
func (s *Server) awaitLeader(ctx context.Context) {
	if _, ok := s.cluster.ServingLeader(); ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaderWait)
	defer cancel()
	s.cluster.AwaitServingLeader(ctx)
}

// awaitCaughtUp waits, bounded by LeaderWait, for this node to apply what
// is committed (a restarted node replaying its log).
func (s *Server) awaitCaughtUp(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaderWait)
	defer cancel()
	s.cluster.AwaitCaughtUp(ctx)
}
