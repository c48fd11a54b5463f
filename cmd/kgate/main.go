// Command kgate is a Kafka-protocol gateway: `kgate serve` runs one node.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/coordinator"
	"github.com/kgate/kgate/coordinator/txn"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/admin"
	"github.com/kgate/kgate/gateway/certs"
	"github.com/kgate/kgate/gateway/embedded"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggybackend"
	"github.com/kgate/kgate/internal/version"
)

const usage = `usage: kgate <command> [flags]

  serve              run a node (kgate serve -h lists its flags)
  version            print this binary's version
  status             the cluster: leader and nodes          (kgate status -h)
  topics             topics and partitions
  groups [GROUP]     consumer groups; one group's members, assignment and lag
  leave NODE         make a node leave the cluster gracefully
  snapshot save FILE     copy a Raft snapshot out of a running node
  snapshot restore FILE  seed a new node's empty data directory from one
  certs              a CA and certificates for a test cluster   (kgate certs -h)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
	case "version", "--version", "-version":
		os.Exit(runVersion(os.Stdout))
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		os.Exit(0)
	case "certs":
		if err := runCerts(os.Args[2:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "kgate certs:", err)
			os.Exit(2)
		}
		return
	default:
		if run, ok := commands[os.Args[1]]; ok {
			os.Exit(run(os.Args[2:], os.Stdout, os.Stderr))
		}
		fmt.Fprintf(os.Stderr, "kgate: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	cfg, err := parseConfig(os.Args[2:], os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kgate:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "kgate:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, cfg *config) error {
	log := newLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat).With("node", cfg.NodeID)
	log.Info("kgate starting", "version", version.Get().Version)

	state, err := fsm.Open(fsm.Options{Dir: cfg.DataDir, SegmentBytes: cfg.SegmentBytes, Logger: log,
		References: cfg.PartitionStorage == "raft-log"})
	if err != nil {
		return fmt.Errorf("open data dir %s: %w", cfg.DataDir, err)
	}
	defer state.Close()
	hup := notifyHangup(&cfg.securityConfig, cfg.listenersConfig.ownTLS())
	if hup != nil {
		defer signal.Stop(hup)
	}
	var gossipKeys [][]byte
	if cfg.GossipKeyFile != "" {
		if gossipKeys, err = loadGossipKeys(cfg.GossipKeyFile); err != nil {
			return err
		}
	}
	linkTLS, linkReloader, err := linkSecurity(&cfg.securityConfig, log)
	if err != nil {
		return err
	}
	node, err := cluster.Start(cluster.Config{
		NodeID:             int32(cfg.NodeID),
		DataDir:            cfg.DataDir,
		RaftAddr:           cfg.AdvertiseRaftAddr,
		RaftBindAddr:       cfg.RaftAddr,
		KafkaAddr:          cfg.AdvertiseKafkaAddr,
		GossipAddr:         cfg.AdvertiseGossipAddr,
		GossipBindAddr:     cfg.GossipAddr,
		GossipKeys:         gossipKeys,
		LinkTLS:            linkTLS,
		Listeners:          cfg.listenersConfig.advertised(),
		AdminAddr:          cfg.AdminAddr,
		Join:               cfg.joinList(),
		DeadNodeReapAfter:  cfg.DeadNodeReapAfter,
		RejoinInterval:     cfg.RejoinInterval,
		BootstrapExpect:    cfg.BootstrapExpect,
		Fsync:              cfg.Fsync,
		HeartbeatTimeout:   cfg.RaftHeartbeat,
		ElectionTimeout:    cfg.RaftElection,
		SnapshotEvery:      cfg.RaftSnapshotEvery,
		DigestEvery:        cfg.RaftDigestEvery,
		TrailingLogs:       cfg.RaftTrailingLogs,
		LogSegmentBytes:    cfg.RaftSegmentBytes,
		RewritePinnedBytes: cfg.RaftRetainedBytes,
		Logger:             log,
	}, state)
	if err != nil {
		return err
	}
	defer node.Shutdown()

	// The node's metrics registry: every package's collector, nothing global.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		// How long runnable goroutines waited to run, and the GC's
		// stop-the-world pauses: what a request's latency owes to the
		// runtime and to the machine's load rather than to kgate's work.
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/(latencies|pauses/total/gc):seconds$`)},
	)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	local := embedded.New(node, state, log)
	var backend gateway.Backend = local
	var ready []admin.ReadyCheck
	if cfg.Backend == "embedded" {
		reg.MustRegister(local)
	}
	if cfg.Backend == "iggy" {
		if cfg.IggyToken == "" && cfg.IggyUser == "iggy" && cfg.IggyPassword == "iggy" {
			log.Warn("connecting to Iggy with the default iggy/iggy credentials; set --iggy-user and --iggy-password-file (or --iggy-token)")
		}
		ib, client, err := startIggy(ctx, cfg, node, state, local, reg, log)
		if err != nil {
			return err
		}
		defer ib.Close()
		backend = ib
		ready = append(ready, admin.ReadyCheck{Name: "iggy at " + cfg.IggyAddr, Check: client.Ping})
	}
	groups := coordinator.New(coordinator.Config{
		InitialRebalanceDelay: initialRebalanceDelay(cfg.GroupInitialDelay),
		MinSessionTimeout:     cfg.GroupMinSession,
		MaxSessionTimeout:     cfg.GroupMaxSession,
		MaxRebalanceTimeout:   cfg.GroupMaxRebalance,
		OffsetsRetention:      cfg.OffsetsRetention,
		MaxGroups:             cfg.MaxGroups,
		MaxGroupMembers:       cfg.MaxGroupMembers,
		MaxMembers:            cfg.MaxMembers,
		MaxMetadataBytes:      cfg.MaxMemberMetadata,
		Logger:                log,
	}, node, state)
	// Embedded: markers go into kgate's own log, within the FSM. Iggy: the
	// coordinator writes them into the Iggy partitions (txn.Markers).
	txnCfg := txn.Config{MaxTimeout: cfg.MaxTxnTimeout, ExpiryCheck: cfg.TxnAbortCheck, IDExpiration: cfg.TxnIDExpiration,
		MaxGroups: cfg.MaxGroups, Logger: log}
	var markers *gateway.MarkerRouter
	if ib, ok := backend.(*iggybackend.Backend); ok {
		// Through each partition's leader (gateway/txn_markers_route.go).
		markers = gateway.NewMarkerRouter(ib)
		txnCfg.Markers = markers
	}
	txns := txn.New(txnCfg, node, state)
	perIPOverrides, err := resolveConnsPerIPOverrides(ctx, cfg.ConnsPerIPOverrides)
	if err != nil {
		return err
	}
	gcfg := gateway.Config{
		Addr:                      cfg.KafkaAddr,
		MaxFrameBytes:             int32(cfg.MaxFrameBytes),
		MaxMessageBytes:           cfg.MaxMessageBytes,
		MaxConnections:            cfg.MaxConnections,
		MaxConnectionsPerIP:       connsPerIP(cfg.MaxConnsPerIP),
		ConnectionsPerIPOverrides: perIPOverrides,
		IdleTimeout:               cfg.IdleTimeout,
		ReadTimeout:               cfg.RequestReadTimeout,
		AutoCreateTopics:          cfg.AutoCreateTopics,
		DefaultPartitions:         int32(cfg.DefaultPartitions),
		Groups:                    groups,
		Transactions:              txns,
		MarkerRouter:              markers,
		Quotas:                    local, // replicated in the FSM with either backend
		Credentials:               local,
		ACLs:                      local,
		Logger:                    log,
		// An election takes a heartbeat timeout or two to start and an
		// election timeout or two to end; a node leaderless for twice
		// that is cut off (gateway.Config.CutOffAfter).
		CutOffAfter: max(2*time.Second, 4*max(cfg.RaftHeartbeat, cfg.RaftElection)),
	}
	var listenerMechs []string
	if cfg.listenersConfig.named != nil {
		listenerMechs = cfg.listenersConfig.allMechanisms()
	}
	certReloader, err := kafkaSecurity(&cfg.securityConfig, &gcfg, listenerMechs, log)
	if err != nil {
		return err
	}
	var listenerReloaders []*certs.Reloader
	gcfg.Listeners, listenerReloaders, err = cfg.listenersConfig.gatewayListeners(certReloader, log)
	if err != nil {
		return err
	}
	srv := gateway.New(gcfg, backend, node)
	// The Kafka ports are checked now but open only once this node can
	// serve (below). A port that accepted meanwhile would hold a client
	// sent here by its broker list (a node restarting after a crash) until
	// the node is ready, seconds later; refused, the client goes on to
	// another node at once. A Kafka broker's port refuses until it serves
	// too.
	if err := srv.Listen(); err != nil {
		return fmt.Errorf("kafka listener on %s: %w", cfg.KafkaAddr, err)
	}
	srv.Unlisten()
	// /readyz says ready only once clients can connect.
	ready = append(ready, admin.ReadyCheck{Name: "kafka listeners", Check: func(context.Context) error {
		if !srv.Listening() {
			return errors.New("not open yet (they open once this node is ready)")
		}
		return nil
	}})
	reg.MustRegister(node, groups, srv)
	adminOpts, adminReloader, err := adminOptions(&cfg.securityConfig, log)
	if err != nil {
		return err
	}
	adm := admin.New(admin.Config{Addr: cfg.AdminAddr, Node: node, State: state, Backend: backend, Metrics: reg, Logger: log, Ready: ready},
		adminOpts...)
	if err := adm.Listen(); err != nil {
		return fmt.Errorf("admin listener on %s: %w", cfg.AdminAddr, err)
	}
	// The admin API serves from here on, while the node waits to be ready:
	// /healthz answers, /readyz says why it is not ready yet.
	adminCtx, stopAdmin := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() {
		stopAdmin()
		bg.Wait()
	}()
	bg.Add(2)
	go func() {
		defer bg.Done()
		reloadOnHangup(adminCtx, hup, &cfg.securityConfig, append([]*certs.Reloader{certReloader, linkReloader, adminReloader}, listenerReloaders...), node, log)
	}()
	go func() {
		defer bg.Done()
		if err := adm.Serve(adminCtx); err != nil {
			log.Error("admin server", "err", err)
		}
	}()

	// Serve once a leader is known and this node has applied the log, so
	// the first answers already see every acknowledged record.
	if err := waitReady(ctx, node, 60*time.Second); node.HaltErr() != nil {
		return fmt.Errorf("stopped: %w", node.HaltErr())
	} else if err != nil && ctx.Err() == nil {
		log.Warn("no leader yet; serving anyway (requests get retriable errors until one is elected)", "err", err)
	}
	if err := srv.Listen(); err != nil {
		return fmt.Errorf("kafka listener on %s: %w", cfg.KafkaAddr, err)
	}
	// Leader-only work runs in the node's leader lifecycle: started after
	// each election's Barrier, stopped and waited for when leadership goes.
	node.RunWhileLeader("group coordinator", groups.Lead)
	node.RunWhileLeader("offset expiry", groups.ExpireOffsets)
	if txns != nil {
		node.RunWhileLeader("transaction expiry", txns.ExpireTransactions)
	}
	if cfg.Backend == "embedded" { // Iggy applies its own message expiry
		node.RunWhileLeader("retention", func(ctx context.Context) error {
			local.RunRetention(ctx, cfg.RetentionCheck)
			return nil
		})
		// Kafka checks every 10 minutes (producer.id.expiration.check.interval.ms).
		expiry := embedded.ProducerExpiry{Expiration: cfg.ProducerIDExpiry, Every: min(10*time.Minute, cfg.ProducerIDExpiry)}
		node.RunWhileLeader("producer expiry", func(ctx context.Context) error {
			local.RunProducerExpiry(ctx, expiry)
			return nil
		})
	}
	log.Info("kgate serving", "kafka", cfg.AdvertiseKafkaAddr, "bootstrap", srv.Addr().String(), "data_dir", cfg.DataDir)
	fmt.Fprintf(os.Stdout, "kgate node %d ready: bootstrap servers %s\n", cfg.NodeID, cfg.AdvertiseKafkaAddr)
	// On SIGTERM the leader hands over first, while its listener still
	// answers (NOT_COORDINATOR / NOT_LEADER_OR_FOLLOWER send clients to the
	// new leader), and only then stops serving.
	srvCtx, stopSrv := context.WithCancel(context.Background())
	defer stopSrv()
	go func() {
		select {
		case <-ctx.Done():
			node.StepDown()
		case <-node.Halted():
			// Fail-stop: this node could not apply a log entry or write
			// its Raft log (a full disk), so its state is not the
			// cluster's. It stops serving and the process exits non-zero;
			// the node's log names the entry or the disk.
		}
		stopSrv()
	}()
	err = srv.Serve(srvCtx)
	stopAdmin()
	bg.Wait()
	if herr := node.HaltErr(); herr != nil {
		log.Error("kgate stopped: this node halted (fail-stop)", "err", herr)
		return fmt.Errorf("stopped: %w", herr)
	}
	log.Info("kgate stopped")
	return err
}

