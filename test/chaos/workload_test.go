//go:build chaos && linux

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topic      = "chaos"
	group      = "chaos-group"
	partitions = 3
	producers  = 2
	// produceEvery paces each producer (about 100 records a second each):
	// load enough to see every fault, little enough for a 2-core machine.
	produceEvery = 10 * time.Millisecond
)

// workload is the producers, the group members, the assign() reader and
// the committed-offset observer, all recording into one History.
type workload struct {
	t      *testing.T
	h      *History
	seeds  []string // guarded by mu
	logDir string   // the group members' client logs go here (kept with the nodes' on a failure)

	ctx    context.Context
	cancel context.CancelFunc
	prodWG sync.WaitGroup // producers
	readWG sync.WaitGroup // readers and observer
	stopP  chan struct{}

	// Progress is counted by the records' own timestamps (set when they
	// were sent): the newest record each producer had acknowledged and each
	// reader read, so that an answer already on its way when a fault hit
	// does not count as moving on after it.
	lastAck  [producers]atomic.Int64 // unix nanos
	lastRead []atomic.Int64          // group members, then the assign() reader
	clients  []string                // each group member's client (parseClients)
	lost     atomic.Int64            // partitions lost by group members (OnPartitionsLost)
	faultNow atomic.Int64            // index of the fault in progress, for lostBy
	mu       sync.Mutex
	lostBy   map[int64]int      // fault index -> members that lost partitions during it
	lostWhy  map[int64][]string // fault index -> the group error franz-go logged last before each loss
	members  []*kgo.Client
}

func newWorkload(t *testing.T, seeds []string, logDir string, clients []string) *workload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{t: t, h: &History{}, seeds: seeds, logDir: logDir, ctx: ctx, cancel: cancel,
		stopP: make(chan struct{}), lostBy: map[int64]int{}, lostWhy: map[int64][]string{},
		clients: clients, lastRead: make([]atomic.Int64, len(clients)+1)}
	w.faultNow.Store(-1)
	t.Cleanup(func() {
		w.cancel()
		w.readWG.Wait()
	})
	return w
}

func (w *workload) client(opts ...kgo.Opt) *kgo.Client {
	w.t.Helper()
	w.mu.Lock()
	seeds := w.seeds
	w.mu.Unlock()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	return cl
}

// setSeeds sets the bootstrap list of clients made from now on (those
// running keep theirs, which may name nodes that left).
func (w *workload) setSeeds(seeds []string) {
	w.mu.Lock()
	w.seeds = seeds
	w.mu.Unlock()
}

func (w *workload) createTopic() {
	cl := w.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		w.t.Fatalf("create topic: %v", err)
	}
}

func (w *workload) start() {
	// A member's program that cannot run here fails the campaign before
	// any load: a missing client is not a passing run.
	argv := map[string][]string{}
	for _, k := range w.clients {
		if k == franzGo || argv[k] != nil {
			continue
		}
		a, err := programArgv(k, w.t.TempDir())
		if err != nil {
			w.t.Fatalf("group member client %s: %v", k, err)
		}
		argv[k] = a
	}
	w.createTopic()
	for i := range producers {
		w.prodWG.Add(1)
		go w.produce(i)
	}
	for i, k := range w.clients {
		w.readWG.Add(1)
		if k == franzGo {
			go w.consumeGroup(i)
		} else {
			go w.consumeProgram(i, k, argv[k])
		}
	}
	w.readWG.Add(2)
	go w.readAssigned()
	go w.observeCommits()
}

// produce sends unique values with acks=all and idempotence (franz-go's
// default) until stopProducers, then flushes.
func (w *workload) produce(i int) {
	defer w.prodWG.Done()
	name := fmt.Sprintf("p%d", i)
	logf, err := os.Create(filepath.Join(w.logDir, "client-"+name+".log"))
	if err != nil {
		w.t.Error(err)
		return
	}
	defer logf.Close()
	cl := w.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.WithLogger(kgo.BasicLogger(logf, clientLogLevel(kgo.LogLevelWarn), func() string { return time.Now().Format("15:04:05.000 ") })))
	defer cl.Close()
	tick := time.NewTicker(produceEvery)
	defer tick.Stop()
	for seq := int64(0); ; seq++ {
		select {
		case <-w.stopP:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := cl.Flush(ctx); err != nil {
				w.t.Errorf("producer %s: flush: %v", name, err)
			}
			cancel()
			return
		case <-tick.C:
		}
		v := Value(name, seq)
		cl.Produce(w.ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
			p := Produce{Value: v, At: time.Now()}
			if err != nil {
				p.Err = err.Error()
			} else {
				p.Acked, p.Partition, p.Offset = true, r.Partition, r.Offset
				storeMax(&w.lastAck[i], r.Timestamp)
			}
			w.h.AddProduce(p)
		})
	}
}

