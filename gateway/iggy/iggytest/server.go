package iggytest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
)

// Config configures a double.
type Config struct {
	Dialect            iggy.Dialect // iggy.Current (default when 0) or iggy.Legacy
	Addr               string       // default "127.0.0.1:0"
	Username, Password string       // root user, default "iggy"/"iggy"
	Tokens             []string     // valid personal access tokens (login by PAT)
	Logger             *slog.Logger // nil = discard
}

// Server is an in-memory Iggy server double speaking one dialect over TCP.
// All methods are safe for concurrent use.
type Server struct {
	cfg     Config
	dialect iggy.Dialect
	log     *slog.Logger
	tokens  map[string]bool

	life sync.Mutex // serialises Close / Restart

	mu       sync.Mutex // guards the fields below and conn.session / conn.evict
	addr     string
	ln       net.Listener
	conns    map[*conn]struct{}
	logins   int
	requests map[uint32]int
	polls    []PollRequest
	sessions uint64 // last session id handed out
	commits  uint64

	wg    sync.WaitGroup // accept loop + one per connection
	delay atomic.Int64   // time.Duration
	hang  atomic.Bool

	transientAfterCommit atomic.Int64 // SendMessages still to answer 57 after applying them

	dmu  sync.Mutex // guards data
	data *store
}

// Start binds cfg.Addr and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Dialect == 0 {
		cfg.Dialect = iggy.Current
	}
	if cfg.Dialect != iggy.Current && cfg.Dialect != iggy.Legacy {
		return nil, fmt.Errorf("iggytest: unknown dialect %d", uint8(cfg.Dialect))
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Username == "" {
		cfg.Username = "iggy"
	}
	if cfg.Password == "" {
		cfg.Password = "iggy"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg: cfg, dialect: cfg.Dialect, log: log, tokens: map[string]bool{},
		conns: map[*conn]struct{}{}, requests: map[uint32]int{}, data: newStore(cfg.Dialect),
	}
	for _, t := range cfg.Tokens {
		s.tokens[t] = true
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("iggytest: listen %s: %w", cfg.Addr, err)
	}
	s.addr = ln.Addr().String()
	s.listen(ln)
	return s, nil
}

func (s *Server) listen(ln net.Listener) {
	s.mu.Lock()
	s.ln = ln
	s.wg.Add(1)
	s.mu.Unlock()
	s.log.Info("iggy double listening", "addr", s.addr, "dialect", s.dialect.String())
	go s.serve(ln)
}

// Addr is the host:port actually bound (stable across Restart).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Dialect is the dialect the double speaks.
func (s *Server) Dialect() iggy.Dialect { return s.dialect }

