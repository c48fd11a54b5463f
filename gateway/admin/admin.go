// Package admin serves kgate's operator HTTP API: cluster membership,
// consumer groups, health and readiness.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
)

// Server is the admin HTTP listener.
type Server struct {
	node  *cluster.Node
	state *fsm.FSM
	log   *slog.Logger
	srv   *http.Server
	ln    net.Listener
}

// Option adjusts the admin server.
type Option func(*options)

type options struct {
	token string
	pprof bool
}

// WithToken requires "Authorization: Bearer <token>" on every path but
// /healthz and /readyz (which probes reach); others get 401.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithPprof serves Go profiles under /debug/pprof/ (off by default: a
// profile exposes memory contents and costs CPU).
func WithPprof() Option { return func(o *options) { o.pprof = true } }

// New makes the admin server for a node.
func New(addr string, node *cluster.Node, state *fsm.FSM, log *slog.Logger, opts ...Option) *Server {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{node: node, state: state, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	private := http.NewServeMux()
	private.HandleFunc("GET /v1/cluster", s.cluster)
	private.HandleFunc("GET /v1/groups", s.listGroups)
	private.HandleFunc("POST /v1/leave", s.leave)
	if o.pprof {
		private.HandleFunc("/debug/pprof/", pprof.Index)
		private.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	mux.Handle("/", requireToken(o.token, private))
	s.srv = &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return s
}

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

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if !s.node.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// clusterView is the JSON of GET /v1/cluster.
type clusterView struct {
	ClusterID string               `json:"cluster_id"`
	LeaderID  *int32               `json:"leader_id"`
	Nodes     []cluster.MemberInfo `json:"nodes"`
}

func (s *Server) cluster(w http.ResponseWriter, _ *http.Request) {
	v := clusterView{ClusterID: s.node.ClusterID(), Nodes: s.node.Members()}
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

func (s *Server) leave(w http.ResponseWriter, _ *http.Request) {
	if err := s.node.Leave(); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "left; stop the process now"})
}
