package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/internal/procstat"
)

// groupBench is one run of the groups or joinstorm subcommand.
type groupBench struct {
	cfg   groupsConfig
	log   *slog.Logger
	topic string
	meta  []byte // the members' JoinGroup protocol metadata

	firstJoin atomic.Int64 // unix nanos of the first JoinGroup written
	synced    atomic.Int64 // members that completed a first SyncGroup
	allSynced chan struct{}
	stableAt  atomic.Int64 // unix nanos when the last member first synced

	// The measured window, unix nanos; winEnd is 0 until it is scheduled.
	// Members stop once their next heartbeat would fall after winEnd.
	winStart, winEnd atomic.Int64

	mu    sync.Mutex // guards the fields below
	join  histogram  // JoinGroups that got a generation (they include the join window)
	sync  histogram
	hb    histogram // heartbeats sent in the window
	hbIn  int64     // heartbeats sent in the window
	hbOut int64     // heartbeats sent outside it
	// errors by "request:CODE", before and during the window.
	setupErrs, windowErrs  map[string]int64
	rejoins, windowRejoins int64 // members going back to JoinGroup after a first sync
}

// member is one simulated group member. Only its own goroutine touches it
// until that goroutine has ended.
type member struct {
	b      *groupBench
	group  string
	link   *link // JoinGroup with a member id, SyncGroup
	fast   *link // Heartbeat, JoinGroup without a member id
	id     string
	synced bool // completed a first SyncGroup
}

const (
	protocolType = "consumer"
	protocolName = "range"
	retryBackoff = time.Second
)

// runGroups is the groups and joinstorm subcommands.
func runGroups(ctx context.Context, log *slog.Logger, cfg groupsConfig) (*groupsResult, error) {
	b := &groupBench{
		cfg:        cfg,
		log:        log,
		topic:      fmt.Sprintf("%s-%08x", cfg.topicPrefix, rand.Uint32()),
		allSynced:  make(chan struct{}),
		setupErrs:  map[string]int64{},
		windowErrs: map[string]int64{},
	}
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{b.topic}
	b.meta = meta.AppendTo(nil)
	res := &groupsResult{Mode: cfg.mode, Label: cfg.label, Brokers: strings.Join(cfg.brokers, ","), Members: cfg.members,
		Groups: cfg.groups, HeartbeatMs: ms(cfg.heartbeat), HeartbeatSpread: cfg.spread, WindowS: cfg.window.Seconds(), TargetS: cfg.target.Seconds()}

	admCl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.brokers...),
		kgo.ClientID("kgate-bench"),
		kgo.WithLogger(kgoLogger{log: log.With("component", "kgo"), verbose: cfg.verbose}),
	)
	if err != nil {
		return res, fmt.Errorf("admin client: %w", err)
	}
	adm := kadm.NewClient(admCl)
	defer adm.Close()
	// Cleanup must run after a signal too.
	cleanupCtx := context.WithoutCancel(ctx)

	log.Info("creating topic", "topic", b.topic, "partitions", cfg.partitions)
	if err := createTopic(ctx, adm, b.topic, cfg.partitions); err != nil {
		return res, err
	}
	defer deleteTopic(cleanupCtx, log, adm, b.topic)

	groups := make([]string, cfg.groups)
	suffix := rand.Uint32()
	for i := range groups {
		groups[i] = fmt.Sprintf("%s-%08x-%05d", cfg.groupPrefix, suffix, i)
	}
	members, links, err := b.placeMembers(ctx, adm, groups)
	if err != nil {
		return res, err
	}
	res.Connections = len(links)
	defer func() {
		for _, l := range links {
			l.close()
		}
	}()
	log.Info("connecting", "connections", len(links))
	if err := connectLinks(ctx, links); err != nil {
		return res, err
	}

	runCtx, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	var wg sync.WaitGroup
	defer func() {
		stopMembers()
		wg.Wait()
		b.leaveAll(cleanupCtx, admCl, members)
		deleteGroups(cleanupCtx, log, adm, groups)
	}()

	log.Info("members joining", "members", cfg.members, "groups", cfg.groups)
	for _, m := range members {
		wg.Go(func() { m.run(runCtx) })
	}

	setup := time.NewTimer(cfg.setupTimeout)
	defer setup.Stop()
	select {
	case <-b.allSynced:
	case <-setup.C:
		b.fill(res)
		return res, fmt.Errorf("only %d of %d members synced after %v", b.synced.Load(), cfg.members, cfg.setupTimeout)
	case <-ctx.Done():
		b.fill(res)
		return res, ctx.Err()
	}
	first := time.Unix(0, b.firstJoin.Load())
	stable := time.Unix(0, b.stableAt.Load())
	res.TimeToStableS = stable.Sub(first).Seconds()
	log.Info("every member synced", "after", stable.Sub(first).Round(time.Millisecond))

	described, err := describeStates(ctx, adm, groups)
	if err != nil {
		log.Warn("describe groups", "err", err)
	}
	res.GroupStates = described
	res.StableGroups = described["Stable"]

	if cfg.window > 0 {
		if !sleepCtx(ctx, cfg.settle) {
			b.fill(res)
			return res, ctx.Err()
		}
		if err := b.measureWindow(ctx, res); err != nil {
			b.fill(res)
			return res, err
		}
	}

	// Members in their heartbeat loop stop by themselves after the window;
	// give the last heartbeats time to be answered before cancelling.
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	if cfg.window > 0 {
		grace := time.NewTimer(cfg.heartbeat + 5*time.Second)
		defer grace.Stop()
		select {
		case <-done:
		case <-grace.C:
		case <-ctx.Done():
		}
	}
	stopMembers()
	<-done
	b.fill(res)
	res.OK = true
	return res, ctx.Err()
}

