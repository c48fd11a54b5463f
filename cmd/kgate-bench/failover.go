package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failover is one run of the failover subcommand.
type failover struct {
	cfg    failoverConfig
	log    *slog.Logger
	stderr io.Writer // the restart command's stderr
	http   *http.Client
	topic  string
	group  string

	adm *kadm.Client
	kcl *kgo.Client // adm's
	// external consumer programs (-consumer-cmd), when not kgo in process
	programs []*consumerProgram

	// Used only by the goroutine running the rounds.
	nodes map[int32]nodeView // by id, from GET /v1/cluster (or Metadata, against Kafka)
	pids  map[int32]int
	dead  int32 // killed and not ready again; -1 = none

	mu       sync.Mutex  // guards the fields below
	cur      *failRound  // the round measuring; nil between rounds
	counting bool        // after the initial assignment, until shutdown
	lastHB   []time.Time // last successful heartbeat answer, per consumer
	lastRec  time.Time   // last record fetched
	assigned []int       // partitions held, per consumer
	revoked  int64       // callbacks with partitions, while counting
	taken    []int64     // revoke and lost callbacks with partitions while counting, per consumer
	lost     int64
	hbErrs   map[string]int64 // heartbeat answers by code, while counting
	// Group sessions the clients themselves ended (kgo's group manage loop
	// errored), by error, while counting.
	sessionErrs map[string]int64
	fetchErr    map[string]int64
	produced    int64
	prodErrs    int64
	prodErr     error
	consumed    int64
	acked       map[uint64]bool // sequence numbers acknowledged
	seen        map[uint64]int  // sequence number → times consumed
	// again: records consumed once more while counting, that is after the
	// group first became healthy (its forming hands partitions over
	// before their first commits, as on any Kafka cluster).
	again       map[uint64]bool
	regressions []string        // committed offsets that went backwards
	commits     map[int32]int64 // highest committed offset seen, by partition
}

// failRound is one kill, as measured.
type failRound struct {
	N         int     `json:"round"`
	Killed    int32   `json:"killed_node"`
	NewLeader int32   `json:"new_leader"`
	ElectedMs float64 `json:"elected_ms"`       // kill → a live node's GET /v1/cluster names a new leader that agrees
	HBNode    int32   `json:"heartbeat_node"`   // node that answered the first successful heartbeat
	HBMs      float64 `json:"heartbeat_ms"`     // kill → the group's first successful heartbeat; -1 if none
	HBAllMs   float64 `json:"heartbeat_all_ms"` // kill → every consumer has had one; -1 if not all
	RecordMs  float64 `json:"record_ms"`        // kill → first record produced after the kill fetched; -1 if none
	// Kill → every consumer has fetched a record produced after the kill.
	RecordAllMs float64 `json:"record_all_ms"`
	// Kill → the first record produced after the kill is acknowledged.
	ProducerMs float64 `json:"producer_ms"`
	Rebalances int64   `json:"rebalances"` // revoke/lost callbacks with partitions, kill to healthy again
	GenChanges int     `json:"generation_changes"`
	// SessionErrors counts group sessions the clients ended themselves,
	// kill to healthy again.
	SessionErrors int64 `json:"client_session_errors"`
	// HeartbeatErrors are heartbeat answers with an error, kill to healthy.
	HeartbeatErrors map[string]int64 `json:"heartbeat_errors,omitempty"`
	RestartS        float64          `json:"restart_to_ready_s"`
	// Fault is what was done to the leader: "kill" or "pause"; HoldMs how
	// long a pause lasted.
	Fault  string  `json:"fault,omitempty"`
	HoldMs float64 `json:"hold_ms,omitempty"`
	// MembersLost counts consumers that had partitions revoked or lost,
	// or rejoined with a new member id, fault to healthy again.
	MembersLost int `json:"members_lost"`
	// BackMs: fault → both a record produced after it acknowledged and
	// every consumer fetching one (the larger of producer_ms and
	// record_all_ms); -1 if not both.
	BackMs float64 `json:"back_ms"`
	Error  string  `json:"error,omitempty"`

	killedAddr string
	killAt     time.Time
	hbAddr     string
	hbGot      []bool // per consumer
	hbLeft     int    // consumers without a successful heartbeat yet
	gotRec     bool
	recGot     []bool // per consumer
	recLeft    int    // consumers without a record produced after the kill
	gotAck     bool
	done       chan struct{} // closed once every time is in
	resumedAt  time.Time     // a paused node's SIGCONT; zero before
	closed     bool
}