// consumeGroup is one group member: it polls, records, commits what it
// polled, and only then lets a rebalance happen.
func (w *workload) consumeGroup(i int) {
	defer w.readWG.Done()
	name := fmt.Sprintf("c%d", i)
	// franz-go's own account of the member's session (heartbeat and
	// join errors, partitions lost) explains a member the group lost.
	logf, err := os.Create(filepath.Join(w.logDir, "client-"+name+".log"))
	if err != nil {
		w.t.Error(err)
		return
	}
	defer logf.Close()
	mlog := &memberLog{Logger: kgo.BasicLogger(logf, clientLogLevel(kgo.LogLevelInfo), func() string { return time.Now().Format("15:04:05.000 ") })}
	var epoch atomic.Int64
	// What the member holds, with its generation at each rebalance event
	// (franz-go runs the callbacks one at a time, between a SyncGroup and
	// the next JoinGroup), and the node that answered the SyncGroup.
	var heldMu sync.Mutex
	held := map[int32]bool{}
	syncs := &syncHook{}
	record := func(event string, cl *kgo.Client, m map[string][]int32) {
		epoch.Add(1)
		heldMu.Lock()
		defer heldMu.Unlock()
		switch event {
		case "assigned":
			for _, p := range m[topic] {
				held[p] = true
			}
		case "revoked":
			for _, p := range m[topic] {
				delete(held, p)
			}
		case "lost":
			clear(held)
		}
		_, gen := cl.GroupMetadata()
		a := Assignment{Member: name, Event: event, Generation: gen, Partitions: heldList(held), At: time.Now()}
		if event == "assigned" {
			a.Coordinator, a.SyncSent = syncs.last()
		}
		w.h.AddAssignment(a)
	}
	cl := w.client(
		kgo.WithLogger(mlog), kgo.WithHooks(syncs),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(10*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) { record("assigned", cl, m) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, m map[string][]int32) { record("revoked", cl, m) }),
		kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			record("lost", cl, m)
			w.lost.Add(1)
			w.mu.Lock()
			w.lostBy[w.faultNow.Load()]++
			w.lostWhy[w.faultNow.Load()] = append(w.lostWhy[w.faultNow.Load()], name+": "+mlog.lastGroupErr())
			w.mu.Unlock()
		}),
	)
	w.mu.Lock()
	w.members = append(w.members, cl)
	w.mu.Unlock()
	defer cl.Close()
	for w.ctx.Err() == nil {
		fs := cl.PollRecords(w.ctx, 500)
		var rs []*kgo.Record
		e := int(epoch.Load())
		fs.EachRecord(func(r *kgo.Record) {
			rs = append(rs, r)
			w.h.AddRead(Read{Reader: name, Epoch: e, Group: true, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), At: time.Now()})
			storeMax(&w.lastRead[i], r.Timestamp)
		})
		if len(rs) > 0 {
			ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
			// A failed commit is re-read later. An acknowledged one goes
			// into the history, as the other clients' do, so that the
			// checker can tell a member's own commits answered out of
			// order from a committed offset that kgate moved back, with
			// the generation its request carried: franz-go holds a commit
			// made while the member rejoins and sends it in the new
			// generation.
			if gen, err := commitRead(ctx, cl, rs); err == nil {
				next := map[int32]int64{}
				for _, r := range rs {
					next[r.Partition] = max(next[r.Partition], r.Offset+1)
				}
				now := time.Now()
				for p, o := range next {
					w.h.AddClientCommit(ClientCommit{Member: name, Partition: p, Offset: o, At: now, Generation: gen})
				}
			}
			cancel()
		}
		cl.AllowRebalance()
	}
}

