package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// config is every flag of `kgate serve`. Each flag can also be set through
// the environment as KGATE_<NAME> (upper case, '-' as '_'); flags win.
type config struct {
	ConfigFile          string
	AdvertiseRaftAddr   string
	AdvertiseGossipAddr string
	LogFormat           string
	NodeID              int
	DataDir             string
	KafkaAddr           string
	AdvertiseKafkaAddr  string
	RaftAddr            string
	GossipAddr          string
	AdminAddr           string
	Join                string
	BootstrapExpect     int
	Backend             string
	AutoCreateTopics    bool
	DefaultPartitions   int
	MaxFrameBytes       int
	MaxMessageBytes     int
	MaxConnections      int
	MaxConnsPerIP       int
	ConnsPerIPOverrides string
	IdleTimeout         time.Duration
	RequestReadTimeout  time.Duration
	SegmentBytes        int64
	RetentionCheck      time.Duration
	RaftHeartbeat       time.Duration
	RaftElection        time.Duration
	RaftSnapshotEvery   uint64
	RaftDigestEvery     uint64
	RaftTrailingLogs    uint64
	RaftSegmentBytes    int64
	LogLevel            string
	Fsync               bool
	PartitionStorage    string
	RaftRetainedBytes   int64
	DeadNodeReapAfter   time.Duration
	RejoinInterval      time.Duration

	GroupInitialDelay time.Duration
	GroupMinSession   time.Duration
	GroupMaxSession   time.Duration
	MaxTxnTimeout     time.Duration
	TxnAbortCheck     time.Duration
	TxnIDExpiration   time.Duration
	ProducerIDExpiry  time.Duration
	GroupMaxRebalance time.Duration
	OffsetsRetention  time.Duration
	MaxGroups         int
	MaxGroupMembers   int
	MaxMembers        int
	MaxMemberMetadata int

	IggyAddr          string
	IggyUser          string
	IggyPassword      string
	IggyToken         string
	IggyStream        string
	IggyProtocol      string
	IggyConnections   int
	IggyTLS           bool
	IggyTLSCA         string
	IggyTLSServerName string
	IggyTopicMap      string
	IggyPollInterval  time.Duration
	IggyTimeout       time.Duration
	IggySaveEvery     int

	securityConfig  // security.go
	listenersConfig // listeners.go
}