// nodeView is a node as GET /v1/cluster lists it.
type nodeView struct {
	ID        int32  `json:"id"`
	KafkaAddr string `json:"kafka_addr"`
	AdminAddr string `json:"admin_addr"`
	Leader    bool   `json:"leader"`
}

type clusterJSON struct {
	ClusterID string     `json:"cluster_id"`
	LeaderID  *int32     `json:"leader_id"`
	Nodes     []nodeView `json:"nodes"`
}

func runFailoverCmd(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFailoverConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kgate-bench:", err)
		return 2
	}
	log := newLogger(stderr, cfg.verbose).With("mode", "failover")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	f := &failover{
		cfg: cfg, log: log, stderr: stderr,
		http:        &http.Client{Timeout: 2 * time.Second},
		topic:       fmt.Sprintf("%s-%08x", cfg.topicPrefix, rand.Uint32()),
		group:       fmt.Sprintf("%s-%08x", cfg.groupPrefix, rand.Uint32()),
		pids:        maps.Clone(cfg.pids),
		dead:        -1,
		assigned:    make([]int, cfg.consumers),
		taken:       make([]int64, cfg.consumers),
		lastHB:      make([]time.Time, cfg.consumers),
		hbErrs:      map[string]int64{},
		sessionErrs: map[string]int64{},
		fetchErr:    map[string]int64{},
		acked:       map[uint64]bool{},
		seen:        map[uint64]int{},
		again:       map[uint64]bool{},
		commits:     map[int32]int64{},
	}
	res, err := f.run(ctx)
	if err != nil {
		res.OK = false
		res.Error = err.Error()
		log.Error("failover failed", "err", err)
	}
	return report(stdout, log, cfg.json, res, res.OK, writeFailoverTable)
}

