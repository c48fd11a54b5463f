//go:build chaos && linux

package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	txnIn    = "chaos-txn-in"
	txnOut   = "chaos-txn-out"
	txnGroup = "chaos-etl"
	// etlMembers consume-transform-produce members share the input.
	etlMembers = 2
	atomSize   = 3 // records per atom transaction, one a partition
	// The transactional workload runs beside the main one, lighter: about
	// 50 input records a second and 10 atom transactions.
	txnInputEvery = 20 * time.Millisecond
	atomEvery     = 100 * time.Millisecond
	// txnTimeout bounds how long a transaction a fault left open holds
	// back read_committed readers before the coordinator aborts it.
	txnTimeout = 10 * time.Second
)

// txnWorkload is the campaign's transactional workload (-txn): an input
// producer, consume-transform-produce group members copying the input
// into the output in transactions that also commit their input offsets,
// an atom producer committing and aborting multi-partition transactions,
// and a read_committed reader of the output, recording into a TxnHistory.
type txnWorkload struct {
	t      *testing.T
	h      *TxnHistory
	logDir string
	mu     sync.Mutex
	seeds  []string

	ctx    context.Context
	cancel context.CancelFunc
	stopP  chan struct{}
	prodWG sync.WaitGroup // input and atom producers
	runWG  sync.WaitGroup // group members and reader

	etlCommits, etlAborts, etlSessions atomic.Int64
}

func newTxnWorkload(t *testing.T, seeds []string, logDir string) *txnWorkload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &txnWorkload{t: t, h: &TxnHistory{}, logDir: logDir, seeds: seeds, ctx: ctx, cancel: cancel, stopP: make(chan struct{})}
	t.Cleanup(func() {
		w.cancel()
		w.runWG.Wait()
	})
	return w
}

func (w *txnWorkload) setSeeds(seeds []string) {
	w.mu.Lock()
	w.seeds = seeds
	w.mu.Unlock()
}

func (w *txnWorkload) opts(name string, level kgo.LogLevel) ([]kgo.Opt, func()) {
	w.mu.Lock()
	seeds := w.seeds
	w.mu.Unlock()
	logf, err := os.Create(filepath.Join(w.logDir, "client-"+name+".log"))
	if err != nil {
		w.t.Fatal(err)
	}
	return []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.Dialer(slowFailedDial),
		kgo.WithLogger(kgo.BasicLogger(logf, clientLogLevel(level), func() string { return time.Now().Format("15:04:05.000 ") }))}, func() { logf.Close() }
}

// failedDialPause is how long slowFailedDial holds a failed dial.
const failedDialPause = 50 * time.Millisecond

// slowFailedDial is the transactional clients' dialer: a dial that fails
// returns failedDialPause later. franz-go (v1.22.3, twmb/franz-go#239)
// sends a transaction's AddPartitionsToTxn to the coordinator it cached
// again and again without a pause while that node refuses connections,
// until the node is back or leaves the Metadata: after a leader kill,
// about 6,000 dials and 30,000 log lines a second in this process for
// the whole kill, CPU taken from the clients whose recovery the campaign
// times. Nothing else changes: the dial fails all the same.
func slowFailedDial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		t := time.NewTimer(failedDialPause)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return c, err
}

func (w *txnWorkload) client(name string, opts ...kgo.Opt) (*kgo.Client, func()) {
	base, closeLog := w.opts(name, kgo.LogLevelWarn)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	return cl, func() { cl.Close(); closeLog() }
}

func (w *txnWorkload) start() {
	cl, done := w.client("txn-admin")
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	for _, tp := range []string{txnIn, txnOut} {
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, nil, tp)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			w.t.Fatalf("create topic %s: %v", tp, err)
		}
	}
	cancel()
	done()
	w.prodWG.Add(2)
	go w.produceInput()
	go w.produceAtoms()
	for i := range etlMembers {
		w.runWG.Add(1)
		go w.transform(i)
	}
	w.runWG.Add(1)
	go w.readCommitted()
}

