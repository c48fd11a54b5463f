package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// failoverConfig configures the failover subcommand.
type failoverConfig struct {
	brokers     []string
	admin       []string
	pids        map[int32]int
	restart     string
	kills       int
	label       string
	topicPrefix string
	groupPrefix string
	partitions  int
	consumers   int

	heartbeat       time.Duration
	session         time.Duration
	rebalance       time.Duration
	produceInterval time.Duration
	commitInterval  time.Duration
	metadataMinAge  time.Duration
	retryBackoffMin time.Duration
	restartAfter    time.Duration
	killEvery       time.Duration
	balancer        string
	consumerCmd     string
	client          string
	roundTimeout    time.Duration
	readyTimeout    time.Duration
	settle          time.Duration
	// fault is "kill" (SIGKILL, restart) or "pause" (SIGSTOP for a hold,
	// then SIGCONT); holds are the pause lengths, round n taking
	// holds[(n-1) % len(holds)].
	fault string
	holds []time.Duration

	json        bool
	verbose     bool
	clientDebug bool
}

const failoverUsage = `kgate-bench failover: kill the leader under a live consumer group.

Against a kgate cluster (or, with -admin "", an Apache Kafka cluster) it runs
-consumers group consumers (franz-go in process, or -consumer-cmd programs
such as test/clients' Java ClusterConsumer or cluster_consumer.py) on a
-partitions topic while a producer writes a timestamped record every
-produce-interval, round robin. Then, -kills times, -kill-every apart: it
finds the leader (GET /v1/cluster; against Kafka the group's coordinator,
by FindCoordinator), SIGKILLs its process (-pids), runs -restart for it
-restart-after later, and measures from the kill until
  (a) a new leader (coordinator) is named,
  (b) a record produced after the kill is acknowledged (producer back),
  (c) every consumer has fetched a record produced after the kill, and
  (d) for franz-go, every consumer's heartbeat succeeds on another node.
With -fault pause the leader is not killed but frozen: SIGSTOP, then SIGCONT
after a hold (-pause, a list the rounds take in turn), as a GC pause or a
stopped VM would; -kills then counts pauses and -restart is not needed.
Kills after which a member's generation changed, a rebalance callback ran
or a client ended its group session are counted; at the end, acknowledged
records never consumed, records consumed twice (after the group first was
healthy: its forming hands partitions over before their first commits, as on
any Kafka cluster) and committed offsets seen going backwards. The target for all of these is zero.

Usage: kgate-bench failover -brokers ... -admin ... -pids ... -restart ... [flags]
       kgate-bench failover-summary RESULT.json...   (results of -json runs, one table)

`

