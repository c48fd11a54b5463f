package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// config is the parsed command line. It is built once by parseConfig and
// only read afterwards.
type config struct {
	brokers     []string
	label       string
	topicPrefix string
	partitions  []int

	recordBytes int
	records     int64         // records to produce per run; 0 when duration is used
	duration    time.Duration // produce for this long per run; 0 when records is used
	rate        int           // total records/s across producers; 0 = unlimited
	warmup      int64         // records of an unreported warm-up run; 0 = none

	acks        string
	producers   int
	compression string

	batchMaxBytes      int
	maxBufferedRecords int
	linger             time.Duration
	lingerSet          bool // false: keep kgo's default linger

	// txnRecords > 0: each producer writes transactions of this many
	// records, committing each; flushRecords > 0: an idempotent producer
	// flushes and waits after each this many. Both make the records keyed
	// (producer, sequence) so the read back checks uniqueness.
	txnRecords   int
	flushRecords int

	deliveryTimeout time.Duration
	consumeTimeout  time.Duration
	keepTopics      bool

	json    bool
	verbose bool
	// serverPIDs: the server processes (on this machine; a cluster's
	// nodes) whose CPU time per GB produced and consumed is reported
	// beside kgate-bench's own, and each one's disk writes per byte
	// produced and peak RSS.
	serverPIDs []int
	// replicationFactor of the topics created (-1: the broker's default).
	replicationFactor int
	// jsonFile, when set, also gets the results as JSON.
	jsonFile string

	security     securityFlags // security.go
	securityOpts []kgo.Opt
}

const usageText = `kgate-bench measures produce and consume throughput and produce latency
of any Kafka-protocol server (kgate, Apache Kafka, ...).

For each partition count it creates a fresh topic (replication factor 1, or
-replication-factor), produces -records records (or for -duration) of
-record-bytes each, then reads everything back from the start with a fresh
direct-partition consumer and checks that every acknowledged record was read
exactly once.

With -txn-records N each producer is a transactional producer (its own
transactional.id) writing transactions of N records and committing each
(BeginTransaction, N records, Flush, EndTransaction); the report adds
transactions/s and the commit latency (Flush plus EndTransaction), and the
read back is read_committed and checks that exactly the committed records are
there, each once. -flush-records N is the idempotent counterpart: flush and
wait after each N records, no transaction.

Usage: kgate-bench [flags]
       kgate-bench groups|joinstorm|failover [flags]   (see kgate-bench <subcommand> -h)

`