// commitRead commits the offsets after rs as kgo's CommitRecords does and
// returns the generation the acknowledged request carried.
func commitRead(ctx context.Context, cl *kgo.Client, rs []*kgo.Record) (int32, error) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range rs {
		if offsets[r.Topic] == nil {
			offsets[r.Topic] = map[int32]kgo.EpochOffset{}
		}
		next := kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		if at, ok := offsets[r.Topic][r.Partition]; !ok || at.Less(next) {
			offsets[r.Topic][r.Partition] = next
		}
	}
	var gen int32
	var cerr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		gen = req.Generation
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
					cerr = err
				}
			}
		}
	})
	return gen, cerr
}

// syncHook remembers the node that answered a group member's last
// SyncGroup and when that request was sent, so that an assignment can
// name the coordinator that completed it.
type syncHook struct {
	mu   sync.Mutex
	sent time.Time
	node int32
}

func (h *syncHook) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, timeToWrite time.Duration, err error) {
	if key != int16(kmsg.SyncGroup) || err != nil {
		return
	}
	h.mu.Lock()
	h.sent = time.Now().Add(-timeToWrite)
	h.mu.Unlock()
}

func (h *syncHook) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != int16(kmsg.SyncGroup) || err != nil {
		return
	}
	h.mu.Lock()
	h.node = meta.NodeID
	h.mu.Unlock()
}

func (h *syncHook) last() (int32, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.node, h.sent
}

func heldList(held map[int32]bool) []int32 {
	out := make([]int32, 0, len(held))
	for p := range held {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// memberLog is a group member's franz-go log that also remembers the last
// group error (a heartbeat, join or sync that failed), which says why the
// member then loses its partitions.
type memberLog struct {
	kgo.Logger
	mu   sync.Mutex
	last string
}

func (l *memberLog) Log(level kgo.LogLevel, msg string, kv ...any) {
	if msg == "heartbeat errored" || msg == "group manage loop errored" {
		l.mu.Lock()
		if l.last == "" || msg == "heartbeat errored" {
			l.last = fmt.Sprintf("%s: %v", msg, kv)
		}
		l.mu.Unlock()
	}
	l.Logger.Log(level, msg, kv...)
}

// lastGroupErr returns the last group error and forgets it.
func (l *memberLog) lastGroupErr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.last
	l.last = ""
	return s
}

// clientLogLevel is level, or debug with KGATE_CHAOS_CLIENT_DEBUG set (a
// franz-go debug log shows each request, its broker and its answer).
func clientLogLevel(level kgo.LogLevel) kgo.LogLevel {
	if os.Getenv("KGATE_CHAOS_CLIENT_DEBUG") != "" {
		return kgo.LogLevelDebug
	}
	return level
}

// readAssigned reads every partition from its start with assign().
func (w *workload) readAssigned() {
	defer w.readWG.Done()
	offs := map[int32]kgo.Offset{}
	for p := range int32(partitions) {
		offs[p] = kgo.NewOffset().AtStart()
	}
	logf, err := os.Create(filepath.Join(w.logDir, "client-assign.log"))
	if err != nil {
		w.t.Error(err)
		return
	}
	defer logf.Close()
	cl := w.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.WithLogger(kgo.BasicLogger(logf, clientLogLevel(kgo.LogLevelWarn), func() string { return time.Now().Format("15:04:05.000 ") })))
	defer cl.Close()
	for w.ctx.Err() == nil {
		fs := cl.PollRecords(w.ctx, 1000)
		fs.EachRecord(func(r *kgo.Record) {
			w.h.AddRead(Read{Reader: "assign", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), At: time.Now()})
			storeMax(&w.lastRead[len(w.clients)], r.Timestamp)
		})
	}
}

// observeCommits reads the group's committed offsets back every 200 ms.
func (w *workload) observeCommits() {
	defer w.readWG.Done()
	cl := w.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(w.ctx, 3*time.Second)
		offs, err := adm.FetchOffsets(ctx, group)
		cancel()
		if err != nil {
			continue
		}
		now := time.Now()
		for p := range int32(partitions) {
			if o, ok := offs.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
				w.h.AddCommit(CommitSample{Partition: p, Offset: o.At, At: now})
			}
		}
	}
}