// Close stops listening, closes every connection and waits for all the
// double's goroutines. The data stays in memory for Restart. A legacy
// double sends each connection the shutdown frame `08 00 00 00 00 00 00 00`
// (Disconnected, §13.1) first.
func (s *Server) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	ln := s.ln
	s.ln = nil
	conns := s.connList()
	s.mu.Unlock()
	if ln == nil {
		return nil
	}
	err := ln.Close()
	for _, c := range conns {
		if s.dialect == iggy.Legacy {
			_ = c.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_ = c.write(legacyStatus(codeDisconnected, nil))
		}
		c.close()
	}
	s.wg.Wait()
	s.log.Info("iggy double closed", "addr", s.addr)
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Restart listens again on the same address after Close, with the same
// data. Binding is retried for up to 5 s (the port may linger briefly).
func (s *Server) Restart() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	running := s.ln != nil
	s.mu.Unlock()
	if running {
		return errors.New("iggytest: Restart while running")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", s.addr)
		if err == nil {
			s.listen(ln)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("iggytest: restart on %s: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connList returns the open connections; s.mu must be held.
func (s *Server) connList() []*conn {
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// DropConnections closes every open client connection now, without any
// frame; the double keeps listening.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := s.connList()
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// EvictAll invalidates every logged-in session. Current: the session's
// next request (whatever it is) is answered with an Eviction frame with
// reason, then the connection closes. Legacy: those connections are
// closed at once. Connections that are not logged in are left alone.
func (s *Server) EvictAll(reason iggy.EvictionReason) {
	s.mu.Lock()
	var toClose []*conn
	for c := range s.conns {
		if c.session == 0 {
			continue
		}
		if s.dialect == iggy.Current {
			c.evict, c.evicted = reason, true
			c.session = 0
		} else {
			toClose = append(toClose, c)
		}
	}
	s.mu.Unlock()
	for _, c := range toClose {
		c.close()
	}
}

// SetDelay delays every reply by d (a slow server); 0 = none.
func (s *Server) SetDelay(d time.Duration) { s.delay.Store(int64(max(d, 0))) }

// FailSendsAfterCommit makes the next n current-dialect SendMessages be
// applied but answered with status 57 TransientNotCommitted, as a 0.9
// server does when a view change hides whether a write committed. A replay
// of the same request id then gets the empty reply of a duplicate.
func (s *Server) FailSendsAfterCommit(n int) { s.transientAfterCommit.Store(int64(n)) }

// SetHang makes the double read requests but never answer (nor execute)
// them while hang is true. Requests are still counted.
func (s *Server) SetHang(hang bool) { s.hang.Store(hang) }

// Connections is the number of open client connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Logins is the number of successful logins so far.
func (s *Server) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

// Requests is the number of requests received with that command code.
// Current: replicated operations count under the code they map to (login
// under 40 or 45, logout 39, SendMessages 101, ...).
func (s *Server) Requests(code uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[code]
}

// PollRequest is what one PollMessages asked for.
type PollRequest struct {
	Kind  uint8
	Value uint64
	Count uint32
}

// Polls returns the PollMessages requests received so far, in order.
func (s *Server) Polls() []PollRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]PollRequest(nil), s.polls...)
}

func (s *Server) count(code uint32) {
	s.mu.Lock()
	s.requests[code]++
	s.mu.Unlock()
}

func (s *Server) serve(ln net.Listener) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accept", "err", err)
			time.Sleep(5 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.ln != ln {
			s.mu.Unlock()
			nc.Close()
			return
		}
		c := &conn{s: s, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), done: make(chan struct{})}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.log.Debug("connection opened", "remote", nc.RemoteAddr().String())
		go c.run()
	}
}

// conn is one client connection, served by one goroutine.
type conn struct {
	s    *Server
	nc   net.Conn
	br   *bufio.Reader
	done chan struct{}
	once sync.Once
	wmu  sync.Mutex

	// guarded by s.mu (EvictAll reads and writes them)
	session uint64 // Current: the bound session; Legacy: non-zero when logged in
	evict   iggy.EvictionReason
	evicted bool

	// handler goroutine only: metadata-op dedup of the current session (§2)
	lastReq   uint64
	lastReply []byte
	lastSend  uint64 // request id of the session's last SendMessages
}

func (c *conn) run() {
	defer c.s.wg.Done()
	defer func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.close()
		c.s.log.Debug("connection closed", "remote", c.nc.RemoteAddr().String())
	}()
	if c.s.dialect == iggy.Legacy {
		c.s.serveLegacy(c)
	} else {
		c.s.serveCurrent(c)
	}
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}

func (c *conn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

func (c *conn) sessionState() (session uint64, evicted bool, reason iggy.EvictionReason) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.session, c.evicted, c.evict
}

func (c *conn) setSession(v uint64) {
	c.s.mu.Lock()
	c.session = v
	c.s.mu.Unlock()
}

// respond waits the configured delay and writes b, unless the double
// hangs by then. It returns false when the connection is gone.
func (c *conn) respond(b []byte) bool {
	if d := time.Duration(c.s.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		}
	}
	if c.s.hang.Load() {
		return true
	}
	return c.write(b) == nil
}

// readBody reads n bytes, growing the buffer with the bytes received so a
// lying length cannot force a large allocation.
func readBody(rd io.Reader, n int) ([]byte, error) {
	const chunk = 64 << 10
	buf := make([]byte, 0, min(n, chunk))
	for len(buf) < n {
		step := min(n-len(buf), chunk)
		if cap(buf)-len(buf) < step {
			nb := make([]byte, len(buf), min(n, max(2*cap(buf), len(buf)+step)))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(rd, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}