// measureWindow opens the heartbeat window and reads the leader's CPU
// around it.
func (b *groupBench) measureWindow(ctx context.Context, res *groupsResult) error {
	pid := strconv.Itoa(b.cfg.leaderPID)
	var leader0 procCPU
	var err error
	if b.cfg.leaderPID > 0 {
		if leader0, err = readProcCPU(pid); err != nil {
			b.log.Warn("leader CPU not measured", "pid", pid, "err", err)
		}
	}
	self0, selfErr := readProcCPU("self")
	rt0 := readRuntimeHists()
	now := time.Now()
	b.winStart.Store(now.UnixNano())
	b.winEnd.Store(now.Add(b.cfg.window).UnixNano())
	b.log.Info("heartbeat window open", "window", b.cfg.window)
	if !sleepCtx(ctx, b.cfg.window) {
		return ctx.Err()
	}
	if err == nil && b.cfg.leaderPID > 0 {
		if leader1, err := readProcCPU(pid); err == nil {
			res.LeaderCPUPercent = cpuPercent(leader0, leader1)
			res.LeaderPID = b.cfg.leaderPID
		} else {
			b.log.Warn("leader CPU not measured", "pid", pid, "err", err)
		}
		if rss, err := procstat.RSS(pid); err == nil {
			res.LeaderRSSMiB = float64(rss) / (1 << 20)
		}
	}
	if self1, err := readProcCPU("self"); err == nil && selfErr == nil {
		res.BenchCPUPercent = cpuPercent(self0, self1)
	}
	rt1 := readRuntimeHists()
	sched := histDelta(rt0.sched, rt1.sched)
	res.BenchSchedP99Ms = histQuantile(sched, 0.99) * 1e3
	res.BenchSchedMaxMs = histQuantile(sched, 1) * 1e3
	res.BenchGCPauseMaxMs = histQuantile(histDelta(rt0.gc, rt1.gc), 1) * 1e3
	b.log.Info("heartbeat window closed")
	return nil
}