func parseFailoverConfig(args []string, output io.Writer) (failoverConfig, error) {
	var cfg failoverConfig
	var brokers, admin, pids, holds string
	fs := flag.NewFlagSet("kgate-bench failover", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), failoverUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&brokers, "brokers", "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096", "comma-separated bootstrap `addresses` of the cluster")
	fs.StringVar(&admin, "admin", "127.0.0.1:9391,127.0.0.1:9392,127.0.0.1:9393", "comma-separated admin HTTP `addresses`; any live one is asked for GET /v1/cluster. Empty: the target is Apache Kafka, and the node killed is the group's coordinator")
	fs.StringVar(&pids, "pids", "", "node id to process id `map`, e.g. 1=1234,2=1235,3=1236")
	fs.StringVar(&cfg.restart, "restart", "", "shell `command` that restarts a killed node: {id} is replaced by its node id; it must start the node in the background and print its pid as the last line of its output")
	fs.IntVar(&cfg.kills, "kills", 20, "leader kills")
	fs.StringVar(&cfg.label, "label", "kgate-3node", "target label shown in the report")
	fs.StringVar(&cfg.topicPrefix, "topic-prefix", "kgate-bench-failover", "prefix of the topic created for the run")
	fs.StringVar(&cfg.groupPrefix, "group-prefix", "kgate-bench-failover", "prefix of the group id (a random suffix is added)")
	fs.IntVar(&cfg.partitions, "partitions", 6, "partitions of the topic")
	fs.IntVar(&cfg.consumers, "consumers", 3, "group consumers")
	fs.DurationVar(&cfg.heartbeat, "heartbeat", time.Second, "consumers' heartbeat interval (kgo.HeartbeatInterval)")
	fs.DurationVar(&cfg.session, "session-timeout", 6*time.Second, "consumers' session timeout")
	fs.DurationVar(&cfg.commitInterval, "commit-interval", time.Second, "consumers' auto-commit interval")
	fs.DurationVar(&cfg.metadataMinAge, "metadata-min-age", 0, "clients' metadata min age (0: the client's default, 5s)")
	fs.DurationVar(&cfg.killEvery, "kill-every", 10*time.Second, "kill no sooner than this after the previous kill (and only once the group is healthy again)")
	fs.DurationVar(&cfg.retryBackoffMin, "retry-backoff-min", 0, "franz-go clients' least retry backoff (0: the client's default, 250ms doubling)")
	fs.DurationVar(&cfg.restartAfter, "restart-after", 5*time.Second, "restart the killed node this long after the kill (0: once the clients are back)")
	fs.StringVar(&cfg.balancer, "balancer", "cooperative-sticky", "consumers' group balancer: cooperative-sticky or range")
	fs.StringVar(&cfg.client, "client", "franz-go", "consumers' client library, for the report")
	fs.StringVar(&cfg.consumerCmd, "consumer-cmd", "", "run each consumer as this program (test/clients' ClusterConsumer or cluster_consumer.py) instead of franz-go in process")
	fs.DurationVar(&cfg.rebalance, "rebalance-timeout", 60*time.Second, "consumers' rebalance timeout")
	fs.DurationVar(&cfg.produceInterval, "produce-interval", 5*time.Millisecond, "the producer writes one record every this long")
	fs.DurationVar(&cfg.roundTimeout, "round-timeout", 60*time.Second, "give up waiting for (a) and (b) after a kill after this long")
	fs.DurationVar(&cfg.readyTimeout, "ready-timeout", 2*time.Minute, "wait this long for a restarted node's /readyz, a leader and a Stable group")
	fs.DurationVar(&cfg.settle, "settle", 2*time.Second, "pause once everything is healthy again before the next kill")
	fs.StringVar(&cfg.fault, "fault", "kill", "the fault each round: kill (SIGKILL, then -restart) or pause (SIGSTOP for a hold, then SIGCONT)")
	fs.StringVar(&holds, "pause", "6s", "with -fault pause, comma-separated `holds`; round n pauses for the ((n-1) mod count)th, e.g. 3s,6s,10s,15s,20s")
	fs.BoolVar(&cfg.json, "json", false, "print the result as JSON instead of a table")
	fs.BoolVar(&cfg.verbose, "v", false, "verbose logging, including the Kafka client's")
	fs.BoolVar(&cfg.clientDebug, "client-debug", false, "with -v, the Kafka clients' debug logs too")
	if err := fs.Parse(args); err != nil {
		return failoverConfig{}, err
	}
	if fs.NArg() > 0 {
		return failoverConfig{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if cfg.brokers, err = splitList(brokers); err != nil {
		return failoverConfig{}, fmt.Errorf("-brokers: %w", err)
	}
	if admin != "" {
		if cfg.admin, err = splitList(admin); err != nil {
			return failoverConfig{}, fmt.Errorf("-admin: %w", err)
		}
	}
	if cfg.pids, err = parsePIDs(pids); err != nil {
		return failoverConfig{}, fmt.Errorf("-pids: %w", err)
	}
	if cfg.holds, err = parseHolds(holds); err != nil {
		return failoverConfig{}, fmt.Errorf("-pause: %w", err)
	}
	switch {
	case cfg.fault != "kill" && cfg.fault != "pause":
		return failoverConfig{}, fmt.Errorf("-fault %q: want kill or pause", cfg.fault)
	case cfg.fault == "kill" && cfg.restart == "":
		return failoverConfig{}, errors.New("-restart is required")
	case cfg.fault == "pause" && slices.Max(cfg.holds) >= cfg.roundTimeout:
		// The round's wait ends at -round-timeout; the node must be
		// resumed inside it.
		return failoverConfig{}, fmt.Errorf("-pause %v: every hold must be shorter than -round-timeout %v", slices.Max(cfg.holds), cfg.roundTimeout)
	case cfg.kills < 1:
		return failoverConfig{}, errors.New("-kills must be at least 1")
	case cfg.partitions < 1 || cfg.consumers < 1:
		return failoverConfig{}, errors.New("-partitions and -consumers must be at least 1")
	case cfg.balancer != "cooperative-sticky" && cfg.balancer != "range":
		return failoverConfig{}, fmt.Errorf("-balancer %q: want cooperative-sticky or range", cfg.balancer)
	case cfg.commitInterval <= 0 || cfg.metadataMinAge < 0 || cfg.restartAfter < 0:
		return failoverConfig{}, errors.New("durations must be positive")
	case cfg.heartbeat <= 0 || cfg.session <= 0 || cfg.rebalance <= 0 || cfg.produceInterval <= 0 ||
		cfg.roundTimeout <= 0 || cfg.readyTimeout <= 0 || cfg.settle < 0:
		return failoverConfig{}, errors.New("durations must be positive")
	}
	return cfg, nil
}

// parseHolds parses "3s,6s,10s".
func parseHolds(s string) ([]time.Duration, error) {
	fields, err := splitList(s)
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for _, f := range fields {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q is not a positive duration", f)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("no hold given")
	}
	return out, nil
}

// parsePIDs parses "1=1234,2=1235".
func parsePIDs(s string) (map[int32]int, error) {
	fields, err := splitList(s)
	if err != nil {
		return nil, err
	}
	out := map[int32]int{}
	for _, f := range fields {
		id, pid, ok := strings.Cut(f, "=")
		n, err1 := strconv.ParseInt(strings.TrimSpace(id), 10, 32)
		p, err2 := strconv.Atoi(strings.TrimSpace(pid))
		if !ok || err1 != nil || err2 != nil || p <= 0 {
			return nil, fmt.Errorf("%q is not node-id=pid", f)
		}
		out[int32(n)] = p
	}
	return out, nil
}