// newLogger is the one logger of a node: kgate's own lines and, through
// it, Raft's and gossip's.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func runVersion(w io.Writer) int {
	v := version.Get()
	fmt.Fprintf(w, "kgate %s (%s", v.Version, v.GoVersion)
	if v.Commit != "" {
		fmt.Fprintf(w, ", commit %s", v.Commit)
		if v.Modified {
			fmt.Fprint(w, "+modified")
		}
	}
	fmt.Fprintln(w, ")")
	return 0
}

func waitReady(ctx context.Context, node *cluster.Node, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !node.Ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-node.Halted():
			return node.HaltErr()
		case <-t.C:
		}
	}
	return nil
}

// startIggy connects the Iggy backend. Wrong credentials stop start-up;
// an unreachable server does not (requests get retriable errors until it
// answers).
func startIggy(ctx context.Context, cfg *config, node *cluster.Node, state *fsm.FSM, local *embedded.Backend, reg prometheus.Registerer, log *slog.Logger) (*iggybackend.Backend, *iggy.Client, error) {
	opts := iggy.Options{
		Addr: cfg.IggyAddr, Username: cfg.IggyUser, Password: cfg.IggyPassword, Token: cfg.IggyToken,
		RequestTimeout: cfg.IggyTimeout, DialTimeout: cfg.IggyTimeout,
	}
	switch cfg.IggyProtocol {
	case "current":
		opts.Dialect = iggy.Current
	case "legacy":
		opts.Dialect = iggy.Legacy
	}
	if cfg.IggyTLS || cfg.IggyTLSCA != "" {
		opts.TLS = &tls.Config{ServerName: cfg.IggyTLSServerName, MinVersion: tls.VersionTLS12}
		if cfg.IggyTLSCA != "" {
			pem, err := os.ReadFile(cfg.IggyTLSCA)
			if err != nil {
				return nil, nil, fmt.Errorf("--iggy-tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, nil, fmt.Errorf("--iggy-tls-ca: no PEM certificates in %s", cfg.IggyTLSCA)
			}
			opts.TLS.RootCAs = pool
		}
	}
	var topics iggybackend.TopicMap
	if cfg.IggyTopicMap != "" {
		m, err := iggybackend.LoadTopicMap(cfg.IggyTopicMap)
		if err != nil {
			return nil, nil, fmt.Errorf("--iggy-topic-map: %w", err)
		}
		topics = m
	}
	client := iggy.NewClient(opts, cfg.IggyConnections)
	reg.MustRegister(client)
	b, err := iggybackend.New(iggybackend.Config{
		Client:          client,
		Stream:          cfg.IggyStream,
		Topics:          topics,
		Nodes:           node,
		InitProducerID:  local.InitProducerID,
		PollInterval:    cfg.IggyPollInterval,
		RequestTimeout:  cfg.IggyTimeout,
		SaveEvery:       uint32(cfg.IggySaveEvery),
		MaxUncompressed: cfg.MaxFrameBytes,
		Txns:            state,
		Log:             log.With("backend", "iggy"),
	})
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, cfg.IggyTimeout+5*time.Second)
	defer cancel()
	if err := b.Start(sctx); err != nil {
		return nil, nil, fmt.Errorf("iggy at %s: %w", cfg.IggyAddr, err)
	}
	log.Info("iggy backend", "addr", cfg.IggyAddr, "stream", cfg.IggyStream, "dialect", b.Dialect())
	return b, client, nil
}