// placeMembers spreads the members over the groups and gives each its
// own link to its group's coordinator, as a real client has: Kafka and
// kgate serve a connection's requests one after another, so a JoinGroup or
// SyncGroup parked until a rebalance completes holds up everything queued
// behind it (several members on one link never complete a rebalance). With
// -heartbeats-per-conn above 1, Heartbeats and JoinGroups without a member
// id (answered at once with MEMBER_ID_REQUIRED, KIP-394) go over "fast"
// links shared by that many members of any groups instead: nothing parks
// there, but each answer waits for those before it.
func (b *groupBench) placeMembers(ctx context.Context, adm *kadm.Client, groups []string) ([]*member, []*link, error) {
	coords := adm.FindGroupCoordinators(ctx, groups...)
	var links []*link
	newLink := func(addr, kind string) *link {
		l := &link{addr: addr, clientID: "kgate-bench-" + b.cfg.mode + "-" + kind}
		links = append(links, l)
		return l
	}
	fast := map[string]*link{} // coordinator address → fast link being filled
	fastFill := map[*link]int{}
	var members []*member
	for i, g := range groups {
		c, ok := coords[g]
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("no coordinator for group %s", g)
		case c.Err != nil:
			return nil, nil, fmt.Errorf("coordinator for group %s: %w", g, c.Err)
		}
		addr := net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
		n := b.cfg.members / len(groups)
		if i < b.cfg.members%len(groups) {
			n++
		}
		for range n {
			gl := newLink(addr, "member")
			fl := gl
			if b.cfg.heartbeatsPerConn > 1 {
				fl = fast[addr]
				if fl == nil || fastFill[fl] >= b.cfg.heartbeatsPerConn {
					fl = newLink(addr, "fast")
					fast[addr] = fl
				}
				fastFill[fl]++
			}
			members = append(members, &member{b: b, group: g, link: gl, fast: fl})
		}
	}
	return members, links, nil
}