func (f *failover) run(ctx context.Context) (*failoverResult, error) {
	cfg := f.cfg
	res := &failoverResult{Label: cfg.label, Client: cfg.client, Brokers: strings.Join(cfg.brokers, ","), Kills: cfg.kills,
		Partitions: cfg.partitions, Consumers: cfg.consumers, HeartbeatMs: ms(cfg.heartbeat),
		ProduceIntervalMs: ms(cfg.produceInterval), ServerGenerationStart: -1, ServerGenerationEnd: -1}
	defer f.fill(res)

	logger := kgoLogger{log: f.log.With("component", "kgo"), verbose: cfg.verbose, debug: cfg.clientDebug}
	named := func(name string) kgo.Opt {
		l := logger
		l.log = l.log.With("client", name)
		return kgo.WithLogger(l)
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(cfg.brokers...),
		kgo.ClientID("kgate-bench-failover"),
		kgo.WithLogger(logger),
	}
	if cfg.metadataMinAge > 0 {
		base = append(base, kgo.MetadataMinAge(cfg.metadataMinAge))
	}
	if floor := cfg.retryBackoffMin; floor > 0 {
		base = append(base, kgo.RetryBackoffFn(func(tries int) time.Duration {
			return max(floor, min(5*time.Second, 250*time.Millisecond<<max(tries-1, 0)))
		}))
	}
	balancer := kgo.CooperativeStickyBalancer()
	if cfg.balancer == "range" {
		balancer = kgo.RangeBalancer() // eager: every rebalance revokes
	}
	admCl, err := kgo.NewClient(base...)
	if err != nil {
		return res, fmt.Errorf("admin client: %w", err)
	}
	adm := kadm.NewClient(admCl)
	defer adm.Close()
	f.adm, f.kcl = adm, admCl
	cleanupCtx := context.WithoutCancel(ctx)

	f.nodes = map[int32]nodeView{}
	if f.kafka() {
		if err := f.kafkaNodes(ctx); err != nil {
			return res, err
		}
	} else {
		view, err := f.clusterFromAny(ctx, cfg.admin)
		if err != nil {
			return res, err
		}
		for _, n := range view.Nodes {
			if n.AdminAddr == "" || n.KafkaAddr == "" {
				return res, fmt.Errorf("GET /v1/cluster gives node %d no admin or kafka address", n.ID)
			}
			f.nodes[n.ID] = n
		}
	}
	for id := range f.nodes {
		if _, ok := f.pids[id]; !ok {
			return res, fmt.Errorf("-pids has no pid for node %d", id)
		}
	}
	if len(f.nodes) < 3 {
		f.log.Warn("fewer than three nodes: a leader kill may leave no quorum", "nodes", len(f.nodes))
	}

	f.log.Info("creating topic", "topic", f.topic, "partitions", cfg.partitions)
	// The cluster's default replication factor: kgate replicates every
	// partition to all its nodes; the Kafka comparison cluster defaults to
	// 3 replicas with min.insync.replicas 2.
	if err := createTopicRF(ctx, adm, f.topic, cfg.partitions, -1); err != nil {
		return res, err
	}
	defer deleteTopic(cleanupCtx, f.log, adm, f.topic)

	// The clients run until the rounds are over; stopClients ends them.
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var clients []*kgo.Client
	stopClients := func() {
		f.mu.Lock()
		f.counting = false // leaving the group on Close revokes
		f.mu.Unlock()
		cancel()
		wg.Wait()
		for _, p := range f.programs {
			p.stop(30 * time.Second)
		}
		f.programs = nil
		for _, cl := range clients {
			cl.Close()
		}
		clients = nil
	}
	defer func() {
		stopClients()
		deleteGroups(cleanupCtx, f.log, adm, []string{f.group})
	}()

	prod, err := kgo.NewClient(append(slices.Clone(base), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), named("producer"))...)
	if err != nil {
		return res, fmt.Errorf("producer client: %w", err)
	}
	clients = append(clients, prod)
	prodCtx, stopProducer := context.WithCancel(runCtx)
	defer stopProducer()
	var prodWG sync.WaitGroup
	prodWG.Go(func() { f.produce(prodCtx, prod) })
	wg.Go(func() { f.watchCommits(runCtx, adm) })

	consumers := make([]*kgo.Client, cfg.consumers)
	if cfg.consumerCmd != "" {
		consumers = nil
		for i := range cfg.consumers {
			p, err := f.startProgram(i)
			if err != nil {
				return res, err
			}
			f.programs = append(f.programs, p)
		}
	}
	for i := range consumers {
		cl, err := kgo.NewClient(append(slices.Clone(base),
			kgo.Dialer(sniffDialer(func(addr string, code int16, at time.Time) { f.onHeartbeat(i, addr, code, at) })),
			kgo.WithHooks(sessionErrHook{f}),
			kgo.ConsumerGroup(f.group),
			kgo.ConsumeTopics(f.topic),
			kgo.Balancers(balancer),
			named(fmt.Sprintf("consumer-%d", i)),
			kgo.AutoCommitInterval(cfg.commitInterval),
			kgo.HeartbeatInterval(cfg.heartbeat),
			kgo.SessionTimeout(cfg.session),
			kgo.RebalanceTimeout(cfg.rebalance),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { f.onAssigned(i, m) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { f.onRevoked(i, m, false) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { f.onRevoked(i, m, true) }),
		)...)
		if err != nil {
			return res, fmt.Errorf("consumer client: %w", err)
		}
		clients = append(clients, cl)
		consumers[i] = cl
		wg.Go(func() { f.consume(runCtx, i, cl) })
	}

	f.log.Info("waiting for the group to be Stable and consuming", "group", f.group)
	members0, err := f.waitHealthy(ctx, adm)
	if err != nil {
		return res, fmt.Errorf("initial: %w", err)
	}
	gens0 := f.generations(consumers)
	res.ServerGenerationStart = f.serverGeneration(ctx)
	f.mu.Lock()
	f.counting = true
	f.mu.Unlock()

	var next time.Time
	for n := 1; n <= cfg.kills && ctx.Err() == nil; n++ {
		if !sleepCtx(ctx, time.Until(next)) {
			break
		}
		r, err := f.round(ctx, adm, consumers, n)
		if r != nil {
			res.Rounds = append(res.Rounds, *r)
			next = r.killAt.Add(cfg.killEvery)
		}
		if err != nil {
			return res, fmt.Errorf("round %d: %w", n, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	stopProducer()
	prodWG.Wait()
	f.drain(ctx, prod, res)

	gens1 := f.generations(consumers)
	for i := range gens0 {
		res.GenerationChanges = max(res.GenerationChanges, int(gens1[i]-gens0[i]))
	}
	res.ServerGenerationEnd = f.serverGeneration(ctx)
	if members1, err := f.describe(ctx, adm); err == nil {
		res.MembersUnchanged = slices.Equal(members0, members1)
	}
	res.OK = true
	return res, nil
}

// round kills (or pauses) the leader once and brings the cluster back.
func (f *failover) round(ctx context.Context, adm *kadm.Client, consumers []*kgo.Client, n int) (*failRound, error) {
	pause := f.cfg.fault == "pause"
	leader, err := f.leader(ctx, -1)
	if err != nil {
		return nil, err
	}
	pid := f.pids[leader]
	if err := syscall.Kill(pid, 0); err != nil {
		return nil, fmt.Errorf("leader node %d (pid %d) is not running: %w", leader, pid, err)
	}
	gens0 := f.generations(consumers)
	ids0 := f.memberIDs(consumers)
	hbLeft := f.cfg.consumers
	if len(f.programs) > 0 {
		hbLeft = 0 // heartbeats are seen only in process
	}
	r := &failRound{N: n, Killed: leader, NewLeader: -1, ElectedMs: -1, HBNode: -1, HBMs: -1, HBAllMs: -1, RecordMs: -1,
		RecordAllMs: -1, ProducerMs: -1,
		killedAddr: f.nodes[leader].KafkaAddr, HeartbeatErrors: map[string]int64{},
		hbGot: make([]bool, f.cfg.consumers), hbLeft: hbLeft,
		recGot: make([]bool, f.cfg.consumers), recLeft: f.cfg.consumers, done: make(chan struct{}),
		Fault: f.cfg.fault, BackMs: -1}
	var hold time.Duration
	if pause {
		hold = f.cfg.holds[(n-1)%len(f.cfg.holds)]
		r.HoldMs = ms(hold)
	}

	f.mu.Lock()
	callbacks0 := f.revoked + f.lost
	taken0 := slices.Clone(f.taken)
	sessionErrs0 := sum(f.sessionErrs)
	r.killAt = time.Now()
	f.cur = r
	f.mu.Unlock()
	sig := syscall.SIGKILL
	if pause {
		sig = syscall.SIGSTOP
		f.log.Info("pausing the leader", "round", n, "node", leader, "pid", pid, "hold", hold)
	} else {
		f.log.Info("killing the leader", "round", n, "node", leader, "pid", pid)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		f.mu.Lock()
		f.cur = nil
		f.mu.Unlock()
		return nil, fmt.Errorf("signal %v to node %d (pid %d): %w", sig, leader, pid, err)
	}
	f.dead = leader
	resumed := !pause
	if pause {
		// Whatever ends the round, the node must not stay frozen.
		defer func() {
			if !resumed {
				syscall.Kill(pid, syscall.SIGCONT)
			}
		}()
	}

	// Meanwhile, time the election as the admin API sees it, and restart
	// the killed node -restart-after the kill, as an operator's supervisor
	// would, whether or not the clients are back by then.
	timer := time.NewTimer(f.cfg.roundTimeout)
	poll := time.NewTicker(50 * time.Millisecond)
	var restartC <-chan time.Time
	if after := f.cfg.restartAfter; after > 0 || pause {
		if pause {
			after = hold
		}
		rt := time.NewTimer(after)
		defer rt.Stop()
		restartC = rt.C
	}
	restarted := false
	var restartedAt time.Time
	// Until a paused node is resumed, a leader other than it is a new one;
	// after, it may be the leader (Kafka's coordinator stays put unless
	// the pause outlasts the broker's session with the controller).
	exclude := leader
	restart := func() error {
		restarted, restartedAt = true, time.Now()
		if pause {
			f.log.Info("resuming the leader", "round", n, "node", leader, "pid", pid)
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				return fmt.Errorf("resume node %d (pid %d): %w", leader, pid, err)
			}
			resumed = true
			f.mu.Lock()
			r.resumedAt = restartedAt
			f.mu.Unlock()
			f.dead, exclude = -1, -1
			return nil
		}
		newPID, err := f.restartNode(ctx, leader)
		if err != nil {
			return fmt.Errorf("restart node %d: %w", leader, err)
		}
		f.pids[leader] = newPID
		return nil
	}
	done := r.done
wait:
	for {
		select {
		case <-restartC:
			restartC = nil
			if err := restart(); err != nil {
				return r, err
			}
			if done == nil {
				break wait
			}
		case <-done:
			done = nil
			if restartC == nil {
				break wait
			}
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		case <-poll.C:
			if r.NewLeader >= 0 {
				continue
			}
			if id, ok := f.tryLeader(ctx, exclude); ok {
				r.NewLeader = id
				r.ElectedMs = ms(time.Since(r.killAt))
			}
		}
	}
	timer.Stop()
	poll.Stop()
	f.mu.Lock()
	f.cur = nil
	missing := []string{}
	if r.hbLeft > 0 {
		missing = append(missing, fmt.Sprintf("successful heartbeat from %d of %d consumers", r.hbLeft, f.cfg.consumers))
	}
	if r.recLeft > 0 {
		missing = append(missing, fmt.Sprintf("record produced after the kill fetched by %d of %d consumers", r.recLeft, f.cfg.consumers))
	}
	if !r.gotAck {
		missing = append(missing, "acknowledgement of a record produced after the kill")
	}
	f.mu.Unlock()
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	for id, nv := range f.nodes {
		if nv.KafkaAddr == r.hbAddr {
			r.HBNode = id
		}
	}
	if len(missing) > 0 {
		r.Error = "no " + strings.Join(missing, " and ") + " within " + f.cfg.roundTimeout.String()
		f.log.Warn("round incomplete", "round", n, "missing", r.Error)
	}
	if r.NewLeader < 0 {
		if nl, err := f.leader(ctx, exclude); err == nil {
			r.NewLeader = nl
			r.ElectedMs = ms(time.Since(r.killAt)) // an upper bound
		} else {
			f.log.Warn("no new leader", "err", err)
		}
	}
	if r.ProducerMs >= 0 && r.RecordAllMs >= 0 {
		r.BackMs = max(r.ProducerMs, r.RecordAllMs)
	}
	f.log.Info("round over", "round", n, "fault", f.cfg.fault, "hold", hold, "back_ms", r.BackMs, "elected_ms", r.ElectedMs, "heartbeat_ms", r.HBMs, "heartbeat_all_ms", r.HBAllMs,
		"record_ms", r.RecordMs, "record_all_ms", r.RecordAllMs, "producer_ms", r.ProducerMs, "new_leader", r.NewLeader, "heartbeat_node", r.HBNode)

	if !restarted {
		if err := restart(); err != nil {
			return r, err
		}
	}
	if err := f.waitReady(ctx, leader); err != nil {
		return r, err
	}
	r.RestartS = time.Since(restartedAt).Seconds()
	f.dead = -1
	if _, err := f.waitHealthy(ctx, adm); err != nil {
		return r, fmt.Errorf("after restarting node %d: %w", leader, err)
	}
	if !sleepCtx(ctx, f.cfg.settle) {
		return r, ctx.Err()
	}

	gens1 := f.generations(consumers)
	ids1 := f.memberIDs(consumers)
	f.mu.Lock()
	r.Rebalances = f.revoked + f.lost - callbacks0
	r.SessionErrors = sum(f.sessionErrs) - sessionErrs0
	for i := range f.taken {
		if f.taken[i] > taken0[i] || (ids0 != nil && ids1[i] != ids0[i]) {
			r.MembersLost++
		}
	}
	f.mu.Unlock()
	for i := range gens0 {
		if gens1[i] != gens0[i] {
			r.GenChanges++
		}
	}
	return r, nil
}

// produce writes a record every produceInterval until ctx ends. The value
// holds the time it was produced (unix nanos) and a sequence number.
func (f *failover) produce(ctx context.Context, cl *kgo.Client) {
	tick := time.NewTicker(f.cfg.produceInterval)
	defer tick.Stop()
	promise := func(rec *kgo.Record, err error) {
		at := time.Now()
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case err == nil:
			f.produced++
			produced, seq, _ := parseValue(string(rec.Value))
			f.acked[seq] = true
			if r := f.cur; r != nil && !r.gotAck && produced >= r.killAt.UnixNano() {
				r.gotAck = true
				r.ProducerMs = ms(at.Sub(r.killAt))
				f.maybeDoneLocked(r)
			}
		case ctx.Err() == nil:
			f.prodErrs++
			if f.prodErr == nil {
				f.prodErr = err
			}
		}
	}
	for seq := uint64(0); ; seq++ {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		// Text, for the consumer programs: produced-at (unix nanos) and
		// a sequence number.
		v := []byte(fmt.Sprintf("%d-%d", time.Now().UnixNano(), seq))
		// Round robin, so that every consumer has records to fetch.
		part := int32(seq % uint64(f.cfg.partitions))
		// Not ctx: a record handed to the client is acknowledged or
		// failed by the client itself, also after the producing stops.
		cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Topic: f.topic, Partition: part, Value: v}, promise)
	}
}