// produceInput sends "in-<n>" with acks=all and idempotence until stop.
func (w *txnWorkload) produceInput() {
	defer w.prodWG.Done()
	cl, done := w.client("txn-input", kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	defer done()
	tick := time.NewTicker(txnInputEvery)
	defer tick.Stop()
	for seq := int64(0); ; seq++ {
		select {
		case <-w.stopP:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := cl.Flush(ctx); err != nil {
				w.t.Errorf("input producer: flush: %v", err)
			}
			cancel()
			return
		case <-tick.C:
		}
		v := Value("in", seq)
		cl.Produce(w.ctx, &kgo.Record{Topic: txnIn, Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
			p := Produce{Value: v, At: time.Now()}
			if err != nil {
				p.Err = err.Error()
			} else {
				p.Acked, p.Partition, p.Offset = true, r.Partition, r.Offset
			}
			w.h.AddInput(p)
		})
	}
}

// produceAtoms runs transactions of atomSize records, one to each
// partition, two in three committed and the rest aborted, until stop. A
// transaction that fails leaves its client for a new one with the same
// transactional id, which fences it and ends what it left open.
func (w *txnWorkload) produceAtoms() {
	defer w.prodWG.Done()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	newClient := func() (*kgo.Client, func()) {
		return w.client("txn-atom", kgo.TransactionalID("chaos-atom"), kgo.TransactionTimeout(txnTimeout),
			kgo.DefaultProduceTopic(txnOut), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, done := newClient()
	defer func() { done() }()
	tick := time.NewTicker(atomEvery)
	defer tick.Stop()
	for id := int64(0); ; id++ {
		select {
		case <-w.stopP:
			return
		case <-tick.C:
		}
		a := AtomTxn{ID: id, Size: atomSize, Commit: rng.Intn(3) != 0}
		ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
		err := cl.BeginTransaction()
		if err == nil {
			w.h.AddAtom(a) // begun: its records may show up from here on
			e := kgo.AbortingFirstErrPromise(cl)
			for j := range atomSize {
				cl.Produce(ctx, &kgo.Record{Partition: int32(j % partitions), Value: []byte(AtomValue(id, j))}, e.Promise())
			}
			if e.Err() != nil {
				a.Commit = false
			}
			end := kgo.TryAbort
			if a.Commit {
				end = kgo.TryCommit
			}
			err = cl.EndTransaction(ctx, end)
			a.Ended = err == nil
			if err != nil {
				a.Err = err.Error()
			}
			w.h.AddAtom(a)
		}
		cancel()
		if err != nil {
			done()
			cl, done = newClient()
		}
	}
}

// transform is consume-transform-produce member i: each poll's records
// are copied to the output partition of the same number in one
// transaction that also commits the member's input offsets. A session
// whose transaction fails is replaced by a new one with the same
// transactional id.
func (w *txnWorkload) transform(i int) {
	defer w.runWG.Done()
	name := fmt.Sprintf("txn-etl-%d", i)
	newSession := func() (*kgo.GroupTransactSession, func()) {
		base, closeLog := w.opts(name, kgo.LogLevelInfo)
		s, err := kgo.NewGroupTransactSession(append(base,
			kgo.TransactionalID(fmt.Sprintf("chaos-etl-%d", i)), kgo.TransactionTimeout(txnTimeout),
			kgo.ConsumerGroup(txnGroup), kgo.ConsumeTopics(txnIn), kgo.SessionTimeout(10*time.Second),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DefaultProduceTopic(txnOut), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			w.t.Error(err)
			closeLog()
			return nil, nil
		}
		w.etlSessions.Add(1)
		return s, func() { s.Close(); closeLog() }
	}
	sess, done := newSession()
	if sess == nil {
		return
	}
	defer func() { done() }()
	for w.ctx.Err() == nil {
		fs := sess.PollRecords(w.ctx, 200)
		if fs.NumRecords() == 0 {
			continue
		}
		err := sess.Begin()
		if err == nil {
			e := kgo.AbortingFirstErrPromise(sess.Client())
			fs.EachRecord(func(r *kgo.Record) {
				sess.Produce(w.ctx, &kgo.Record{Partition: r.Partition, Value: []byte(OutValue(string(r.Value)))}, e.Promise())
			})
			ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
			var committed bool
			committed, err = sess.End(ctx, e.Err() == nil)
			cancel()
			if committed {
				w.etlCommits.Add(1)
			} else {
				w.etlAborts.Add(1)
			}
		}
		if err != nil && w.ctx.Err() == nil {
			done()
			if sess, done = newSession(); sess == nil {
				return
			}
		}
	}
}

// readCommitted reads the output from its start with read_committed.
func (w *txnWorkload) readCommitted() {
	defer w.runWG.Done()
	offs := map[int32]kgo.Offset{}
	for p := range int32(partitions) {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl, done := w.client("txn-reader", kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{txnOut: offs}))
	defer done()
	for w.ctx.Err() == nil {
		cl.PollRecords(w.ctx, 1000).EachRecord(func(r *kgo.Record) {
			w.h.AddRead(Read{Reader: "committed", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), At: time.Now()})
		})
	}
}

// finish stops the producers, waits for the group to commit up to the end
// of the input, stops the members, ends each output partition with an
// end record and reads both topics back. It returns whether the group
// drained and whether the final reads completed; what went wrong is
// logged.
func (w *txnWorkload) finish(limit time.Duration) (drained, complete bool) {
	close(w.stopP)
	w.prodWG.Wait()
	cl, done := w.client("txn-check", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer done()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ends, err := adm.ListEndOffsets(ctx, txnIn)
	cancel()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		w.t.Errorf("transactional workload: input end offsets: %v", err)
		return false, false
	}
	// Each check with a client of its own: franz-go keeps dialling a
	// cached coordinator that died.
	err = pollUntil(limit, func() error {
		cl, done := w.client("txn-check")
		defer done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := kadm.NewClient(cl).FetchOffsets(ctx, txnGroup)
		if err != nil {
			return err
		}
		var behind error
		ends.Each(func(e kadm.ListedOffset) {
			if o, _ := offs.Lookup(txnIn, e.Partition); o.At < e.Offset && behind == nil {
				behind = fmt.Errorf("input partition %d committed %d of %d", e.Partition, o.At, e.Offset)
			}
		})
		return behind
	})
	drained = err == nil
	if err != nil {
		w.t.Logf("transactional workload: the group did not drain the input: %v", err)
	}
	w.cancel()
	w.runWG.Wait()

	ctx, cancel = context.WithTimeout(context.Background(), limit)
	defer cancel()
	for p := range int32(partitions) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: txnOut, Partition: p, Value: []byte(EndValue(p))}).FirstErr(); err != nil {
			w.t.Errorf("transactional workload: end record of partition %d: %v", p, err)
			return drained, false
		}
	}
	base, closeLog := w.opts("txn-final", kgo.LogLevelWarn)
	defer closeLog()
	in, err := readAll(ctx, base, txnIn, kgo.ReadUncommitted(), func(r *kgo.Record, end int64) bool { return r.Offset >= end-1 })
	if err != nil {
		w.t.Errorf("transactional workload: final read of the input: %v", err)
		return drained, false
	}
	out, err := readAll(ctx, base, txnOut, kgo.ReadCommitted(), func(r *kgo.Record, _ int64) bool { return string(r.Value) == EndValue(r.Partition) })
	if err != nil {
		w.t.Errorf("transactional workload: final read_committed read of the output: %v", err)
		return drained, false
	}
	w.h.SetFinal(in, out)
	return drained, true
}

