// Package admin serves kgate's operator HTTP API: cluster membership,
// topics, consumer groups with lag, health and readiness, Prometheus
// metrics, and a status page at /.
package admin

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/internal/version"
)

// uiFiles is the status page: plain HTML, CSS and JavaScript that read the
// JSON endpoints below, so the page shows nothing the API does not.
//
//go:embed ui
var uiFiles embed.FS

func statusPage(w http.ResponseWriter, r *http.Request) {
	http.ServeFileFS(w, r, uiFiles, "ui/index.html")
}

// Config is what the admin server reads from.
type Config struct {
	Addr    string
	Node    *cluster.Node
	State   *fsm.FSM
	Backend gateway.Backend // topics and their offsets, whichever backend holds them
	// Metrics is the node's registry, served at /metrics; the server adds
	// its own collectors (build info, groups and lag). Nil: a fresh one.
	Metrics *prometheus.Registry
	Logger  *slog.Logger
	// Ready lists what else /readyz needs besides a leader and an applied
	// log, such as a reachable Iggy server.
	Ready []ReadyCheck
}

// ReadyCheck is one condition of readiness: Check returns why it fails.
type ReadyCheck struct {
	Name  string
	Check func(context.Context) error
}

// readyCheckTimeout bounds each check, well under a probe's timeout.
const readyCheckTimeout = 800 * time.Millisecond

// Server is the admin HTTP listener.
type Server struct {
	node    *cluster.Node
	state   *fsm.FSM
	backend gateway.Backend
	ready   []ReadyCheck
	log     *slog.Logger
	srv     *http.Server
	ln      net.Listener
	tls     *tls.Config // nil: plain HTTP
}

// Option adjusts the admin server.
type Option func(*options)

type options struct {
	token          string
	pprof          bool
	tls            *tls.Config
	requireCertFor bool
}

// WithTLS serves HTTPS only. With clientCerts the configuration asks for
// client certificates without requiring them at the handshake (so probes
// reach /healthz and /readyz without one), and every other path wants a
// verified one: 401 otherwise, as for a missing token.
func WithTLS(c *tls.Config, clientCerts bool) Option {
	return func(o *options) { o.tls, o.requireCertFor = c, clientCerts }
}

// WithToken requires "Authorization: Bearer <token>" on every path but
// /healthz and /readyz (which probes reach); others get 401.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithPprof serves Go profiles under /debug/pprof/ (off by default: a
// profile exposes memory contents and costs CPU).
func WithPprof() Option { return func(o *options) { o.pprof = true } }

// New makes the admin server for a node.
func New(cfg Config, opts ...Option) *Server {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{node: cfg.Node, state: cfg.State, backend: cfg.Backend, ready: cfg.Ready, log: cfg.Logger}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	cfg.Metrics.MustRegister(stateCollector{state: cfg.State, backend: cfg.Backend})
	// Probes reach /healthz and /readyz without the token; everything else
	// (the status page and /metrics included) needs it when one is set.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	private := http.NewServeMux()
	private.Handle("GET /metrics", metricsHandler(cfg.Metrics, s.log.Warn))
	private.HandleFunc("GET /{$}", statusPage)
	private.Handle("GET /ui/", http.FileServerFS(uiFiles))
	private.HandleFunc("GET /v1/version", s.version)
	private.HandleFunc("GET /v1/cluster", s.cluster)
	private.HandleFunc("GET /v1/topics", s.topics)
	private.HandleFunc("GET /v1/groups", s.listGroups)
	private.HandleFunc("GET /v1/groups/{id}", s.group)
	private.HandleFunc("POST /v1/leave", s.leave)
	private.HandleFunc("GET /v1/snapshot", s.snapshot)
	if o.pprof {
		private.HandleFunc("/debug/pprof/", pprof.Index)
		private.HandleFunc("/debug/pprof/profile", pprof.Profile)
		// An execution trace shows where a Raft round waits (write, fsync,
		// send, apply), which a CPU profile cannot.
		private.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	var guarded http.Handler = requireToken(o.token, private)
	if o.requireCertFor {
		guarded = requireClientCert(guarded)
	}
	mux.Handle("/", guarded)
	// Requests are small and answers may stream for long (a snapshot, a
	// profile): bound reading and keep-alive idling, not writing.
	s.srv = &http.Server{Addr: cfg.Addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	s.tls = o.tls
	return s
}

// requireClientCert lets a request through only over a connection whose
// client presented a certificate the client CA verified.
func requireClientCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a client certificate of the admin client CA is required"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Addr is the bound address (after Listen).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// requireToken lets a request through only with the bearer token; an empty
// token means no check.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kgate"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Listen binds the address.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return err
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	return nil
}

// Serve answers until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.srv.Shutdown(shut)
	}()
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, version.Get())
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.node.HaltErr(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "halted", "error": err.Error()})
		return
	}
	if !s.node.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready",
			"reason": "no leader known, or this node has not applied the log up to the commit index"})
		return
	}
	for _, c := range s.ready {
		ctx, cancel := context.WithTimeout(r.Context(), readyCheckTimeout)
		err := c.Check(ctx)
		cancel()
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": c.Name + ": " + err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// clusterView is the JSON of GET /v1/cluster.
type clusterView struct {
	ClusterID string               `json:"cluster_id"`
	LeaderID  *int32               `json:"leader_id"`
	Nodes     []cluster.MemberInfo `json:"nodes"`
	// FeatureLevel is the cluster's feature level as this node has applied
	// it; MaxFeatureLevel the highest this node's binary supports.
	FeatureLevel    fsm.Level `json:"feature_level"`
	MaxFeatureLevel fsm.Level `json:"max_feature_level"`
}

func (s *Server) cluster(w http.ResponseWriter, _ *http.Request) {
	v := clusterView{ClusterID: s.node.ClusterID(), Nodes: s.node.Members(),
		FeatureLevel: s.state.FeatureLevel(), MaxFeatureLevel: fsm.LatestLevel}
	if id, ok := s.node.LeaderID(); ok {
		v.LeaderID = &id
	}
	writeJSON(w, http.StatusOK, v)
}

type groupView struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Generation   int32  `json:"generation"`
	Members      int    `json:"members"`
}

func (s *Server) listGroups(w http.ResponseWriter, _ *http.Request) {
	out := []groupView{}
	for _, g := range s.state.Groups() {
		v := s.state.Group(g.ID)
		if v == nil {
			continue
		}
		out = append(out, groupView{Group: v.ID, State: v.State.String(), ProtocolType: v.ProtocolType, Generation: v.Generation, Members: len(v.Members)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

// leaveWithin bounds how long POST /v1/leave waits for the leader to remove
// the node, within kgate leave's default --timeout (10 s).
const leaveWithin = 8 * time.Second

func (s *Server) leave(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), leaveWithin)
	defer cancel()
	if err := s.node.Leave(ctx); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "left; stop the process now"})
}