// consume polls until ctx ends, timing the first record produced after a
// kill.
func (f *failover) consume(ctx context.Context, i int, cl *kgo.Client) {
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		f.mu.Lock()
		fetches.EachError(func(_ string, _ int32, err error) {
			f.fetchErr[err.Error()]++
		})
		fetches.EachRecord(func(rec *kgo.Record) { f.onRecordLocked(i, string(rec.Value), now) })
		f.mu.Unlock()
	}
}

// parseValue reads a record value the producer wrote.
func parseValue(v string) (producedNs int64, seq uint64, ok bool) {
	a, b, found := strings.Cut(v, "-")
	ns, err1 := strconv.ParseInt(a, 10, 64)
	s, err2 := strconv.ParseUint(b, 10, 64)
	return ns, s, found && err1 == nil && err2 == nil
}

// onRecordLocked counts a record consumer i fetched at now.
func (f *failover) onRecordLocked(i int, value string, now time.Time) {
	f.consumed++
	f.lastRec = now
	produced, seq, ok := parseValue(value)
	if !ok {
		return
	}
	f.seen[seq]++
	if f.counting && f.seen[seq] > 1 {
		f.again[seq] = true
	}
	r := f.cur
	if r == nil || produced < r.killAt.UnixNano() {
		return
	}
	if !r.gotRec {
		r.gotRec = true
		r.RecordMs = ms(now.Sub(r.killAt))
	}
	if !r.recGot[i] {
		r.recGot[i] = true
		if r.recLeft--; r.recLeft == 0 {
			r.RecordAllMs = ms(now.Sub(r.killAt))
		}
	}
	f.maybeDoneLocked(r)
}