// connectLinks dials every link, a few at a time.
func connectLinks(ctx context.Context, links []*link) error {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, l := range links {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if _, _, err := l.get(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d connections failed: %w", len(errs), len(links), errs[0])
	}
	return ctx.Err()
}

// run is a member's life: join, sync, heartbeat, and again after a
// rebalance, until ctx ends or the window is over.
func (m *member) run(ctx context.Context) {
	for ctx.Err() == nil {
		if m.synced {
			m.b.rejoin()
		}
		jr := m.join(ctx)
		if jr == nil {
			continue
		}
		if !m.sync(ctx, jr) {
			continue
		}
		if !m.heartbeat(ctx, jr.Generation) {
			return
		}
	}
}

// join sends JoinGroup until it is answered with a generation; nil means
// try again (or ctx ended).
func (m *member) join(ctx context.Context) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = m.group
	req.SessionTimeoutMillis = int32(m.b.cfg.session / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(m.b.cfg.rebalance / time.Millisecond)
	req.MemberID = m.id
	req.ProtocolType = protocolType
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = protocolName
	p.Metadata = m.b.meta
	req.Protocols = []kmsg.JoinGroupRequestProtocol{p}

	l := m.link
	if m.id == "" {
		l = m.fast // answered at once: MEMBER_ID_REQUIRED
	}
	m.b.firstJoin.CompareAndSwap(0, time.Now().UnixNano())
	resp, lat, err := l.do(ctx, req, func(v groupVersions) int16 { return v.join })
	if err != nil {
		if ctx.Err() == nil {
			m.b.countErr("join", "transport")
			sleepCtx(ctx, retryBackoff)
		}
		return nil
	}
	r := resp.(*kmsg.JoinGroupResponse)
	switch r.ErrorCode {
	case 0:
		m.id = r.MemberID
		m.b.record(&m.b.join, lat)
		if m.id == r.LeaderID {
			m.b.log.Debug("joined as leader", "group", m.group, "generation", r.Generation, "members", len(r.Members), "latency", lat)
		}
		return r
	case kerr.MemberIDRequired.Code:
		m.id = r.MemberID // KIP-394: come back with it at once
		return nil
	case kerr.UnknownMemberID.Code:
		m.id = ""
	case kerr.RebalanceInProgress.Code:
	default:
		defer sleepCtx(ctx, retryBackoff)
	}
	m.b.countErr("join", codeName(r.ErrorCode))
	return nil
}

// sync sends SyncGroup for the generation jr started; the leader carries a
// round-robin assignment of the topic's partitions. false means rejoin.
func (m *member) sync(ctx context.Context, jr *kmsg.JoinGroupResponse) bool {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group = m.group
	req.Generation = jr.Generation
	req.MemberID = m.id
	pt, proto := protocolType, protocolName
	if jr.Protocol != nil {
		proto = *jr.Protocol
	}
	req.ProtocolType, req.Protocol = &pt, &proto
	if m.id == jr.LeaderID {
		req.GroupAssignment = m.b.assign(jr.Members)
	}
	resp, lat, err := m.link.do(ctx, req, func(v groupVersions) int16 { return v.sync })
	if err != nil {
		if ctx.Err() == nil {
			m.b.countErr("sync", "transport")
			sleepCtx(ctx, retryBackoff)
		}
		return false
	}
	r := resp.(*kmsg.SyncGroupResponse)
	switch r.ErrorCode {
	case 0:
		m.b.record(&m.b.sync, lat)
		if !m.synced {
			m.synced = true
			if m.b.synced.Add(1) == int64(m.b.cfg.members) {
				m.b.stableAt.Store(time.Now().UnixNano())
				close(m.b.allSynced)
			}
		}
		return true
	case kerr.UnknownMemberID.Code:
		m.id = ""
	case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
	default:
		defer sleepCtx(ctx, retryBackoff)
	}
	m.b.countErr("sync", codeName(r.ErrorCode))
	return false
}

// heartbeat heartbeats every interval. It returns true when the member must
// rejoin, false when it is done (ctx ended or the window is over).
func (m *member) heartbeat(ctx context.Context, generation int32) bool {
	next := time.Now().Add(m.b.cfg.heartbeat)
	if m.b.cfg.spread {
		next = time.Now().Add(rand.N(m.b.cfg.heartbeat))
	}
	for {
		if end := m.b.winEnd.Load(); end != 0 && next.UnixNano() >= end {
			return false
		}
		if !sleepUntil(ctx, next) {
			return false
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group = m.group
		req.Generation = generation
		req.MemberID = m.id
		sent := time.Now()
		if next = next.Add(m.b.cfg.heartbeat); next.Before(sent) {
			next = sent.Add(m.b.cfg.heartbeat) // fell behind: no burst
		}
		resp, lat, err := m.fast.do(ctx, req, func(v groupVersions) int16 { return v.heartbeat })
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			m.b.recordHeartbeat(sent, 0, "transport")
			continue
		}
		code := resp.(*kmsg.HeartbeatResponse).ErrorCode
		m.b.recordHeartbeat(sent, lat, codeName(code))
		switch code {
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
			return true
		case kerr.UnknownMemberID.Code:
			m.id = ""
			return true
		}
	}
}

// assign spreads the topic's partitions round-robin over the members,
// sorted by member id.
func (b *groupBench) assign(members []kmsg.JoinGroupResponseMember) []kmsg.SyncGroupRequestGroupAssignment {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.MemberID
	}
	slices.Sort(ids)
	parts := make([][]int32, len(ids))
	for p := range int32(b.cfg.partitions) {
		i := int(p) % len(ids)
		parts[i] = append(parts[i], p)
	}
	out := make([]kmsg.SyncGroupRequestGroupAssignment, len(ids))
	for i, id := range ids {
		a := kmsg.NewConsumerMemberAssignment()
		if len(parts[i]) > 0 {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic, t.Partitions = b.topic, parts[i]
			a.Topics = []kmsg.ConsumerMemberAssignmentTopic{t}
		}
		out[i] = kmsg.NewSyncGroupRequestGroupAssignment()
		out[i].MemberID = id
		out[i].MemberAssignment = a.AppendTo(nil)
	}
	return out
}

func (b *groupBench) inWindow(t time.Time) bool {
	start, end := b.winStart.Load(), b.winEnd.Load()
	n := t.UnixNano()
	return start != 0 && n >= start && n < end
}

func (b *groupBench) record(h *histogram, d time.Duration) {
	b.mu.Lock()
	h.record(d)
	b.mu.Unlock()
}