func parseConfig(args []string, output io.Writer) (config, error) {
	var (
		cfg         config
		brokers     string
		partitions  string
		records     int64
		compression string
		serverPIDs  string
	)
	fs := flag.NewFlagSet("kgate-bench", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}

	fs.StringVar(&brokers, "brokers", "127.0.0.1:9092", "comma-separated bootstrap `addresses`")
	fs.StringVar(&cfg.label, "label", "", "target label shown in the report, e.g. kgate or kafka (default: the first broker address)")
	fs.StringVar(&cfg.topicPrefix, "topic-prefix", "kgate-bench", "prefix of the topics created for each run")
	fs.StringVar(&partitions, "partitions", "8", "partition count, or a comma-separated `list` to run several, e.g. 1,8")
	fs.IntVar(&cfg.recordBytes, "record-bytes", 1024, "record value size in `bytes`")
	fs.Int64Var(&records, "records", 100000, "records to produce per run (exclusive with -duration)")
	fs.DurationVar(&cfg.duration, "duration", 0, "produce for this long per run instead of a fixed -records count")
	fs.Int64Var(&cfg.warmup, "warmup", 50000, "records of an unreported warm-up run before the measured runs (0 = none); JVM brokers need it")
	fs.IntVar(&cfg.rate, "rate", 0, "target produce rate in records/s across all producers (0 = as fast as possible)")
	fs.StringVar(&cfg.acks, "acks", "all", "required acks: all, leader (1) or none (0); idempotence is on only with all")
	fs.IntVar(&cfg.producers, "producers", 1, "concurrent producer clients, each with its own connections")
	fs.StringVar(&compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fs.IntVar(&cfg.batchMaxBytes, "batch-max-bytes", 1<<20, "producer max record batch `bytes` (kgo ProducerBatchMaxBytes)")
	fs.IntVar(&cfg.maxBufferedRecords, "max-buffered-records", 32768, "records a producer may buffer before Produce blocks (kgo MaxBufferedRecords)")
	fs.DurationVar(&cfg.linger, "linger", 0, "producer linger (default: kgo's default)")
	fs.IntVar(&cfg.txnRecords, "txn-records", 0, "produce transactions of this many records, committing each (0 = no transactions)")
	fs.IntVar(&cfg.flushRecords, "flush-records", 0, "idempotent producers flush and wait after each this many records (0 = never; exclusive with -txn-records)")
	fs.DurationVar(&cfg.deliveryTimeout, "delivery-timeout", 2*time.Minute, "fail a record not acknowledged within this long")
	fs.DurationVar(&cfg.consumeTimeout, "consume-timeout", 5*time.Minute, "give up reading back a run after this long")
	fs.BoolVar(&cfg.keepTopics, "keep-topics", false, "do not delete the topics after each run")
	fs.BoolVar(&cfg.json, "json", false, "print results as JSON instead of a table")
	fs.BoolVar(&cfg.verbose, "v", false, "verbose logging, including the Kafka client's")
	fs.StringVar(&serverPIDs, "server-pid", "0", "`pid` of the server process on this machine, or a comma-separated list (a cluster's nodes): report their CPU seconds per GB of records produced and consumed (summed over the list) and kgate-bench's own, and each one's bytes written to disk per byte produced (/proc/<pid>/io write_bytes) and peak RSS (VmHWM) (0 = not measured)")
	fs.IntVar(&cfg.replicationFactor, "replication-factor", 1, "replication factor of the topics created (-1 = the broker's default)")
	fs.StringVar(&cfg.jsonFile, "json-file", "", "also write the results as JSON to this `file`")
	cfg.security.register(fs)

	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var err error
	if cfg.brokers, err = splitList(brokers); err != nil {
		return config{}, fmt.Errorf("-brokers: %w", err)
	}
	if cfg.label == "" {
		cfg.label = cfg.brokers[0]
	}
	if cfg.partitions, err = parsePartitions(partitions); err != nil {
		return config{}, fmt.Errorf("-partitions: %w", err)
	}
	switch {
	case set["records"] && set["duration"]:
		return config{}, errors.New("-records and -duration are mutually exclusive")
	case cfg.duration < 0:
		return config{}, errors.New("-duration must be positive")
	case cfg.duration > 0:
		cfg.records = 0
	case records <= 0:
		return config{}, errors.New("-records must be positive")
	default:
		cfg.records = records
	}
	if _, err := acksOpt(cfg.acks); err != nil {
		return config{}, err
	}
	cfg.compression = strings.ToLower(compression)
	if _, err := compressionCodec(cfg.compression); err != nil {
		return config{}, err
	}
	cfg.lingerSet = set["linger"]
	if cfg.serverPIDs, err = parsePIDList(serverPIDs); err != nil {
		return config{}, fmt.Errorf("-server-pid: %w", err)
	}
	if cfg.securityOpts, err = cfg.security.opts(); err != nil {
		return config{}, err
	}

	switch {
	case cfg.recordBytes < 0:
		return config{}, errors.New("-record-bytes must not be negative")
	case cfg.producers < 1:
		return config{}, errors.New("-producers must be at least 1")
	case cfg.warmup < 0:
		return config{}, errors.New("-warmup must not be negative")
	case cfg.rate < 0:
		return config{}, errors.New("-rate must not be negative")
	case cfg.batchMaxBytes < 1<<10:
		return config{}, errors.New("-batch-max-bytes must be at least 1024")
	case cfg.maxBufferedRecords < 1:
		return config{}, errors.New("-max-buffered-records must be at least 1")
	case cfg.linger < 0:
		return config{}, errors.New("-linger must not be negative")
	case cfg.txnRecords < 0 || cfg.flushRecords < 0:
		return config{}, errors.New("-txn-records and -flush-records must not be negative")
	case cfg.replicationFactor == 0 || cfg.replicationFactor < -1 || cfg.replicationFactor > math.MaxInt16:
		return config{}, errors.New("-replication-factor must be -1 or 1 to 32767")
	case cfg.txnRecords > 0 && cfg.flushRecords > 0:
		return config{}, errors.New("-txn-records and -flush-records are mutually exclusive")
	case (cfg.txnRecords > 0 || cfg.flushRecords > 0) && !cfg.idempotent():
		return config{}, errors.New("-txn-records and -flush-records need -acks all")
	case cfg.deliveryTimeout <= 0 || cfg.consumeTimeout <= 0:
		return config{}, errors.New("timeouts must be positive")
	}
	return cfg, nil
}

func splitList(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// parsePIDList parses a comma-separated list of pids; 0 stands for none.
func parsePIDList(s string) ([]int, error) {
	fields, err := splitList(s)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a pid", f)
		}
		if n > 0 {
			out = append(out, n)
		}
	}
	return out, nil
}

func parsePartitions(s string) ([]int, error) {
	fields, err := splitList(s)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive partition count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// acksOpt maps the -acks flag to kgo's acks.
func acksOpt(s string) (kgo.Acks, error) {
	switch strings.ToLower(s) {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "leader", "1":
		return kgo.LeaderAck(), nil
	case "none", "0":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fmt.Errorf("-acks: unknown value %q (want all, leader or none)", s)
}

func compressionCodec(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("-compression: unknown codec %q", s)
}

// batchRecords is the records per transaction or per flush; 0 when
// producers stream.
func (c config) batchRecords() int { return max(c.txnRecords, c.flushRecords) }

// transactional reports whether producers write transactions.
func (c config) transactional() bool { return c.txnRecords > 0 }

// idempotent reports whether producers use idempotent writes: kgo requires
// acks=all for them, so they are on exactly when acks is all.
func (c config) idempotent() bool {
	a, _ := acksOpt(c.acks)
	return a == kgo.AllISRAcks()
}