// onHeartbeat is told of every heartbeat answer consumer i reads.
func (f *failover) onHeartbeat(i int, addr string, code int16, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.cur
	if code != 0 {
		if f.counting {
			f.hbErrs[codeName(code)]++
		}
		if r != nil {
			r.HeartbeatErrors[codeName(code)]++
		}
		return
	}
	f.lastHB[i] = at
	// Only the leader answers a heartbeat without error (a leader still
	// loading answers NONE too), so any node but the killed one is the new
	// leader.
	if r == nil || r.hbGot[i] || !at.After(r.killAt) {
		return
	}
	// A paused node answers again once resumed (Kafka's coordinator, if
	// the pause was too short to move it).
	if addr == r.killedAddr && (r.resumedAt.IsZero() || at.Before(r.resumedAt)) {
		return
	}
	r.hbGot[i] = true
	r.hbLeft--
	if r.HBMs < 0 {
		r.hbAddr = addr
		r.HBMs = ms(at.Sub(r.killAt))
	}
	if r.hbLeft == 0 {
		r.HBAllMs = ms(at.Sub(r.killAt))
	}
	f.maybeDoneLocked(r)
}

func (f *failover) maybeDoneLocked(r *failRound) {
	if r.hbLeft == 0 && r.recLeft == 0 && r.gotAck && !r.closed {
		close(r.done)
		r.closed = true
	}
}