// initialRebalanceDelay is the coordinator's setting for
// --group-initial-rebalance-delay: 0 there means no delay, as Kafka's
// group.initial.rebalance.delay.ms=0, where the coordinator's zero value
// means its default.
func initialRebalanceDelay(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}

// connsPerIP is the gateway's per-address bound for
// --max-connections-per-ip: Kafka's default (2^31-1) is no bound, and 0
// (allowed with overrides) refuses every address without one.
func connsPerIP(flag int) int {
	switch {
	case flag >= math.MaxInt32:
		return 0
	case flag == 0:
		return -1
	}
	return flag
}

// resolveConnsPerIPOverrides turns --max-connections-per-ip-overrides into
// bounds per address, host names resolved now (as a Kafka broker resolves
// them when it reads its configuration).
func resolveConnsPerIPOverrides(ctx context.Context, v string) (map[netip.Addr]int, error) {
	hosts, err := parseConnsPerIPOverrides(v)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]int{}
	for host, n := range hosts {
		if ip, err := netip.ParseAddr(host); err == nil {
			out[ip.Unmap()] = n
			continue
		}
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("--max-connections-per-ip-overrides: resolve %s: %w", host, err)
		}
		for _, ip := range ips {
			out[ip.Unmap()] = n
		}
	}
	return out, nil
}