// going reports whether the workload has got going: an input record copied
// and an atom transaction committed.
func (w *txnWorkload) going() error {
	if w.etlCommits.Load() == 0 {
		return fmt.Errorf("no consume-transform-produce transaction committed yet")
	}
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	for _, a := range w.h.Atoms {
		if a.Ended && a.Commit {
			return nil
		}
	}
	return fmt.Errorf("no atom transaction committed yet")
}

// report checks the history and logs what the workload did.
func (w *txnWorkload) report(drained, complete bool) []Anomaly {
	as := w.h.CheckTxn(complete, drained)
	w.h.mu.Lock()
	acked, unknown := 0, 0
	for _, p := range w.h.Inputs {
		if p.Acked {
			acked++
		}
	}
	ends := map[int64]AtomTxn{}
	for _, a := range w.h.Atoms {
		ends[a.ID] = a
	}
	committed, aborted := 0, 0
	for _, a := range ends {
		switch {
		case !a.Ended:
			unknown++
		case a.Commit:
			committed++
		default:
			aborted++
		}
	}
	reads := len(w.h.Reads)
	w.h.mu.Unlock()
	w.t.Logf("transactional workload: %d inputs acknowledged; consume-transform-produce: %d transactions committed, %d aborted, %d sessions; atom transactions: %d committed, %d aborted, %d of unknown outcome; %d records read with read_committed; %d anomalies",
		acked, w.etlCommits.Load(), w.etlAborts.Load(), w.etlSessions.Load(), committed, aborted, unknown, reads, len(as))
	if committed == 0 || w.etlCommits.Load() == 0 {
		as = append(as, Anomaly{"no-progress", "no transaction committed: the transactional workload proved nothing"})
	}
	return as
}
