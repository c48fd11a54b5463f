package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceResult is the outcome of one produce phase.
type produceResult struct {
	records int64 // acknowledged records
	bytes   int64 // acknowledged value bytes
	elapsed time.Duration
	latency histogram // Produce call to promise, per acknowledged record
}

// producer is one client of the produce phase and what it has seen.
type producer struct {
	cl       *kgo.Client
	records  int64 // records this producer sends; -1 = until the deadline
	interval time.Duration

	mu       sync.Mutex // guards the fields below, written by promises
	acked    int64
	bytes    int64
	failed   int64
	firstErr error
	latency  histogram
}

// produce runs the produce phase against topic with cfg.producers clients and
// returns once every record has been acknowledged or failed.
func produce(ctx context.Context, log *slog.Logger, cfg config, topic string) (*produceResult, error) {
	opts, err := producerOpts(cfg, log)
	if err != nil {
		return nil, err
	}
	payload := make([]byte, cfg.recordBytes)
	_, _ = rand.NewChaCha8([32]byte{}).Read(payload) // incompressible, reproducible

	producers := make([]*producer, cfg.producers)
	defer func() {
		for _, p := range producers {
			if p != nil {
				p.cl.Close()
			}
		}
	}()
	for i := range producers {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, fmt.Errorf("producer client: %w", err)
		}
		p := &producer{cl: cl, records: -1}
		producers[i] = p
		if cfg.records > 0 {
			p.records = cfg.records / int64(cfg.producers)
			if int64(i) < cfg.records%int64(cfg.producers) {
				p.records++
			}
		}
		if cfg.rate > 0 {
			p.interval = time.Duration(float64(time.Second) * float64(cfg.producers) / float64(cfg.rate))
		}
		// Connect before the clock starts.
		if err := cl.Ping(ctx); err != nil {
			return nil, fmt.Errorf("producer connect: %w", err)
		}
	}

	// The first failure stops every producer; records already buffered are
	// still flushed so the counts stay exact.
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	var deadline time.Time
	start := time.Now()
	if cfg.duration > 0 {
		deadline = start.Add(cfg.duration)
	}
	var wg sync.WaitGroup
	for _, p := range producers {
		wg.Go(func() { p.run(ctx, runCtx, stop, topic, payload, start, deadline) })
	}
	wg.Wait()
	res := &produceResult{elapsed: time.Since(start)}

	var failed int64
	var firstErr error
	for _, p := range producers {
		p.mu.Lock()
		res.records += p.acked
		res.bytes += p.bytes
		res.latency.merge(&p.latency)
		failed += p.failed
		if firstErr == nil {
			firstErr = p.firstErr
		}
		p.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if failed > 0 {
		return res, fmt.Errorf("%d records failed (%d acknowledged): first error: %w", failed, res.records, firstErr)
	}
	return res, nil
}

// run produces this producer's share, then flushes. ctx is the benchmark's
// context (cancelled on a signal); runCtx is also cancelled by stop on the
// first failed record of any producer.
func (p *producer) run(ctx, runCtx context.Context, stop context.CancelCauseFunc, topic string, payload []byte, start, deadline time.Time) {
	promise := func(r *kgo.Record, err error) {
		// The record's own timestamp is when Produce was called (set below),
		// so no per-record closure is needed.
		lat := time.Since(r.Timestamp)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.failed++
			if p.firstErr == nil {
				p.firstErr = err
			}
			stop(err)
			return
		}
		p.acked++
		p.bytes += int64(len(r.Value))
		p.latency.record(lat)
	}

	for i := int64(0); p.records < 0 || i < p.records; i++ {
		if runCtx.Err() != nil {
			break
		}
		if p.interval > 0 && !pace(runCtx, start.Add(time.Duration(i)*p.interval)) {
			break
		}
		now := time.Now()
		if !deadline.IsZero() && now.After(deadline) {
			break
		}
		p.cl.Produce(runCtx, &kgo.Record{Topic: topic, Value: payload, Timestamp: now}, promise)
	}
	// Flush with the outer context: after a record failure the rest still
	// completes, only a signal abandons them.
	if err := p.cl.Flush(ctx); err != nil {
		stop(err)
	}
}

// pace sleeps until due if that is more than a millisecond away, and reports
// false if ctx was cancelled meanwhile.
func pace(ctx context.Context, due time.Time) bool {
	d := time.Until(due)
	if d < time.Millisecond {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func producerOpts(cfg config, log *slog.Logger) ([]kgo.Opt, error) {
	acks, err := acksOpt(cfg.acks)
	if err != nil {
		return nil, err
	}
	codec, err := compressionCodec(cfg.compression)
	if err != nil {
		return nil, err
	}
	opts := append(clientOpts(cfg, log),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchMaxBytes(int32(cfg.batchMaxBytes)),
		kgo.MaxBufferedRecords(cfg.maxBufferedRecords),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordDeliveryTimeout(cfg.deliveryTimeout),
	)
	if !cfg.idempotent() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if cfg.lingerSet {
		opts = append(opts, kgo.ProducerLinger(cfg.linger))
	}
	return opts, nil
}

// clientOpts are the options shared by producers and consumers.
func clientOpts(cfg config, log *slog.Logger) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(cfg.brokers...),
		kgo.ClientID("kgate-bench"),
		// Recover from a stale leader in well under kgo's default 5s.
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.WithLogger(kgoLogger{log: log.With("component", "kgo"), verbose: cfg.verbose}),
	}, cfg.securityOpts...)
}