func (b *groupBench) recordHeartbeat(sent time.Time, lat time.Duration, code string) {
	in := b.inWindow(sent)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !in:
		b.hbOut++
		if code != "" {
			b.setupErrs["heartbeat:"+code]++
		}
	case code == "transport":
		b.hbIn++
		b.windowErrs["heartbeat:"+code]++
	default:
		b.hbIn++
		b.hb.record(lat)
		if code != "" {
			b.windowErrs["heartbeat:"+code]++
		}
	}
}

func (b *groupBench) countErr(req, code string) {
	in := b.inWindow(time.Now())
	b.mu.Lock()
	defer b.mu.Unlock()
	if in {
		b.windowErrs[req+":"+code]++
	} else {
		b.setupErrs[req+":"+code]++
	}
}

func (b *groupBench) rejoin() {
	in := b.inWindow(time.Now())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rejoins++
	if in {
		b.windowRejoins++
	}
}

// fill copies the statistics into res.
func (b *groupBench) fill(res *groupsResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res.Synced = b.synced.Load()
	res.JoinP50Ms, res.JoinP99Ms, res.JoinMaxMs = quantilesMs(&b.join)
	res.SyncP50Ms, res.SyncP99Ms, res.SyncMaxMs = quantilesMs(&b.sync)
	res.Heartbeats = b.hbIn
	if b.cfg.window > 0 {
		res.HeartbeatsPerS = float64(b.hbIn) / b.cfg.window.Seconds()
	}
	res.HeartbeatP50Ms, res.HeartbeatP99Ms, res.HeartbeatMaxMs = quantilesMs(&b.hb)
	res.SetupErrors = maps.Clone(b.setupErrs)
	res.WindowErrors = maps.Clone(b.windowErrs)
	res.Rejoins, res.WindowRejoins = b.rejoins, b.windowRejoins
}

func quantilesMs(h *histogram) (p50, p99, maxv float64) {
	return ms(h.quantile(0.5)), ms(h.quantile(0.99)), ms(h.maxValue())
}

// leaveAll takes every member that has an id out of its group, one
// LeaveGroup per group, so the groups can be deleted.
func (b *groupBench) leaveAll(ctx context.Context, cl *kgo.Client, members []*member) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	byGroup := map[string][]string{}
	for _, m := range members {
		if m.id != "" {
			byGroup[m.group] = append(byGroup[m.group], m.id)
		}
	}
	b.log.Info("members leaving", "groups", len(byGroup))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g, ids := range byGroup {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Group = g
			for _, id := range ids {
				lm := kmsg.NewLeaveGroupRequestMember()
				lm.MemberID = id
				req.Members = append(req.Members, lm)
			}
			req.MemberID = ids[0] // v0-2 take one member; the rest expire
			resp, err := req.RequestWith(ctx, cl)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		b.log.Warn("LeaveGroup failed", "groups", n)
	}
}

// deleteGroups deletes the run's groups, logging failures.
func deleteGroups(ctx context.Context, log *slog.Logger, adm *kadm.Client, groups []string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.DeleteGroups(ctx, groups...)
	if err != nil {
		log.Warn("delete groups", "err", err)
		return
	}
	n := 0
	var first error
	for _, r := range resp {
		if r.Err != nil {
			n++
			first = cmp.Or(first, r.Err)
		}
	}
	if n > 0 {
		log.Warn("delete groups", "failed", n, "first_err", first)
	}
}

// describeStates counts the groups by state as DescribeGroups reports them.
func describeStates(ctx context.Context, adm *kadm.Client, groups []string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	described, err := adm.DescribeGroups(ctx, groups...)
	out := map[string]int{}
	for _, g := range groups {
		d, ok := described[g]
		switch {
		case !ok:
			out["(missing)"]++
		case d.Err != nil:
			out["error:"+d.Err.Error()]++
		default:
			out[d.State]++
		}
	}
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		err = nil // the per-group entries say what failed
	}
	return out, err
}

// codeName names a Kafka error code; "" for none.
func codeName(code int16) string {
	if code == 0 {
		return ""
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return "code " + strconv.Itoa(int(code))
}

// sleepCtx sleeps d and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	return sleepUntil(ctx, time.Now().Add(d))
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