// sessionErrHook counts group sessions a consumer client ended itself
// (kgo's group manage loop errored): the client then gives up its
// partitions and rejoins, which is a rebalance the server did not start.
type sessionErrHook struct{ f *failover }

func (h sessionErrHook) OnGroupManageError(err error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if h.f.counting {
		h.f.sessionErrs[err.Error()]++
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func (f *failover) onAssigned(i int, m map[string][]int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assigned[i] += len(m[f.topic])
}

func (f *failover) onRevoked(i int, m map[string][]int32, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(m[f.topic])
	f.assigned[i] = max(f.assigned[i]-n, 0)
	if !f.counting || n == 0 {
		return
	}
	if i < len(f.taken) {
		f.taken[i]++
	}
	if lost {
		f.lost++
	} else {
		f.revoked++
	}
	f.log.Warn("partitions taken from a consumer", "consumer", i, "partitions", n, "lost", lost)
}

// waitHealthy waits until the group is Stable with every consumer in it,
// every partition is assigned, and heartbeats and records are flowing. It
// returns the group's member ids.
func (f *failover) waitHealthy(ctx context.Context, adm *kadm.Client) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.readyTimeout)
	defer cancel()
	var why string
	for {
		members, err := f.describe(ctx, adm)
		switch {
		case err != nil:
			why = err.Error()
		case len(members) != f.cfg.consumers:
			why = fmt.Sprintf("%d of %d members", len(members), f.cfg.consumers)
		default:
			why = f.flowing()
			if why == "" {
				return members, nil
			}
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return nil, fmt.Errorf("group not healthy after %v: %s", f.cfg.readyTimeout, why)
		}
	}
}

// flowing says why consumption is not healthy, or "" if it is.
func (f *failover) flowing() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for _, n := range f.assigned {
		total += n
	}
	fresh := max(2*f.cfg.heartbeat, time.Second)
	if total != f.cfg.partitions {
		return fmt.Sprintf("%d of %d partitions assigned", total, f.cfg.partitions)
	}
	for i, t := range f.lastHB {
		if len(f.programs) > 0 {
			break // heartbeats are seen only in process
		}
		if time.Since(t) > fresh+f.cfg.heartbeat {
			return fmt.Sprintf("no recent successful heartbeat from consumer %d", i)
		}
	}
	if time.Since(f.lastRec) > fresh+f.cfg.produceInterval {
		return "no recent record"
	}
	return ""
}

