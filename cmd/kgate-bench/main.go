// Command kgate-bench measures produce/consume throughput and produce latency
// of a Kafka-protocol server. The same tool runs against kgate and Apache
// Kafka so that their figures compare like for like; see -h.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process globals; it returns the exit code:
// 0 if every run passed, 1 if any failed, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "groups", "joinstorm":
			return runGroupsCmd(args[0], args[1:], stdout, stderr)
		case "failover":
			return runFailoverCmd(args[1:], stdout, stderr)
		case "failover-summary":
			return runFailoverSummary(args[1:], stdout, stderr)
		}
	}
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kgate-bench:", err)
		return 2
	}
	log := newLogger(stderr, cfg.verbose)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := cfg.security.createScramUser(ctx, cfg.brokers); err != nil {
		log.Error("create SCRAM user", "err", err)
		return 1
	}
	admCl, err := kgo.NewClient(clientOpts(cfg, log)...)
	if err != nil {
		log.Error("admin client", "err", err)
		return 1
	}
	adm := kadm.NewClient(admCl)
	defer adm.Close()

	if cfg.warmup > 0 {
		warmup(ctx, log, cfg, adm)
	}
	var results []result
	for _, n := range cfg.partitions {
		if ctx.Err() != nil {
			break
		}
		results = append(results, runOne(ctx, log, cfg, adm, n))
	}

	if cfg.jsonFile != "" {
		if err := writeJSONFile(cfg.jsonFile, results); err != nil {
			log.Error("write JSON file", "err", err)
			return 1
		}
	}
	if cfg.json {
		err = writeJSON(stdout, results)
	} else {
		err = writeTable(stdout, results)
	}
	if err != nil {
		log.Error("write report", "err", err)
		return 1
	}
	for _, r := range results {
		if !r.OK {
			return 1
		}
	}
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// runGroupsCmd runs the groups or joinstorm subcommand; exit codes as run.
func runGroupsCmd(mode string, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseGroupsConfig(mode, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kgate-bench:", err)
		return 2
	}
	log := newLogger(stderr, cfg.verbose).With("mode", mode, "label", cfg.label)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	res, err := runGroups(ctx, log, cfg)
	if err != nil {
		res.OK = false
		res.Error = err.Error()
		log.Error(mode+" failed", "err", err)
	}
	return report(stdout, log, cfg.json, res, res.OK, writeGroupsTable)
}

