package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceResult is the outcome of one produce phase.
type produceResult struct {
	records int64 // acknowledged records (committed ones when transactional)
	bytes   int64 // acknowledged value bytes (likewise)
	elapsed time.Duration
	latency histogram // Produce call to promise, per acknowledged record

	batches    int64     // committed transactions or completed flushes
	endLatency histogram // per batch: Flush, plus EndTransaction when transactional
	// committed is, per producer, how many of its records (keyed with
	// sequences 0, 1, ...) are committed: the read back must find exactly
	// those. Only in batch modes.
	committed []int64
}

// producer is one client of the produce phase and what it has seen.
type producer struct {
	cl       *kgo.Client
	index    int   // in the record keys
	records  int64 // records this producer sends; -1 = until the deadline
	interval time.Duration
	batch    int64 // records per transaction or flush; 0 = stream
	txn      bool

	mu       sync.Mutex // guards the fields below, written by promises
	acked    int64
	bytes    int64
	failed   int64
	firstErr error
	latency  histogram

	// Written by run only, read after it returns.
	committed  int64 // records of completed batches
	batches    int64
	endLatency histogram
	batchErr   error // why runBatches stopped early
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
		popts := opts
		if cfg.transactional() {
			popts = append(slices.Clip(opts), kgo.TransactionalID(fmt.Sprintf("%s-txn-%d", topic, i)))
		}
		cl, err := kgo.NewClient(popts...)
		if err != nil {
			return nil, fmt.Errorf("producer client: %w", err)
		}
		p := &producer{cl: cl, index: i, records: -1, batch: int64(cfg.batchRecords()), txn: cfg.transactional()}
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
		if p.batch > 0 {
			wg.Go(func() { p.runBatches(ctx, runCtx, stop, topic, payload, start, deadline) })
		} else {
			wg.Go(func() { p.run(ctx, runCtx, stop, topic, payload, start, deadline) })
		}
	}
	wg.Wait()
	res := &produceResult{elapsed: time.Since(start)}

	var failed int64
	var firstErr, batchErr error
	for _, p := range producers {
		if batchErr == nil {
			batchErr = p.batchErr
		}
		p.mu.Lock()
		if p.batch > 0 {
			res.records += p.committed
			res.bytes += p.committed * int64(len(payload))
			res.batches += p.batches
			res.endLatency.merge(&p.endLatency)
			res.committed = append(res.committed, p.committed)
		} else {
			res.records += p.acked
			res.bytes += p.bytes
		}
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
	if batchErr != nil {
		return res, batchErr
	}
	return res, nil
}

// run produces this producer's share, then flushes. ctx is the benchmark's
// context (cancelled on a signal); runCtx is also cancelled by stop on the
// first failed record of any producer.
func (p *producer) run(ctx, runCtx context.Context, stop context.CancelCauseFunc, topic string, payload []byte, start, deadline time.Time) {
	promise := p.promise(stop)

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

// promise returns the callback of this producer's records: it counts each
// acknowledged record and its latency, and on a failure records the error
// and stops every producer.
func (p *producer) promise(stop context.CancelCauseFunc) func(*kgo.Record, error) {
	return func(r *kgo.Record, err error) {
		// The record's own timestamp is when Produce was called.
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
}

// runBatches produces this producer's share in batches of p.batch records:
// each a transaction committed after a Flush when p.txn, else a Flush
// waited for. A batch is never cut short (a transaction is all or nothing):
// the deadline and runCtx are looked at between batches. The first failure
// (a record, the Flush or the commit) ends this producer, and stop ends the
// others.
func (p *producer) runBatches(ctx, runCtx context.Context, stop context.CancelCauseFunc, topic string, payload []byte, start, deadline time.Time) {
	promise := p.promise(stop)
	fail := func(err error) {
		p.batchErr = err
		stop(err)
	}
	for seq := int64(0); p.records < 0 || seq < p.records; {
		if runCtx.Err() != nil || (!deadline.IsZero() && time.Now().After(deadline)) {
			return
		}
		n := p.batch
		if p.records >= 0 {
			n = min(n, p.records-seq)
		}
		if p.txn {
			if err := p.cl.BeginTransaction(); err != nil {
				fail(fmt.Errorf("begin transaction: %w", err))
				return
			}
		}
		for j := range n {
			if p.interval > 0 && !pace(runCtx, start.Add(time.Duration(seq+j)*p.interval)) {
				break
			}
			key := make([]byte, 12)
			binary.BigEndian.PutUint32(key, uint32(p.index))
			binary.BigEndian.PutUint64(key[4:], uint64(seq+j))
			p.cl.Produce(runCtx, &kgo.Record{Topic: topic, Key: key, Value: payload, Timestamp: time.Now()}, promise)
		}
		endStart := time.Now()
		err := p.cl.Flush(ctx)
		p.mu.Lock()
		failed := p.failed
		p.mu.Unlock()
		if err == nil && failed > 0 {
			err = errors.New("a record of the batch failed")
		}
		if err == nil && runCtx.Err() != nil {
			err = context.Cause(runCtx) // a signal, or another producer failed, mid-batch
		}
		if p.txn {
			if err != nil {
				// Leave no transaction open behind: its records must not
				// count, and it would hold the partitions' LSO back.
				if aerr := p.cl.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort); aerr != nil {
					err = errors.Join(err, fmt.Errorf("abort: %w", aerr))
				}
			} else if err = p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				err = fmt.Errorf("commit: %w", err)
			}
		}
		if err != nil {
			fail(err)
			return
		}
		p.endLatency.record(time.Since(endStart))
		p.committed += n
		p.batches++
		seq += n
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
	if cfg.batchRecords() > 0 {
		// Batch records carry a key for the read back; the sticky
		// partitioner ignores it, so they are placed as unkeyed ones are.
		opts = append(opts, kgo.RecordPartitioner(kgo.StickyPartitioner()))
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