// storeMax raises v to ts (unix nanos) if ts is later.
func storeMax(v *atomic.Int64, ts time.Time) {
	n := ts.UnixNano()
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// progressed reports whether every producer had a record sent after t
// acknowledged, and every group member and the assign() reader read one;
// if not, it names who has not.
func (w *workload) progressed(t time.Time) error {
	for i := range producers {
		if w.lastAck[i].Load() <= t.UnixNano() {
			return fmt.Errorf("producer p%d has no record sent since %s acknowledged", i, t.Format("15:04:05.000"))
		}
	}
	for i := range w.lastRead {
		if w.lastRead[i].Load() <= t.UnixNano() {
			name := "assign() reader"
			if i < len(w.clients) {
				name = fmt.Sprintf("group member c%d (%s)", i, w.clients[i])
			}
			return fmt.Errorf("%s has read no record sent since %s", name, t.Format("15:04:05.000"))
		}
	}
	return nil
}

func (w *workload) stopProducers() {
	close(w.stopP)
	w.prodWG.Wait()
}

// drain waits until the group has committed, and the assign() reader
// read, up to the end of every partition.
func (w *workload) drain(limit time.Duration) error {
	cl := w.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	ends, err := adm.ListEndOffsets(ctx, topic)
	cancel()
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	end := map[int32]int64{}
	for p := range int32(partitions) {
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Err != nil {
			return fmt.Errorf("end offset of partition %d: %v", p, o.Err)
		}
		end[p] = o.Offset
	}
	return pollUntil(limit, func() error {
		ctx, cancel := context.WithTimeout(w.ctx, 3*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		for p, e := range end {
			o, _ := offs.Lookup(topic, p)
			if o.At < e {
				return fmt.Errorf("partition %d committed %d of %d", p, o.At, e)
			}
		}
		return nil
	})
}

// converged waits until the group is Stable with every member.
func (w *workload) converged(limit time.Duration) error {
	cl := w.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	return pollUntil(limit, func() error {
		ctx, cancel := context.WithTimeout(w.ctx, 3*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		g := gs[group]
		if g.Err != nil {
			return g.Err
		}
		if g.State != "Stable" || len(g.Members) != len(w.clients) {
			return fmt.Errorf("group %s with %d members, want Stable with %d", g.State, len(g.Members), len(w.clients))
		}
		return nil
	})
}

// finalRead reads every partition from its start to its end offset with a
// fresh client.
func (w *workload) finalRead(limit time.Duration) ([]Read, error) {
	ctx, cancel := context.WithTimeout(w.ctx, limit)
	defer cancel()
	w.mu.Lock()
	base := []kgo.Opt{kgo.SeedBrokers(w.seeds...)}
	w.mu.Unlock()
	return readAll(ctx, base, topic, kgo.ReadUncommitted(), func(r *kgo.Record, end int64) bool { return r.Offset == end-1 })
}

// readAll reads every partition of topic from its start, with clients of
// the base options, until last says a record is its partition's last (end
// is the partition's end offset when the read began; records at or past
// it are left out).
func readAll(ctx context.Context, base []kgo.Opt, topic string, level kgo.IsolationLevel, last func(r *kgo.Record, end int64) bool) ([]Read, error) {
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	cl.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, err
	}
	offs := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	for p := range int32(partitions) {
		offs[p] = kgo.NewOffset().AtStart()
		if o, _ := ends.Lookup(topic, p); o.Offset > 0 {
			left[p] = o.Offset
		}
	}
	rd, err := kgo.NewClient(append(base[:len(base):len(base)], kgo.FetchIsolationLevel(level), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []Read
	for len(left) > 0 {
		fs := rd.PollRecords(ctx, 5000)
		if ctx.Err() != nil {
			return out, fmt.Errorf("%d partitions not read to the end: %w", len(left), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, open := left[r.Partition]
			if !open || r.Offset >= end {
				return
			}
			out = append(out, Read{Reader: "final", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			if last(r, end) {
				delete(left, r.Partition)
			}
		})
	}
	return out, nil
}