// describe returns the group's sorted member ids if it is Stable.
func (f *failover) describe(ctx context.Context, adm *kadm.Client) ([]string, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	described, err := adm.DescribeGroups(dctx, f.group)
	if err != nil {
		return nil, err
	}
	g := described[f.group]
	if g.Err != nil {
		return nil, g.Err
	}
	if g.State != "Stable" {
		return nil, fmt.Errorf("group %s", g.State)
	}
	var ids []string
	for _, m := range g.Members {
		ids = append(ids, m.MemberID)
	}
	slices.Sort(ids)
	return ids, nil
}

// generations is each consumer's group generation: kgo's, or for a
// consumer program the count of its rebalance events.
func (f *failover) generations(consumers []*kgo.Client) []int32 {
	if len(f.programs) > 0 {
		out := make([]int32, len(f.programs))
		for i, p := range f.programs {
			out[i] = int32(p.rebalances())
		}
		return out
	}
	out := make([]int32, len(consumers))
	for i, cl := range consumers {
		_, out[i] = cl.GroupMetadata()
	}
	return out
}

// memberIDs is each in-process consumer's member id; nil for consumer
// programs (their callbacks tell a lost member).
func (f *failover) memberIDs(consumers []*kgo.Client) []string {
	if len(f.programs) > 0 {
		return nil
	}
	out := make([]string, len(consumers))
	for i, cl := range consumers {
		out[i], _ = cl.GroupMetadata()
	}
	return out
}

// live lists the admin addresses of the nodes not known to be down.
func (f *failover) live() []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(f.nodes)) {
		if id != f.dead {
			out = append(out, f.nodes[id].AdminAddr)
		}
	}
	return out
}

// leader waits until tryLeader finds a leader other than exclude.
func (f *failover) leader(ctx context.Context, exclude int32) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.readyTimeout)
	defer cancel()
	for {
		if id, ok := f.tryLeader(ctx, exclude); ok {
			return id, nil
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return -1, fmt.Errorf("no leader after %v", f.cfg.readyTimeout)
		}
	}
}

// tryLeader returns the leader's node id if a live node names one other
// than exclude and the leader itself agrees.
func (f *failover) tryLeader(ctx context.Context, exclude int32) (int32, bool) {
	if f.kafka() {
		return f.kafkaCoordinator(ctx, exclude)
	}
	for _, addr := range f.live() {
		v, err := f.cluster(ctx, addr)
		if err != nil || v.LeaderID == nil || *v.LeaderID == exclude || *v.LeaderID == f.dead {
			continue
		}
		id := *v.LeaderID
		n, ok := f.nodes[id]
		if !ok {
			continue
		}
		if own, err := f.cluster(ctx, n.AdminAddr); err == nil && own.LeaderID != nil && *own.LeaderID == id {
			return id, true
		}
	}
	return -1, false
}

func (f *failover) clusterFromAny(ctx context.Context, addrs []string) (clusterJSON, error) {
	var errs []error
	for _, a := range addrs {
		v, err := f.cluster(ctx, a)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	return clusterJSON{}, errors.Join(errs...)
}

func (f *failover) cluster(ctx context.Context, addr string) (clusterJSON, error) {
	var v clusterJSON
	err := f.getJSON(ctx, addr, "/v1/cluster", &v)
	return v, err
}

// serverGeneration is the group's generation in the replicated state, from
// GET /v1/groups on a live node; -1 if unknown.
func (f *failover) serverGeneration(ctx context.Context) int32 {
	if f.kafka() {
		return -1
	}
	var v struct {
		Groups []struct {
			Group      string `json:"group"`
			Generation int32  `json:"generation"`
		} `json:"groups"`
	}
	for _, addr := range f.live() {
		if err := f.getJSON(ctx, addr, "/v1/groups", &v); err != nil {
			continue
		}
		for _, g := range v.Groups {
			if g.Group == f.group {
				return g.Generation
			}
		}
	}
	return -1
}

func (f *failover) getJSON(ctx context.Context, addr, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s%s: %s", addr, path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// waitReady waits for GET /readyz on node id to answer 200.
func (f *failover) waitReady(ctx context.Context, id int32) error {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.readyTimeout)
	defer cancel()
	for f.kafka() {
		if f.kafkaReady(ctx, id) {
			return nil
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return fmt.Errorf("node %d not ready after %v", id, f.cfg.readyTimeout)
		}
	}
	url := "http://" + f.nodes[id].AdminAddr + "/readyz"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := f.http.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return fmt.Errorf("node %d not ready after %v", id, f.cfg.readyTimeout)
		}
	}
}

