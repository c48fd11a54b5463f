package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
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
	roundTimeout    time.Duration
	readyTimeout    time.Duration
	settle          time.Duration

	json    bool
	verbose bool
}

const failoverUsage = `kgate-bench failover: kill the kgate leader under a live consumer group.

Against a kgate cluster it runs -consumers real kgo group consumers (classic
protocol, eager range balancer) on a -partitions topic while a producer
writes a timestamped record every -produce-interval. Then, -kills times:
it finds the leader with GET /v1/cluster on an admin address, SIGKILLs its
process (-pids), and measures the time from the kill until
  (a) the group's first successful Heartbeat answered by another node, and
  (b) the first record produced after the kill is fetched;
then it runs -restart for the killed node, waits for its /readyz and for the
group to be Stable and consuming again. Rebalances are counted from the
consumers' OnPartitionsRevoked/OnPartitionsLost callbacks, their generations
(kgo GroupMetadata, and /v1/groups on the admin port: DescribeGroups carries
no generation) and DescribeGroups' member list. The target is zero.

Usage: kgate-bench failover -brokers ... -admin ... -pids ... -restart ... [flags]

`

func parseFailoverConfig(args []string, output io.Writer) (failoverConfig, error) {
	var cfg failoverConfig
	var brokers, admin, pids string
	fs := flag.NewFlagSet("kgate-bench failover", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), failoverUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&brokers, "brokers", "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096", "comma-separated bootstrap `addresses` of the cluster")
	fs.StringVar(&admin, "admin", "127.0.0.1:9391,127.0.0.1:9392,127.0.0.1:9393", "comma-separated admin HTTP `addresses`; any live one is asked for GET /v1/cluster")
	fs.StringVar(&pids, "pids", "", "node id to process id `map`, e.g. 1=1234,2=1235,3=1236")
	fs.StringVar(&cfg.restart, "restart", "", "shell `command` that restarts a killed node: {id} is replaced by its node id; it must start the node in the background and print its pid as the last line of its output")
	fs.IntVar(&cfg.kills, "kills", 20, "leader kills")
	fs.StringVar(&cfg.label, "label", "kgate-3node", "target label shown in the report")
	fs.StringVar(&cfg.topicPrefix, "topic-prefix", "kgate-bench-failover", "prefix of the topic created for the run")
	fs.StringVar(&cfg.groupPrefix, "group-prefix", "kgate-bench-failover", "prefix of the group id (a random suffix is added)")
	fs.IntVar(&cfg.partitions, "partitions", 6, "partitions of the topic")
	fs.IntVar(&cfg.consumers, "consumers", 3, "group consumers")
	fs.DurationVar(&cfg.heartbeat, "heartbeat", 500*time.Millisecond, "consumers' heartbeat interval (kgo.HeartbeatInterval)")
	fs.DurationVar(&cfg.session, "session-timeout", 45*time.Second, "consumers' session timeout")
	fs.DurationVar(&cfg.rebalance, "rebalance-timeout", 60*time.Second, "consumers' rebalance timeout")
	fs.DurationVar(&cfg.produceInterval, "produce-interval", 5*time.Millisecond, "the producer writes one record every this long")
	fs.DurationVar(&cfg.roundTimeout, "round-timeout", 60*time.Second, "give up waiting for (a) and (b) after a kill after this long")
	fs.DurationVar(&cfg.readyTimeout, "ready-timeout", 2*time.Minute, "wait this long for a restarted node's /readyz, a leader and a Stable group")
	fs.DurationVar(&cfg.settle, "settle", 2*time.Second, "pause once everything is healthy again before the next kill")
	fs.BoolVar(&cfg.json, "json", false, "print the result as JSON instead of a table")
	fs.BoolVar(&cfg.verbose, "v", false, "verbose logging, including the Kafka client's")
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
	if cfg.admin, err = splitList(admin); err != nil {
		return failoverConfig{}, fmt.Errorf("-admin: %w", err)
	}
	if cfg.pids, err = parsePIDs(pids); err != nil {
		return failoverConfig{}, fmt.Errorf("-pids: %w", err)
	}
	switch {
	case cfg.restart == "":
		return failoverConfig{}, errors.New("-restart is required")
	case cfg.kills < 1:
		return failoverConfig{}, errors.New("-kills must be at least 1")
	case cfg.partitions < 1 || cfg.consumers < 1:
		return failoverConfig{}, errors.New("-partitions and -consumers must be at least 1")
	case cfg.heartbeat <= 0 || cfg.session <= 0 || cfg.rebalance <= 0 || cfg.produceInterval <= 0 ||
		cfg.roundTimeout <= 0 || cfg.readyTimeout <= 0 || cfg.settle < 0:
		return failoverConfig{}, errors.New("durations must be positive")
	}
	return cfg, nil
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