// report writes a subcommand's result as JSON or as its table and returns
// the exit code: 1 when the run failed or the report could not be written.
func report[R any](stdout io.Writer, log *slog.Logger, asJSON bool, res R, ok bool, table func(io.Writer, R) error) int {
	var err error
	if asJSON {
		err = writeJSON(stdout, res)
	} else {
		err = table(stdout, res)
	}
	if err != nil {
		log.Error("write report", "err", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

// warmup runs an unreported, unpaced round of cfg.warmup records on the
// largest partition count, so that a JVM broker's JIT and the page cache are
// warm before the first measured run. A failure is only logged: the measured
// runs report it.
func warmup(ctx context.Context, log *slog.Logger, cfg config, adm *kadm.Client) {
	w := cfg
	w.records, w.duration, w.rate = cfg.warmup, 0, 0
	w.topicPrefix = cfg.topicPrefix + "-warmup"
	log.Info("warming up", "records", w.records)
	if r := runOne(ctx, log, w, adm, slices.Max(cfg.partitions)); !r.OK {
		log.Warn("warm-up failed", "err", r.Error)
	}
}

// runOne benchmarks one partition count on a fresh topic.
func runOne(ctx context.Context, log *slog.Logger, cfg config, adm *kadm.Client, partitions int) result {
	topic := fmt.Sprintf("%s-p%d-%08x", cfg.topicPrefix, partitions, rand.Uint32())
	res := result{
		Label:       cfg.label,
		Brokers:     strings.Join(cfg.brokers, ","),
		Topic:       topic,
		Partitions:  partitions,
		RecordBytes: cfg.recordBytes,
		Producers:   cfg.producers,
		Acks:        cfg.acks,
		Compression: cfg.compression,

		Transactional: cfg.transactional(),
		BatchRecords:  cfg.batchRecords(),
	}
	log = log.With("label", cfg.label, "topic", topic)
	fail := func(phase string, err error) result {
		res.Error = fmt.Sprintf("%s: %v", phase, err)
		log.Error(phase+" failed", "err", err)
		return res
	}

	log.Info("creating topic", "partitions", partitions)
	if err := createTopicRF(ctx, adm, topic, partitions, int16(cfg.replicationFactor)); err != nil {
		return fail("create topic", err)
	}
	if !cfg.keepTopics {
		// Clean up even after a signal.
		defer deleteTopic(context.WithoutCancel(ctx), log, adm, topic)
	}

	log.Info("producing", "records", cfg.records, "duration", cfg.duration, "record_bytes", cfg.recordBytes, "producers", cfg.producers)
	prodCPU := startPhaseCPU(cfg.serverPIDs)
	prodDisk := startPhaseDisk(cfg.serverPIDs)
	prod, err := produce(ctx, log, cfg, topic)
	if prod != nil {
		res.setProduce(prod)
	}
	var produceCPUOK bool
	if prod != nil {
		res.ServerCPUPerGBProduce, res.ClientCPUPerGBProduce, produceCPUOK = prodCPU.perGB(prod.bytes)
		res.setDisk(prodDisk, prod.bytes, cfg.serverPIDs)
	}
	if err != nil {
		return fail("produce", err)
	}
	log.Info("produced", "records", prod.records, "elapsed", prod.elapsed.Round(time.Millisecond),
		"rec_per_s", int64(res.ProduceRecordsPerS), "p50_ms", res.ProduceLatencyP50Ms, "p99_ms", res.ProduceLatencyP99Ms)

	if cfg.transactional() {
		// A broker may write a commit's markers after answering EndTxn
		// (Kafka does): read once every partition is stable.
		if err := waitStable(ctx, adm, topic, cfg.consumeTimeout); err != nil {
			return fail("wait for stable offsets", err)
		}
	}
	ranges, err := listOffsets(ctx, adm, topic)
	if err != nil {
		return fail("list offsets", err)
	}
	log.Info("consuming")
	consCPU := startPhaseCPU(cfg.serverPIDs)
	cons, err := consume(ctx, log, cfg, topic, ranges, prod.committed)
	if cons != nil {
		res.setConsume(cons)
		var ok bool
		res.ServerCPUPerGBConsume, res.ClientCPUPerGBConsume, ok = consCPU.perGB(cons.bytes)
		res.CPUMeasured = ok && produceCPUOK
		res.updatePeakRSS(cfg.serverPIDs)
	}
	if err != nil {
		return fail("consume", err)
	}
	log.Info("consumed", "records", cons.records, "elapsed", cons.elapsed.Round(time.Millisecond), "rec_per_s", int64(res.ConsumeRecordsPerS))

	switch {
	case cfg.transactional() && cons.expected != prod.records+cons.controls:
		return fail("verify", fmt.Errorf("topic offsets hold %d records, read_committed read %d committed records and %d markers", cons.expected, cons.records, cons.controls))
	case cfg.transactional() && cons.controls < prod.batches:
		return fail("verify", fmt.Errorf("%d transactions committed, %d markers read", prod.batches, cons.controls))
	case !cfg.transactional() && cons.expected != prod.records:
		return fail("verify", fmt.Errorf("topic offsets hold %d records, producers had %d acknowledged", cons.expected, prod.records))
	case cons.records != prod.records:
		return fail("verify", fmt.Errorf("read %d records, producers had %d acknowledged", cons.records, prod.records))
	}
	res.OK = true
	return res
}