// restartNode runs the -restart command for node id and returns the pid it
// prints last.
func (f *failover) restartNode(ctx context.Context, id int32) (int, error) {
	line := strings.ReplaceAll(f.cfg.restart, "{id}", strconv.Itoa(int(id)))
	f.log.Info("restarting node", "node", id, "command", line)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	cmd.Stderr = f.stderr
	cmd.WaitDelay = 5 * time.Second // the node must not keep our stdout pipe
	out, err := cmd.Output()
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return 0, errors.New("the restart command printed no pid")
	}
	pid, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("the restart command's last output %q is not a pid", fields[len(fields)-1])
	}
	return pid, nil
}

// fill copies the run-wide counters into res and summarises the rounds.
func (f *failover) fill(res *failoverResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res.Revoked, res.Lost = f.revoked, f.lost
	res.HeartbeatErrors = maps.Clone(f.hbErrs)
	res.SessionErrors = maps.Clone(f.sessionErrs)
	res.FetchErrors = maps.Clone(f.fetchErr)
	res.Produced, res.ProduceErrors, res.Consumed = f.produced, f.prodErrs, f.consumed
	if f.prodErr != nil {
		res.FirstProduceError = f.prodErr.Error()
	}
	res.Regressions = slices.Clone(f.regressions)
	var elected, hb, hbAll, rec, recAll, prod []float64
	for _, r := range res.Rounds {
		if r.RecordAllMs >= 0 {
			recAll = append(recAll, r.RecordAllMs)
		}
		if r.ProducerMs >= 0 {
			prod = append(prod, r.ProducerMs)
		}
		if r.GenChanges > 0 || r.SessionErrors > 0 || r.Rebalances > 0 {
			res.RoundsChanged++
		}
		if r.ElectedMs >= 0 {
			elected = append(elected, r.ElectedMs)
		}
		if r.HBMs >= 0 {
			hb = append(hb, r.HBMs)
		}
		if r.HBAllMs >= 0 {
			hbAll = append(hbAll, r.HBAllMs)
		}
		if r.RecordMs >= 0 {
			rec = append(rec, r.RecordMs)
		}
		if r.Error != "" {
			res.IncompleteRounds++
		}
	}
	res.ElectedP50Ms, res.ElectedP99Ms, res.ElectedMaxMs = sampleQuantiles(elected)
	res.HeartbeatP50Ms, res.HeartbeatP99Ms, res.HeartbeatMaxMs = sampleQuantiles(hb)
	res.HeartbeatAllP50Ms, res.HeartbeatAllP99Ms, res.HeartbeatAllMaxMs = sampleQuantiles(hbAll)
	res.RecordP50Ms, res.RecordP99Ms, res.RecordMaxMs = sampleQuantiles(rec)
	res.RecordAllP50Ms, res.RecordAllP99Ms, res.RecordAllMaxMs = sampleQuantiles(recAll)
	res.ProducerP50Ms, res.ProducerP99Ms, res.ProducerMaxMs = sampleQuantiles(prod)
}

// sampleQuantiles returns p50, p99 (nearest rank) and the max of xs.
func sampleQuantiles(xs []float64) (p50, p99, maxv float64) {
	if len(xs) == 0 {
		return -1, -1, -1
	}
	s := slices.Sorted(slices.Values(xs))
	rank := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return rank(0.5), rank(0.99), s[len(s)-1]
}

// watchCommits samples the group's committed offsets until ctx ends and
// notes every one that goes backwards.
func (f *failover) watchCommits(ctx context.Context, adm *kadm.Client) {
	for sleepCtx(ctx, 250*time.Millisecond) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := adm.FetchOffsets(rctx, f.group)
		cancel()
		if err != nil || resp.Error() != nil {
			continue
		}
		f.mu.Lock()
		resp.Each(func(o kadm.OffsetResponse) {
			if o.Topic != f.topic {
				return
			}
			if high, ok := f.commits[o.Partition]; ok && o.At < high {
				f.regressions = append(f.regressions, fmt.Sprintf("partition %d: %d after %d", o.Partition, o.At, high))
			}
			f.commits[o.Partition] = max(f.commits[o.Partition], o.At)
		})
		f.mu.Unlock()
	}
}

// drain waits for the producer's last records and for the consumers to
// fetch every acknowledged record, then counts the missing, and those
// consumed again once the group had first become healthy.
func (f *failover) drain(ctx context.Context, prod *kgo.Client, res *failoverResult) {
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := prod.Flush(fctx); err != nil {
		f.log.Warn("producer flush", "err", err)
	}
	count := func() (missing, dups int64) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for seq := range f.acked {
			if f.seen[seq] == 0 {
				missing++
			}
		}
		return missing, int64(len(f.again))
	}
	for {
		missing, dups := count()
		res.Missing, res.Duplicates = missing, dups
		if missing == 0 || !sleepCtx(fctx, 100*time.Millisecond) {
			return
		}
	}
}
