// Command kgate is a Kafka-protocol gateway: `kgate serve` runs one node.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/coordinator"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/admin"
	"github.com/kgate/kgate/gateway/embedded"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggybackend"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: kgate serve [flags]   (kgate serve -h lists them)")
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
	var level slog.Level
	level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("node", cfg.NodeID)

	state, err := fsm.Open(fsm.Options{Dir: cfg.DataDir, SegmentBytes: cfg.SegmentBytes, Logger: log})
	if err != nil {
		return fmt.Errorf("open data dir %s: %w", cfg.DataDir, err)
	}
	defer state.Close()
	node, err := cluster.Start(cluster.Config{
		NodeID:            int32(cfg.NodeID),
		DataDir:           cfg.DataDir,
		RaftAddr:          cfg.RaftAddr,
		KafkaAddr:         cfg.AdvertiseKafkaAddr,
		GossipAddr:        cfg.GossipAddr,
		AdminAddr:         cfg.AdminAddr,
		Join:              cfg.joinList(),
		DeadNodeReapAfter: cfg.DeadNodeReapAfter,
		RejoinInterval:    cfg.RejoinInterval,
		BootstrapExpect:   cfg.BootstrapExpect,
		Fsync:             cfg.Fsync,
		HeartbeatTimeout:  cfg.RaftHeartbeat,
		ElectionTimeout:   cfg.RaftElection,
		SnapshotEvery:     cfg.RaftSnapshotEvery,
		TrailingLogs:      cfg.RaftTrailingLogs,
		Logger:            log,
	}, state)
	if err != nil {
		return err
	}
	defer node.Shutdown()

	local := embedded.New(node, state, log)
	var backend gateway.Backend = local
	if cfg.Backend == "iggy" {
		ib, err := startIggy(ctx, cfg, node, local, log)
		if err != nil {
			return err
		}
		defer ib.Close()
		backend = ib
	}
	groups := coordinator.New(coordinator.Config{
		InitialRebalanceDelay: cfg.GroupInitialDelay,
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
	srv := gateway.New(gateway.Config{
		Addr:              cfg.KafkaAddr,
		MaxFrameBytes:     int32(cfg.MaxFrameBytes),
		MaxMessageBytes:   cfg.MaxMessageBytes,
		MaxConnections:    cfg.MaxConnections,
		IdleTimeout:       cfg.IdleTimeout,
		AutoCreateTopics:  cfg.AutoCreateTopics,
		DefaultPartitions: int32(cfg.DefaultPartitions),
		Groups:            groups,
		Logger:            log,
	}, backend, node)
	if err := srv.Listen(); err != nil {
		return fmt.Errorf("kafka listener on %s: %w", cfg.KafkaAddr, err)
	}
	adm := admin.New(cfg.AdminAddr, node, state, log)
	if err := adm.Listen(); err != nil {
		return fmt.Errorf("admin listener on %s: %w", cfg.AdminAddr, err)
	}

	// Serve once a leader is known and this node has applied the log, so
	// the first answers already see every acknowledged record.
	if err := waitReady(ctx, node, 60*time.Second); err != nil && ctx.Err() == nil {
		log.Warn("no leader yet; serving anyway (requests get retriable errors until one is elected)", "err", err)
	}
	retentionCtx, stopRetention := context.WithCancel(ctx)
	defer stopRetention()
	var bg sync.WaitGroup
	bg.Add(3)
	go func() {
		defer bg.Done()
		if err := adm.Serve(retentionCtx); err != nil {
			log.Error("admin server", "err", err)
		}
	}()
	go func() {
		defer bg.Done()
		if cfg.Backend == "embedded" { // Iggy applies its own message expiry
			local.RunRetention(retentionCtx, cfg.RetentionCheck)
		}
	}()
	go func() {
		defer bg.Done()
		groups.Run(retentionCtx)
	}()
	log.Info("kgate serving", "kafka", cfg.AdvertiseKafkaAddr, "bootstrap", srv.Addr().String(), "data_dir", cfg.DataDir)
	fmt.Fprintf(os.Stdout, "kgate node %d ready: bootstrap servers %s\n", cfg.NodeID, cfg.AdvertiseKafkaAddr)
	// On SIGTERM the leader hands over first, while its listener still
	// answers (NOT_COORDINATOR / NOT_LEADER_OR_FOLLOWER send clients to the
	// new leader), and only then stops serving.
	srvCtx, stopSrv := context.WithCancel(context.Background())
	defer stopSrv()
	go func() {
		<-ctx.Done()
		node.StepDown()
		stopSrv()
	}()
	err = srv.Serve(srvCtx)
	stopRetention()
	bg.Wait()
	log.Info("kgate stopped")
	return err
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
		case <-t.C:
		}
	}
	return nil
}

// startIggy connects the Iggy backend. Wrong credentials stop start-up;
// an unreachable server does not (requests get retriable errors until it
// answers).
func startIggy(ctx context.Context, cfg *config, node *cluster.Node, local *embedded.Backend, log *slog.Logger) (*iggybackend.Backend, error) {
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
				return nil, fmt.Errorf("--iggy-tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--iggy-tls-ca: no PEM certificates in %s", cfg.IggyTLSCA)
			}
			opts.TLS.RootCAs = pool
		}
	}
	var topics iggybackend.TopicMap
	if cfg.IggyTopicMap != "" {
		m, err := iggybackend.LoadTopicMap(cfg.IggyTopicMap)
		if err != nil {
			return nil, fmt.Errorf("--iggy-topic-map: %w", err)
		}
		topics = m
	}
	b, err := iggybackend.New(iggybackend.Config{
		Client:          iggy.NewClient(opts, cfg.IggyConnections),
		Stream:          cfg.IggyStream,
		Topics:          topics,
		Nodes:           node,
		InitProducerID:  local.InitProducerID,
		PollInterval:    cfg.IggyPollInterval,
		RequestTimeout:  cfg.IggyTimeout,
		SaveEvery:       uint32(cfg.IggySaveEvery),
		MaxUncompressed: cfg.MaxFrameBytes,
		Log:             log.With("backend", "iggy"),
	})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, cfg.IggyTimeout+5*time.Second)
	defer cancel()
	if err := b.Start(sctx); err != nil {
		return nil, fmt.Errorf("iggy at %s: %w", cfg.IggyAddr, err)
	}
	log.Info("iggy backend", "addr", cfg.IggyAddr, "stream", cfg.IggyStream, "dialect", b.Dialect())
	return b, nil
}