func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("kgate serve", flag.ContinueOnError)
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file of flag values by flag name (flags and KGATE_* variables win over it)")
	fs.IntVar(&c.NodeID, "node-id", 1, "this node's id, unique in the cluster (1..2147483647)")
	fs.StringVar(&c.DataDir, "data-dir", "kgate-data", "directory for the Raft log, snapshots and partition logs")
	fs.StringVar(&c.KafkaAddr, "kafka-addr", "127.0.0.1:9092", "Kafka listener address")
	fs.StringVar(&c.AdvertiseKafkaAddr, "advertise-kafka-addr", "", "Kafka address given to clients (default: --kafka-addr)")
	fs.StringVar(&c.RaftAddr, "raft-addr", "127.0.0.1:9093", "Raft transport listen address")
	fs.StringVar(&c.AdvertiseRaftAddr, "advertise-raft-addr", "", "Raft address other nodes dial (default: --raft-addr); a host name is kept as a name")
	fs.StringVar(&c.GossipAddr, "gossip-addr", "127.0.0.1:9094", "gossip (memberlist, TCP and UDP) listen address")
	fs.StringVar(&c.AdvertiseGossipAddr, "advertise-gossip-addr", "", "gossip address other nodes reach (default: --gossip-addr); a host name is resolved at start")
	fs.StringVar(&c.AdminAddr, "admin-addr", "127.0.0.1:9095", "admin HTTP address")
	fs.StringVar(&c.Join, "join", "", "comma list of gossip addresses of existing nodes")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 1, "number of nodes that bootstrap a new cluster together")
	fs.StringVar(&c.Backend, "backend", "embedded", "record store: embedded (kgate's replicated log) or iggy (an Apache Iggy server)")
	fs.BoolVar(&c.AutoCreateTopics, "auto-create-topics", true, "create topics that Metadata asks for")
	fs.IntVar(&c.DefaultPartitions, "default-partitions", 1, "partitions of auto-created topics and of CreateTopics with -1")
	fs.IntVar(&c.MaxFrameBytes, "max-frame-bytes", 100<<20, "largest request accepted (Kafka's socket.request.max.bytes)")
	fs.IntVar(&c.MaxMessageBytes, "max-message-bytes", 1048588, "largest record batch accepted (Kafka's message.max.bytes)")
	fs.IntVar(&c.MaxConnections, "max-connections", 10000, "open Kafka client connections allowed (other nodes' forwarding links are counted apart, to the same bound)")
	fs.IntVar(&c.MaxConnsPerIP, "max-connections-per-ip", math.MaxInt32, "open Kafka client connections allowed from one address (Kafka's max.connections.per.ip); 0 only with --max-connections-per-ip-overrides")
	fs.StringVar(&c.ConnsPerIPOverrides, "max-connections-per-ip-overrides", "", "comma list of host:count, each an address or a host name (resolved at start) with its own bound (Kafka's max.connections.per.ip.overrides)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 10*time.Minute, "close Kafka connections idle this long")
	fs.DurationVar(&c.RequestReadTimeout, "request-read-timeout", 30*time.Second, "close a Kafka connection whose request, once its first byte arrived, is not whole within this (slowloris), or that takes no answer for this long; also bounds TLS handshakes")
	fs.Int64Var(&c.SegmentBytes, "segment-bytes", 64<<20, "default partition segment size; retention deletes whole segments")
	fs.DurationVar(&c.RetentionCheck, "retention-check-interval", 30*time.Second, "how often the leader applies retention")
	fs.DurationVar(&c.RaftHeartbeat, "raft-heartbeat-timeout", 500*time.Millisecond, "Raft heartbeat timeout: a follower that hears nothing from the leader this long starts an election")
	fs.DurationVar(&c.RaftElection, "raft-election-timeout", 500*time.Millisecond, "Raft election timeout")
	fs.Uint64Var(&c.RaftSnapshotEvery, "raft-snapshot-threshold", 16384, "Raft entries between snapshots (a snapshot is also taken once the log has grown by 256 MiB)")
	fs.Uint64Var(&c.RaftDigestEvery, "raft-digest-every", 0, "log a checksum of the commands applied in each window of this many Raft indexes, to compare replicas after faults (0: off)")
	fs.Uint64Var(&c.RaftTrailingLogs, "raft-trailing-logs", 1024, "Raft entries kept after a snapshot (entries carry record batches of up to megabytes)")
	fs.Int64Var(&c.RaftSegmentBytes, "raft-log-segment-bytes", 64<<20, "size after which the Raft log starts a new segment file; compaction after a snapshot deletes whole segments")
	fs.BoolVar(&c.Fsync, "fsync", true, "fsync the Raft log before acknowledging; false trusts the page cache as Kafka does (survives kill -9, not power loss)")
	fs.StringVar(&c.PartitionStorage, "partition-storage", "raft-log", "how this node keeps the embedded backend's partitions: raft-log (the segments name the batch in its Raft log entry, so each record is written once; see docs/design/write-once.md) or copy (each batch written again into the partition's segment files, as earlier releases did by default)")
	fs.Int64Var(&c.RaftRetainedBytes, "raft-retained-bytes", 1<<30, "with --partition-storage=raft-log: once the compacted Raft log files kept for partitions' references (raft/log/retained) pass this size, the partitions naming the oldest copy those batches into their own segment files, if that copies at most half of what is kept (a topic kept long would otherwise keep every later file)")
	fs.DurationVar(&c.GroupInitialDelay, "group-initial-rebalance-delay", 3*time.Second, "wait for more members before the first rebalance of an empty group (KIP-134)")
	fs.DurationVar(&c.GroupMinSession, "group-min-session-timeout", 6*time.Second, "smallest session timeout a member may ask for")
	fs.DurationVar(&c.GroupMaxSession, "group-max-session-timeout", 30*time.Minute, "largest session timeout a member may ask for")
	fs.DurationVar(&c.GroupMaxRebalance, "group-max-rebalance-timeout", 5*time.Minute, "rebalance timeouts are clamped to this")
	fs.DurationVar(&c.OffsetsRetention, "offsets-retention", 7*24*time.Hour, "keep committed offsets this long after a group becomes empty (KIP-211)")
	fs.DurationVar(&c.MaxTxnTimeout, "max-transaction-timeout", 15*time.Minute, "largest transaction.timeout.ms a transactional producer may ask for (Kafka's transaction.max.timeout.ms)")
	fs.DurationVar(&c.TxnAbortCheck, "transaction-abort-check-interval", 10*time.Second, "how often the leader aborts transactions older than their timeout, removes expired transactional ids, and (with --backend iggy) forgets aborted transactions below a partition's log start")
	fs.DurationVar(&c.ProducerIDExpiry, "producer-id-expiration", 24*time.Hour, "an idempotent producer's state in a partition is dropped this long after its last append (Kafka's producer.id.expiration.ms)")
	fs.DurationVar(&c.TxnIDExpiration, "transactional-id-expiration", 7*24*time.Hour, "a transactional id with no ongoing transaction is removed this long after its last use (Kafka's transactional.id.expiration.ms)")
	fs.IntVar(&c.MaxGroups, "max-groups", 1000, "consumer groups allowed")
	fs.IntVar(&c.MaxGroupMembers, "max-group-members", 1000, "members per group, pending member ids included")
	fs.IntVar(&c.MaxMembers, "max-members", 10000, "members in all groups, pending member ids included")
	fs.IntVar(&c.MaxMemberMetadata, "max-member-metadata-bytes", 64<<10, "bytes of join metadata, and of assignment, per member")
	fs.DurationVar(&c.DeadNodeReapAfter, "dead-node-reap-after", 72*time.Hour, "a failed node stays a Raft voter this long before the leader removes it")
	fs.DurationVar(&c.RejoinInterval, "rejoin-interval", 30*time.Second, "how often the --join seeds are contacted again")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json (one format for kgate's, Raft's and gossip's lines on stderr)")
	fs.StringVar(&c.IggyAddr, "iggy-addr", "127.0.0.1:8090", "Iggy server TCP address (--backend iggy)")
	fs.StringVar(&c.IggyUser, "iggy-user", "iggy", "Iggy user name")
	fs.StringVar(&c.IggyPassword, "iggy-password", "iggy", "Iggy password")
	fs.StringVar(&c.IggyToken, "iggy-token", "", "Iggy personal access token, used instead of user and password")
	fs.StringVar(&c.IggyStream, "iggy-stream", "kafka", "Iggy stream holding the Kafka topics (created if missing)")
	fs.StringVar(&c.IggyProtocol, "iggy-protocol", "auto", "Iggy wire dialect: auto (detect), current (server 0.9.x) or legacy (server 0.7.x-0.8.x)")
	fs.IntVar(&c.IggyConnections, "iggy-connections", 8, "connections to Iggy per node, each carrying one request at a time")
	fs.BoolVar(&c.IggyTLS, "iggy-tls", false, "connect to Iggy over TLS")
	fs.StringVar(&c.IggyTLSCA, "iggy-tls-ca", "", "PEM file of CA certificates that sign the Iggy server's certificate (default: system roots)")
	fs.StringVar(&c.IggyTLSServerName, "iggy-tls-server-name", "", "name expected in the Iggy server's certificate (default: host of --iggy-addr)")
	fs.StringVar(&c.IggyTopicMap, "iggy-topic-map", "", "JSON file of per-topic overrides (stream, Iggy topic name, compression, expiry, size)")
	fs.DurationVar(&c.IggyPollInterval, "iggy-poll-interval", 100*time.Millisecond, "how often partitions a fetch waits on are checked for writes made by other nodes or Iggy clients")
	fs.DurationVar(&c.IggyTimeout, "iggy-timeout", 5*time.Second, "deadline of each Iggy request")
	fs.IntVar(&c.IggySaveEvery, "iggy-messages-required-to-save", 0, "for topics kgate creates on an Iggy 0.9 server: acknowledged messages a partition may hold in memory before writing them (0: the server's default, 1024; 1: written before every answer, so a kill -9 of Iggy loses none)")
	addSecurityFlags(fs, &c.securityConfig)
	addListenerFlags(fs, &c.listenersConfig)
	return fs
}

// parseConfig reads the config file (--config or KGATE_CONFIG), then the
// environment, then the arguments, and checks every value: a flag wins over
// the environment, which wins over the file. Errors are one line naming the
// flag (and the file or variable it came from).
func parseConfig(args []string, environ func(string) (string, bool)) (*config, error) {
	c := &config{}
	fs := newFlagSet(c)
	file := configFileArg(args)
	if file == "" {
		file, _ = environ("KGATE_CONFIG")
	}
	if file != "" {
		if err := loadConfigFile(fs, file); err != nil {
			return nil, err
		}
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := envName(f.Name)
		if v, ok := environ(key); ok && envErr == nil && f.Name != "config" {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("invalid value %q for --%s (from %s): %v", v, f.Name, key, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, c.validate()
}

// envName is the environment variable of a flag: KGATE_ + its name in upper
// case with '-' as '_'.
func envName(flagName string) string {
	return "KGATE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// configFileArg finds --config in the arguments before they are parsed, so
// the file can be applied first and the other flags override it.
func configFileArg(args []string) string {
	scratch := newFlagSet(&config{})
	scratch.SetOutput(io.Discard)
	if scratch.Parse(args) != nil {
		return "" // the real parse reports the error
	}
	return scratch.Lookup("config").Value.String()
}

// loadConfigFile sets flags from a YAML mapping of flag names to values.
// A list is accepted where the flag takes a comma list (join). Unknown keys
// stop start-up: a misspelt key silently ignored is a setting that never
// applied.
func loadConfigFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("--config %s: %v", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("--config %s: must be a mapping of flag names to values", path)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		name := k.Value
		where := fmt.Sprintf("%s line %d", path, k.Line)
		if fs.Lookup(name) == nil || name == "config" {
			return fmt.Errorf("unknown key %q in %s (keys are kgate serve's flag names)", name, where)
		}
		if seen[name] {
			return fmt.Errorf("key %q set twice in %s", name, where)
		}
		seen[name] = true
		val, err := scalarOrList(v)
		if err != nil {
			return fmt.Errorf("invalid value for --%s in %s: %v", name, where, err)
		}
		if err := fs.Set(name, val); err != nil {
			return fmt.Errorf("invalid value %q for --%s in %s: %v", val, name, where, err)
		}
	}
	return nil
}

func scalarOrList(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return v.Value, nil
	case yaml.SequenceNode:
		items := make([]string, 0, len(v.Content))
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("a list may hold only plain values")
			}
			items = append(items, it.Value)
		}
		return strings.Join(items, ","), nil
	}
	return "", fmt.Errorf("must be a plain value or a list")
}

func (c *config) validate() error {
	if c.NodeID < 1 || c.NodeID > 1<<31-1 {
		return fmt.Errorf("invalid value %d for --node-id: must be 1..2147483647", c.NodeID)
	}
	if c.DataDir == "" {
		return fmt.Errorf("invalid value for --data-dir: must not be empty")
	}
	for _, a := range []struct{ name, v string }{
		{"kafka-addr", c.KafkaAddr}, {"raft-addr", c.RaftAddr}, {"gossip-addr", c.GossipAddr},
		{"admin-addr", c.AdminAddr},
	} {
		if err := checkHostPort(a.v); err != nil {
			return fmt.Errorf("invalid value %q for --%s: %v", a.v, a.name, err)
		}
	}
	// An address that binds every interface cannot be handed to others:
	// the matching --advertise-* flag must name one.
	for _, a := range []struct {
		name, listen string
		adv          *string
	}{
		{"kafka-addr", c.KafkaAddr, &c.AdvertiseKafkaAddr}, {"raft-addr", c.RaftAddr, &c.AdvertiseRaftAddr},
		{"gossip-addr", c.GossipAddr, &c.AdvertiseGossipAddr},
	} {
		if *a.adv == "" {
			if unspecifiedHost(a.listen) {
				return fmt.Errorf("--%s %s binds every interface: set --advertise-%s to an address other nodes and clients can reach", a.name, a.listen, a.name)
			}
			*a.adv = a.listen
			continue
		}
		if err := checkHostPort(*a.adv); err != nil {
			return fmt.Errorf("invalid value %q for --advertise-%s: %v", *a.adv, a.name, err)
		}
		if unspecifiedHost(*a.adv) {
			return fmt.Errorf("invalid value %q for --advertise-%s: must be an address others can reach, not a wildcard", *a.adv, a.name)
		}
	}
	if c.Join != "" {
		for _, j := range strings.Split(c.Join, ",") {
			if err := checkHostPort(strings.TrimSpace(j)); err != nil {
				return fmt.Errorf("invalid value %q for --join: %q: %v", c.Join, j, err)
			}
		}
	}
	if c.BootstrapExpect < 1 {
		return fmt.Errorf("invalid value %d for --bootstrap-expect: must be at least 1", c.BootstrapExpect)
	}
	if c.IggyPasswordFile != "" {
		pw, err := readSecret("iggy-password-file", c.IggyPasswordFile)
		if err != nil {
			return err
		}
		c.IggyPassword = pw
	}
	if c.IggyTokenFile != "" {
		tok, err := readSecret("iggy-token-file", c.IggyTokenFile)
		if err != nil {
			return err
		}
		c.IggyToken = tok
	}
	switch c.Backend {
	case "embedded":
	case "iggy":
		if err := c.validateIggy(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("invalid value %q for --backend: must be embedded or iggy", c.Backend)
	}
	if c.DefaultPartitions < 1 || c.DefaultPartitions > 100000 {
		return fmt.Errorf("invalid value %d for --default-partitions: must be 1..100000", c.DefaultPartitions)
	}
	if c.MaxFrameBytes < 1024 || c.MaxFrameBytes > 1<<30 {
		return fmt.Errorf("invalid value %d for --max-frame-bytes: must be 1024..1073741824", c.MaxFrameBytes)
	}
	if c.MaxMessageBytes < 128 || c.MaxMessageBytes > c.MaxFrameBytes {
		return fmt.Errorf("invalid value %d for --max-message-bytes: must be 128..max-frame-bytes", c.MaxMessageBytes)
	}
	if c.MaxConnections < 1 {
		return fmt.Errorf("invalid value %d for --max-connections: must be at least 1", c.MaxConnections)
	}
	overrides, err := parseConnsPerIPOverrides(c.ConnsPerIPOverrides)
	if err != nil {
		return err
	}
	if c.MaxConnsPerIP < 0 || (c.MaxConnsPerIP == 0 && len(overrides) == 0) {
		return fmt.Errorf("invalid value %d for --max-connections-per-ip: must be positive (0 only with --max-connections-per-ip-overrides)", c.MaxConnsPerIP)
	}
	if c.IdleTimeout <= 0 {
		return fmt.Errorf("invalid value %s for --idle-timeout: must be positive", c.IdleTimeout)
	}
	if c.RequestReadTimeout <= 0 {
		return fmt.Errorf("invalid value %s for --request-read-timeout: must be positive", c.RequestReadTimeout)
	}
	if c.SegmentBytes < 1024 {
		return fmt.Errorf("invalid value %d for --segment-bytes: must be at least 1024", c.SegmentBytes)
	}
	if c.RetentionCheck <= 0 {
		return fmt.Errorf("invalid value %s for --retention-check-interval: must be positive", c.RetentionCheck)
	}
	if c.RaftHeartbeat < 5*time.Millisecond {
		return fmt.Errorf("invalid value %s for --raft-heartbeat-timeout: must be at least 5ms", c.RaftHeartbeat)
	}
	if c.RaftElection < 5*time.Millisecond {
		return fmt.Errorf("invalid value %s for --raft-election-timeout: must be at least 5ms", c.RaftElection)
	}
	if c.RaftElection < c.RaftHeartbeat {
		return fmt.Errorf("invalid value %s for --raft-election-timeout: must be at least --raft-heartbeat-timeout (%s)", c.RaftElection, c.RaftHeartbeat)
	}
	if c.DeadNodeReapAfter <= 0 {
		return fmt.Errorf("invalid value %s for --dead-node-reap-after: must be positive", c.DeadNodeReapAfter)
	}
	if c.RejoinInterval <= 0 {
		return fmt.Errorf("invalid value %s for --rejoin-interval: must be positive", c.RejoinInterval)
	}
	if c.PartitionStorage != "copy" && c.PartitionStorage != "raft-log" {
		return fmt.Errorf("invalid value %q for --partition-storage: must be copy or raft-log", c.PartitionStorage)
	}
	if c.RaftRetainedBytes < 1 {
		return fmt.Errorf("invalid value %d for --raft-retained-bytes: must be at least 1", c.RaftRetainedBytes)
	}
	if c.RaftSegmentBytes < 4096 {
		return fmt.Errorf("invalid value %d for --raft-log-segment-bytes: must be at least 4096", c.RaftSegmentBytes)
	}
	if c.RaftSnapshotEvery < 1 {
		return fmt.Errorf("invalid value %d for --raft-snapshot-threshold: must be at least 1", c.RaftSnapshotEvery)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"group-initial-rebalance-delay", c.GroupInitialDelay}, {"group-min-session-timeout", c.GroupMinSession},
		{"group-max-session-timeout", c.GroupMaxSession}, {"group-max-rebalance-timeout", c.GroupMaxRebalance},
		{"offsets-retention", c.OffsetsRetention},
		{"max-transaction-timeout", c.MaxTxnTimeout}, {"transaction-abort-check-interval", c.TxnAbortCheck},
		{"transactional-id-expiration", c.TxnIDExpiration}, {"producer-id-expiration", c.ProducerIDExpiry},
	} {
		if d.v < 0 || (d.v == 0 && d.name != "group-initial-rebalance-delay") {
			return fmt.Errorf("invalid value %s for --%s: must be positive", d.v, d.name)
		}
	}
	if c.GroupMinSession > c.GroupMaxSession {
		return fmt.Errorf("invalid value %s for --group-min-session-timeout: above --group-max-session-timeout", c.GroupMinSession)
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"max-groups", c.MaxGroups}, {"max-group-members", c.MaxGroupMembers}, {"max-members", c.MaxMembers},
		{"max-member-metadata-bytes", c.MaxMemberMetadata},
	} {
		if n.v < 1 {
			return fmt.Errorf("invalid value %d for --%s: must be at least 1", n.v, n.name)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("invalid value %q for --log-level: must be debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("invalid value %q for --log-format: must be text or json", c.LogFormat)
	}
	c.securityConfig.listenerKeySets = c.ListenerOAuthJWKSFile != ""
	if err := c.securityConfig.validate(); err != nil {
		return err
	}
	return c.listenersConfig.validate(c.KafkaAddr, c.AdvertiseKafkaAddr, &c.securityConfig)
}

// joinList splits --join.
func (c *config) validateIggy() error {
	if err := checkHostPort(c.IggyAddr); err != nil {
		return fmt.Errorf("invalid value %q for --iggy-addr: %v", c.IggyAddr, err)
	}
	if c.IggyToken == "" {
		if n := len(c.IggyUser); n < 3 || n > 50 {
			return fmt.Errorf("invalid value %q for --iggy-user: must be 3..50 bytes", c.IggyUser)
		}
		if n := len(c.IggyPassword); n < 3 || n > 100 {
			return fmt.Errorf("invalid value for --iggy-password: must be 3..100 bytes")
		}
	} else if len(c.IggyToken) > 255 {
		return fmt.Errorf("invalid value for --iggy-token: at most 255 bytes")
	}
	if n := len(c.IggyStream); n < 1 || n > 255 {
		return fmt.Errorf("invalid value %q for --iggy-stream: must be 1..255 bytes", c.IggyStream)
	}
	switch c.IggyProtocol {
	case "auto", "current", "legacy":
	default:
		return fmt.Errorf("invalid value %q for --iggy-protocol: must be auto, current or legacy", c.IggyProtocol)
	}
	if c.IggyConnections < 1 || c.IggyConnections > 1024 {
		return fmt.Errorf("invalid value %d for --iggy-connections: must be 1..1024", c.IggyConnections)
	}
	if c.IggyPollInterval < time.Millisecond || c.IggyPollInterval > time.Minute {
		return fmt.Errorf("invalid value %v for --iggy-poll-interval: must be 1ms..1m", c.IggyPollInterval)
	}
	if c.IggyTimeout < 10*time.Millisecond || c.IggyTimeout > 10*time.Minute {
		return fmt.Errorf("invalid value %v for --iggy-timeout: must be 10ms..10m", c.IggyTimeout)
	}
	if c.IggySaveEvery < 0 || c.IggySaveEvery > math.MaxUint32 {
		return fmt.Errorf("invalid value %d for --iggy-messages-required-to-save: must be 0..%d", c.IggySaveEvery, uint32(math.MaxUint32))
	}
	if c.IggyTLSCA != "" {
		if _, err := os.Stat(c.IggyTLSCA); err != nil {
			return fmt.Errorf("invalid value %q for --iggy-tls-ca: %v", c.IggyTLSCA, err)
		}
	}
	if c.IggyTopicMap != "" {
		if _, err := os.Stat(c.IggyTopicMap); err != nil {
			return fmt.Errorf("invalid value %q for --iggy-topic-map: %v", c.IggyTopicMap, err)
		}
	}
	return nil
}

func (c *config) joinList() []string {
	var out []string
	for _, j := range strings.Split(c.Join, ",") {
		if j = strings.TrimSpace(j); j != "" {
			out = append(out, j)
		}
	}
	return out
}

// unspecifiedHost reports whether a host:port binds every interface
// (0.0.0.0, ::, or an empty host).
func unspecifiedHost(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func checkHostPort(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port must be 0..65535")
	}
	return nil
}

// parseConnsPerIPOverrides reads --max-connections-per-ip-overrides:
// "host:count,..." as Kafka's max.connections.per.ip.overrides, the count
// after the last colon (so an IPv6 address may stand bare before it).
func parseConnsPerIPOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, ':')
		n, err := strconv.Atoi(item[i+1:])
		if i <= 0 || err != nil || n < 0 {
			return nil, fmt.Errorf("invalid value %q for --max-connections-per-ip-overrides: want host:count with a count of at least 0", item)
		}
		out[strings.Trim(item[:i], "[]")] = n
	}
	return out, nil
}
