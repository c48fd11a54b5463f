//go:build chaos && linux

package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

var (
	seedFlag   = flag.Int64("seed", 0, "nemesis seed; 0 picks one from the clock (printed at start)")
	faultsFlag = flag.Int("faults", 0, "faults to apply; 0 is the short run of make test (each kind once, short holds)")
	kindsFlag  = flag.String("kinds", "", "comma-separated fault kinds to apply (default: all)")
	nodesFlag  = flag.Int("nodes", 3, "cluster size: 3 or 5")
	// One client per group member: franz-go (in this process), java or
	// librdkafka (test/clients programs, each in a process of its own).
	clientsFlag  = flag.String("clients", "", "the group members' clients, comma-separated, one a member: franz-go, java, librdkafka (default: three franz-go)")
	portBaseFlag = flag.Int("port-base", 0, "the first of 1000 ports the nodes listen on, below the kernel's ephemeral ports; 0: a random thousand of 20000-31999")
	txnFlag      = flag.Bool("txn", true, "run the transactional workload beside the main one (txn_workload_test.go)")
)

// Fault kinds.
const (
	kill9           = "kill-9"             // SIGKILL, hold, restart on the same data
	pause           = "pause"              // SIGSTOP, hold (1-20 s), SIGCONT
	isolateLeader   = "partition-leader"   // the leader alone on one side
	isolateFollower = "partition-minority" // a minority on one side: a follower alone (3 nodes); two nodes, with or without the leader (5)
	bridge          = "partition-bridge"   // two minorities cut apart, one with the leader; a bridge node sees both
	flap            = "flap"               // a node's links (70 % the leader's) cut and healed every 200-800 ms for the hold
	blackHole       = "blackhole"          // a node's links (70 % the leader's) pass no byte and close nothing for the hold
	churn           = "churn"              // POST /v1/leave, stop; hold; a fresh node (new id, empty data) joins
	crashSnapshot   = "crash-snapshot"     // SIGKILL inside a snapshot, hold, restart
	crashCompaction = "crash-compaction"   // SIGKILL inside the Raft log's compaction, hold, restart
	fullDisk        = "full-disk"          // the node's file system filled to the last byte: it stops by itself; hold; freed, restart
)

var allKinds = []string{kill9, pause, isolateLeader, isolateFollower, bridge, churn, crashSnapshot, crashCompaction, flap, blackHole, fullDisk}

// holds is how long each kind of fault lasts, from..to.
type holds map[string][2]time.Duration

var shortHolds = holds{
	kill9: {time.Second, 3 * time.Second}, pause: {time.Second, 4 * time.Second},
	isolateLeader: {2 * time.Second, 4 * time.Second}, isolateFollower: {2 * time.Second, 4 * time.Second},
	bridge: {2 * time.Second, 4 * time.Second},
	churn:  {500 * time.Millisecond, 2 * time.Second}, crashSnapshot: {time.Second, 2 * time.Second},
	crashCompaction: {time.Second, 2 * time.Second},
	flap:            {2 * time.Second, 4 * time.Second}, blackHole: {2 * time.Second, 4 * time.Second},
	fullDisk: {time.Second, 3 * time.Second},
}

var longHolds = holds{
	kill9: {time.Second, 10 * time.Second}, pause: {time.Second, 20 * time.Second},
	isolateLeader: {2 * time.Second, 15 * time.Second}, isolateFollower: {2 * time.Second, 15 * time.Second},
	bridge: {2 * time.Second, 15 * time.Second},
	churn:  {time.Second, 10 * time.Second}, crashSnapshot: {time.Second, 10 * time.Second},
	crashCompaction: {time.Second, 10 * time.Second},
	flap:            {2 * time.Second, 15 * time.Second}, blackHole: {2 * time.Second, 15 * time.Second},
	fullDisk: {time.Second, 10 * time.Second},
}

// recoveryLimit bounds how long the cluster and the workload may take to
// come back after a heal before the campaign calls it a failure.
const recoveryLimit = 90 * time.Second

type fault struct {
	kind      string
	target    int
	other     int   // the far end of a bridge's cut link
	side      []int // a partition's minority side (the bridge's: the leader's)
	flips     int   // flap: how many times the links were cut or healed
	joined    int   // churn: the fresh node that replaced target
	wasLeader bool
	hold      time.Duration
	// failover: from the fault to every producer and reader progressing
	// while it holds (-1: not within the hold).
	failover time.Duration
	// recovery: from the heal (SIGCONT, restart, links up) to every
	// producer and reader progressing again; formed: to every node ready
	// and seeing every other as an alive voter.
	recovery, formed time.Duration
	// from, to: the fault's start and its recovery (the workload and the
	// cluster back), the window its operations are counted in.
	from, to time.Time
}

// TestChaos runs the fault campaign against three kgate nodes: a workload
// of idempotent producers, a consumer group and an assign() reader, a
// nemesis of kills, pauses and partitions biased to the leader, and the
// history checker at the end. -seed replays a schedule; -faults sets its
// length (make chaos).
func TestChaos(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	n := *faultsFlag
	hs, gap := longHolds, [2]time.Duration{500 * time.Millisecond, 3 * time.Second}
	if n == 0 {
		n, hs, gap = len(allKinds), shortHolds, [2]time.Duration{500 * time.Millisecond, 1500 * time.Millisecond}
	}
	rng := rand.New(rand.NewSource(seed))
	kinds := allKinds
	if *kindsFlag != "" {
		kinds = strings.Split(*kindsFlag, ",")
		for _, k := range kinds {
			if _, ok := longHolds[k]; !ok {
				t.Fatalf("unknown fault kind %q (kinds: %v)", k, allKinds)
			}
		}
	}
	if *faultsFlag == 0 {
		n = len(kinds)
	}
	t.Logf("chaos seed %d (replay with -seed %d), %d faults", seed, seed, n)
	fmt.Printf("chaos seed %d\n", seed)
	between := func(r [2]time.Duration) time.Duration {
		return r[0] + time.Duration(rng.Int63n(int64(r[1]-r[0])+1))
	}

	if *nodesFlag != 3 && *nodesFlag != 5 {
		t.Fatalf("-nodes %d: want 3 or 5", *nodesFlag)
	}
	clients, err := parseClients(*clientsFlag)
	if err != nil {
		t.Fatalf("-clients: %v", err)
	}
	t.Logf("group members' clients: %v", clients)
	c := startCluster(t, *nodesFlag, slices.Contains(kinds, fullDisk))
	w := newWorkload(t, c.kafkaAddrs(), c.dir, clients)
	w.start()
	var snaps *snapshotter
	if *snapshotEveryFlag > 0 {
		snaps = startSnapshotter(*snapshotEveryFlag, c.adminAddrs())
		defer snaps.stop()
		t.Logf("every node is asked for a snapshot every %v", *snapshotEveryFlag)
	}
	var tw *txnWorkload
	if *txnFlag {
		tw = newTxnWorkload(t, c.kafkaAddrs(), c.dir)
		tw.start()
	}
	// From the Unix epoch, not the zero time: the zero time's UnixNano
	// overflows to a negative number, which every reader had passed before
	// reading anything, and the first fault hit a group still forming.
	if err := pollUntil(recoveryLimit, func() error {
		if err := w.progressed(time.Unix(0, 0)); err != nil || tw == nil {
			return err
		}
		return tw.going()
	}); err != nil {
		t.Fatalf("workload never got going: %v", err)
	}

	// Kinds are dealt from decks shuffled by the seed, each kind once a
	// deck: the short run is one deck, and a campaign of k decks applies
	// every kind k times, in an order as random as independent draws but
	// without their spread of counts.
	var deck []string
	var done []fault
faults:
	for i := range n {
		if len(deck) == 0 {
			deck = append(deck, kinds...)
			rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		kind := deck[0]
		deck = deck[1:]
		hold := between(hs[kind])
		time.Sleep(between(gap)) // the schedule's random gap, not a synchronization
		leader, err := c.waitFormed(recoveryLimit)
		if err != nil {
			t.Errorf("before fault %d: %v", i, err)
			break
		}
		f := fault{kind: kind, hold: hold, failover: -1}
		followers := []int{}
		for _, id := range c.ids() {
			if id != leader {
				followers = append(followers, id)
			}
		}
		pickFollower := func() int { return followers[rng.Intn(len(followers))] }
		w.faultNow.Store(int64(i))
		start := time.Now()
		f.wasLeader = (kind == isolateLeader || kind == bridge) || rng.Float64() < 0.7
		if kind == isolateFollower {
			// Three nodes: a follower alone; five: two nodes, half the
			// time with the leader.
			f.wasLeader = len(followers) > 2 && rng.Intn(2) == 0
		}
		holdFrom := start
		var leftByKill []string // crash-snapshot: the unfinished snapshot files the kill left
		var flapRng *rand.Rand
		switch kind {
		case kill9, pause, churn, crashSnapshot, crashCompaction, flap, blackHole, fullDisk:
			f.target = pickFollower()
			if f.wasLeader {
				f.target = leader
			}
		}
		switch kind {
		case kill9:
			c.node(f.target).kill9()
		case pause:
			if err := c.node(f.target).pause(); err != nil {
				t.Fatal(err)
			}
		case churn:
			if err := c.leave(f.target); err != nil {
				t.Errorf("fault %d (churn of node %d, leader %d): %v", i, f.target, leader, err)
				break faults
			}
			if snaps != nil {
				snaps.setAdmins(c.adminAddrs())
			}
			// The hold is the time the cluster runs on two nodes.
			holdFrom = time.Now()
			t.Logf("fault %d: node %d left and stopped after %v", i, f.target, holdFrom.Sub(start).Round(time.Millisecond))
		case crashSnapshot, crashCompaction:
			ws := snapshotWindows
			if kind == crashCompaction {
				ws = compactionWindows
			}
			win := ws[rng.Intn(len(ws))]
			left, err := c.crashIn(c.node(f.target), win, 30*time.Second)
			if err != nil {
				t.Errorf("fault %d (%s node %d): %v", i, kind, f.target, err)
				break faults
			}
			t.Logf("fault %d: node %d killed %v after the first snapshot request, at %q; %s", i, f.target,
				time.Since(start).Round(time.Millisecond), win.name, left)
			leftByKill = unfinishedSnapshots(c.node(f.target).dataDir)
		case fullDisk:
			if err := c.fillDisk(c.node(f.target), i); err != nil {
				t.Errorf("fault %d (full disk of node %d, leader %d): %v", i, f.target, leader, err)
				break faults
			}
			// The hold is the time the node stays down for want of space.
			holdFrom = time.Now()
		case isolateLeader:
			f.target = leader
			c.nw.Isolate(leader, c.ids())
		case isolateFollower:
			// A minority: (n-1)/2 nodes, with the leader or without.
			fs := append([]int(nil), followers...)
			rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
			f.side = fs[:(len(c.nodes)-1)/2]
			if f.wasLeader {
				f.side = append([]int{leader}, fs[:(len(c.nodes)-1)/2-1]...)
			}
			f.target = f.side[0]
			c.nw.Split(f.side, c.ids())
		case bridge:
			// The leader with (n-3)/2 followers on one side, as many on
			// the other, and one follower, the bridge, linked to both:
			// each side and the bridge are a majority.
			fs := append([]int(nil), followers...)
			rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
			k := (len(c.nodes) - 3) / 2
			f.side = append([]int{leader}, fs[:k]...)
			far := fs[k : 2*k+1]
			f.target, f.other = leader, far[0]
			for _, a := range f.side {
				for _, b := range far {
					c.nw.Cut(a, b)
				}
			}
			t.Logf("fault %d: bridge node %d links %v and %v", i, fs[2*k+1], f.side, far)
		case flap:
			flapRng = rand.New(rand.NewSource(rng.Int63()))
			c.nw.Isolate(f.target, c.ids())
			f.flips = 1
		case blackHole:
			for _, o := range c.ids() {
				if o != f.target {
					c.nw.BlackHole(f.target, o)
				}
			}
		}
		// The nodes the fault cut off from every other, for the checker's
		// minority rule: from now (the cut is in place) until just before
		// the heal. A flap's cut phases are windows of their own; a
		// bridge leaves no node cut off from a majority.
		var minority []int32
		switch kind {
		case isolateLeader, flap, blackHole:
			minority = []int32{int32(f.target)}
		case isolateFollower:
			for _, id := range f.side {
				minority = append(minority, int32(id))
			}
		}
		cutFrom := time.Now()
		endWindow := func() {
			if minority != nil {
				w.h.AddWindow(Window{Fault: fmt.Sprintf("fault %d (%s)", i, kind), Minority: minority, From: cutFrom, To: time.Now()})
			}
		}
		if f.side != nil {
			t.Logf("fault %d at %s: %s %v cut off (leader %d) for %v", i, start.Format("15:04:05.000"), kind, f.side, leader, hold.Round(time.Millisecond))
		} else {
			t.Logf("fault %d at %s: %s node %d (leader %d) for %v", i, start.Format("15:04:05.000"), kind, f.target, leader, hold.Round(time.Millisecond))
		}

		// Hold the fault, watching whether the workload goes on without the
		// faulty node (a majority is always left).
		var waiting, lastWaiting error
		elected := time.Duration(-1) // until the majority side names a new leader
		flipAt := time.Now().Add(flapGap(flapRng))
		for until := holdFrom.Add(hold); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
			if flapRng != nil && time.Now().After(flipAt) {
				if f.flips%2 == 1 {
					endWindow()
					c.nw.Heal()
				} else {
					c.nw.Isolate(f.target, c.ids())
					cutFrom = time.Now()
				}
				f.flips++
				flipAt = time.Now().Add(flapGap(flapRng))
			}
			if f.failover < 0 {
				if waiting = w.progressed(start); waiting == nil {
					f.failover = time.Since(start)
				} else {
					lastWaiting = waiting
				}
			}
			if elected < 0 && f.wasLeader {
				if l := c.leaderBesides(f.target); l != 0 {
					elected = time.Since(start)
				}
			}
		}
		if f.wasLeader && elected >= 0 {
			t.Logf("fault %d: the other nodes elected a new leader after %v", i, elected.Round(time.Millisecond))
		} else if f.wasLeader {
			t.Logf("fault %d: no other node became leader during the hold", i)
		}
		if kind == flap {
			t.Logf("fault %d: node %d's links cut or healed %d times", i, f.target, f.flips)
		}
		if f.failover < 0 {
			t.Logf("fault %d: no failover within the hold: %v", i, waiting)
		} else if lastWaiting != nil {
			t.Logf("fault %d: failover after %v; last waiting for: %v", i, f.failover.Round(time.Millisecond), lastWaiting)
		}

		switch kind {
		case kill9, crashSnapshot, crashCompaction:
			c.node(f.target).start()
		case fullDisk:
			nd := c.node(f.target)
			if err := nd.disk.free(); err != nil {
				t.Errorf("fault %d: freeing node %d's disk: %v", i, f.target, err)
				break faults
			}
			nd.start()
		case churn:
			ids := c.ids()
			via := ids[rng.Intn(len(ids))]
			f.joined = c.joinFresh(via).id
			if snaps != nil {
				snaps.setAdmins(c.adminAddrs())
			}
			w.setSeeds(c.bootstrapList())
			if tw != nil {
				tw.setSeeds(c.bootstrapList())
			}
			t.Logf("fault %d: fresh node %d joins through node %d", i, f.joined, via)
		case pause:
			if err := c.node(f.target).resume(); err != nil {
				t.Fatal(err)
			}
		default:
			if kind != flap || f.flips%2 == 1 {
				endWindow()
			}
			c.nw.Heal()
		}
		heal := time.Now()
		// The workload's recovery and the cluster's (every node ready, one
		// leader, gossip sees all alive) are timed apart: gossip may take
		// longer to call a node alive again than clients take to move on.
		var formed time.Duration
		var recoveryWaited error // the last client still waiting, for a slow recovery's log line
		err = pollUntil(recoveryLimit, func() error {
			if d := c.died(); d != "" {
				return stop{errors.New(d)}
			}
			if f.recovery == 0 {
				if waiting := w.progressed(heal); waiting == nil {
					f.recovery = time.Since(heal)
				} else {
					recoveryWaited = waiting
				}
			}
			if formed == 0 {
				if _, err := c.formed(); err != nil {
					return err
				}
				formed = time.Since(heal)
			}
			if f.recovery == 0 {
				return w.progressed(heal)
			}
			return nil
		})
		if err != nil {
			t.Errorf("fault %d (%s node %d): no recovery: %v", i, kind, f.target, err)
			break
		}
		f.formed = formed
		f.from, f.to = start, heal.Add(max(f.recovery, formed))
		if kind == crashSnapshot {
			// Only what the kill left: with -snapshot-every the node may
			// be taking a new snapshot as it is looked at.
			if left := slices.DeleteFunc(unfinishedSnapshots(c.node(f.target).dataDir), func(p string) bool {
				return !slices.Contains(leftByKill, p)
			}); len(left) > 0 {
				t.Errorf("fault %d: node %d restarted and kept the snapshot the kill left unfinished: %v", i, f.target, left)
			}
		}
		if kind == churn {
			// A client configured before the churn names the node that
			// left: it must get through the others.
			if err := c.clientsReach(30 * time.Second); err != nil {
				t.Errorf("fault %d (churn): a client with bootstrap list %v: %v", i, c.bootstrapList(), err)
				break
			}
		}
		failover := "none within the hold" // f.failover -1, which would print as 0s
		if f.failover >= 0 {
			failover = f.failover.Round(time.Millisecond).String()
		}
		t.Logf("fault %d healed; workload recovered in %v, cluster formed in %v (failover during the fault: %s)", i,
			f.recovery.Round(time.Millisecond), formed.Round(time.Millisecond), failover)
		if f.recovery > time.Second && recoveryWaited != nil {
			t.Logf("fault %d: recovery last waited for: %v", i, recoveryWaited)
		}
		done = append(done, f)
	}
	w.faultNow.Store(-1)

	// Heal everything, stop writing, let the group finish, read it all.
	c.nw.Heal()
	w.stopProducers()
	drained := w.drain(2 * recoveryLimit)
	if drained != nil {
		t.Errorf("group not drained: %v", drained)
	}
	if err := w.converged(recoveryLimit); err != nil {
		t.Errorf("group did not converge to all %d members: %v", len(clients), err)
	}
	final, finalErr := w.finalRead(2 * time.Minute)
	if finalErr != nil {
		t.Errorf("final read: %v", finalErr)
	}
	w.h.SetFinal(final)
	w.cancel()
	w.readWG.Wait()
	if tw != nil {
		// Transactions: exactly-once copies, whole commits, no aborted or
		// uncommitted read (docs/chaos.md).
		drained, complete := tw.finish(2 * recoveryLimit)
		for _, a := range tw.report(drained, complete) {
			t.Errorf("transactional anomaly %s", a)
		}
	}
	// Every replica whole: a node a fault left with a short or corrupt
	// partition (a full disk's cut-off write, a crash's) differs from the
	// others, which the final read, through the nodes Metadata names, may
	// not see.
	if sizes, err := c.sameReplicas(recoveryLimit); err != nil {
		t.Errorf("replicas: %v", err)
	} else {
		t.Logf("every node holds the same bytes of every partition: %s", sizes)
	}
	// With references (-storage), what each node keeps of its Raft log
	// for them and what it copied out of kept files.
	for _, nd := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		kept, err1 := c.metric(ctx, nd, "kgate_raft_pinned_bytes")
		copied, err2 := c.metric(ctx, nd, "kgate_partition_rewritten_bytes_total")
		cancel()
		if err := errors.Join(err1, err2); err != nil {
			t.Logf("node %d: %v", nd.id, err)
			continue
		}
		t.Logf("node %d: %.0f bytes of Raft log kept for references, %.0f copied out of kept files since it last started", nd.id, kept, copied)
	}
	if part := c.digestsPart(); part != "" {
		t.Errorf("replicas: %s", part)
	}

	anomalies := w.h.Check(finalErr == nil, drained == nil)
	failed := 0
	for _, a := range anomalies {
		if a.Kind == ClientCommitBack || a.Kind == StaleCommit {
			// The client's doing, which Kafka accepts too: reported.
			t.Logf("anomaly %s", a)
			continue
		}
		if failed++; failed > 20 {
			continue
		}
		t.Errorf("anomaly %s", a)
	}
	if failed > 20 {
		t.Errorf("... and %d more anomalies", failed-20)
	}
	// No member may lose its partitions to a fault a majority survived
	// whole: a network fault (every node kept running; the group's state
	// is Raft state), a churn (a graceful leave hands leadership over
	// first) or a full disk (the node stops by itself and the others stay
	// whole; issue 15 asks that no member be lost to it). A kill, pause or
	// crash is counted in the table, with which member and why logged.
	// The one loss franz-go brings on itself is
	// told apart whatever the fault: its client dialled a node that had
	// left in a churn (its broker list is as old as its last metadata
	// refresh, up to 5 minutes, and it asks one broker, at random, for a
	// moved coordinator). Such a member rejoins, and the rebalance that
	// starts moves the generation on under the others: a member whose
	// commit then meets the new generation may count its partitions lost
	// (librdkafka does), as it would on Kafka; that too is told apart.
	w.mu.Lock()
	for i, f := range done {
		by := f.to
		if by.IsZero() { // the fault did not recover
			by = time.Now()
		}
		rejoined := false // a member lost to a departed node rejoined in this fault
		for _, why := range w.lostWhy[int64(i)] {
			rejoined = rejoined || c.departedIn(why, by) != 0
		}
		for _, why := range w.lostWhy[int64(i)] {
			what := fmt.Sprintf("fault %d (%s, node %d, side %v, the leader: %v): a group member lost its partitions", i, f.kind, f.target, f.side, f.wasLeader)
			switch gone := c.departedIn(why, by); {
			case gone != 0:
				t.Logf("%s after its client dialled node %d, which had left: %s", what, gone, why)
			case rejoined && generationMovedOn(why):
				t.Logf("%s when the rebalance of a member lost to a departed node moved the generation on: %s", what, why)
			case f.kind == fullDisk && namesAddr(why, c.started(f.target).kafka):
				// The node stopped itself, as a killed one stops: a
				// franz-go member whose coordinator lookups went to it
				// twice in a row ends its session, as after a kill
				// (docs/operations.md, Failover).
				t.Logf("%s after its client dialled node %d, which the full disk had stopped: %s", what, f.target, why)
			case f.kind == isolateLeader || f.kind == isolateFollower || f.kind == bridge || f.kind == flap || f.kind == blackHole || f.kind == churn || f.kind == fullDisk:
				t.Errorf("%s: %s", what, why)
			default:
				t.Logf("%s: %s", what, why)
			}
		}
	}
	w.mu.Unlock()
	unknown := c.nw.Unknowns()
	report := summarize(w, done, anomalies, unknown)
	for why, n := range unknown.Why {
		// A live process that is no node dialling the nodes' proxies is
		// the harness's own fault (a node's earlier process still running,
		// say): its bytes would pass links the nemesis believes it cut
		// whenever none of its target's links was down.
		if strings.HasPrefix(why, NoNode) {
			t.Errorf("%d proxy connections of an unknown sender: %s", n, why)
		}
	}
	t.Log("\n" + report)
	fmt.Println(report)
	if len(done) < n {
		t.Errorf("only %d of %d faults completed", len(done), n)
	}
}

// opsIn counts, for each fault, the operations (records acknowledged and
// records read) inside its window, from its start to its recovery.
func opsIn(h *History, fs []fault) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := make([]int, len(fs))
	in := func(at time.Time) {
		for i, f := range fs {
			if !at.Before(f.from) && !at.After(f.to) {
				n[i]++
			}
		}
	}
	for _, p := range h.Produces {
		if p.Acked {
			in(p.At)
		}
	}
	for _, r := range h.Reads {
		in(r.At)
	}
	return n
}

// summarize is the campaign's table: per fault kind, how many, failover
// while the fault held and recovery after the heal (p50 and max), and
// members the group lost; then the history's totals and anomalies.
func summarize(w *workload, fs []fault, anomalies []Anomaly, unknown UnknownSenders) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s %5s %6s %7s %13s %13s %13s %13s %13s %13s %5s\n", "fault", "count", "leader", "ops",
		"failover p50", "failover max", "recovery p50", "recovery p99", "recovery max", "formed p50", "lost")
	w.mu.Lock()
	lostBy := map[string]int{}
	for i, f := range fs {
		lostBy[f.kind] += w.lostBy[int64(i)]
	}
	w.mu.Unlock()
	ops := opsIn(w.h, fs)
	opsBy := map[string]int{}
	for i, f := range fs {
		opsBy[f.kind] += ops[i]
	}
	for _, k := range allKinds {
		var fo, rec, form []time.Duration
		count, leader := 0, 0
		for _, f := range fs {
			if f.kind != k {
				continue
			}
			count++
			if f.wasLeader {
				leader++
			}
			if f.failover >= 0 {
				fo = append(fo, f.failover)
			}
			rec = append(rec, f.recovery)
			form = append(form, f.formed)
		}
		if count == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-20s %5d %6d %7d %13s %13s %13s %13s %13s %13s %5d\n", k, count, leader, opsBy[k],
			quantile(fo, 0.5), quantile(fo, 1), quantile(rec, 0.5), quantile(rec, 0.99), quantile(rec, 1), quantile(form, 0.5), lostBy[k])
	}
	// One line a fault, for adding runs up (docs/reliability.md);
	// failover=-1ms: none within the hold.
	w.mu.Lock()
	for i, f := range fs {
		failover := f.failover.Milliseconds()
		if f.failover < 0 {
			failover = -1
		}
		fmt.Fprintf(&b, "per-fault %d %s leader=%v hold=%dms failover=%dms recovery=%dms formed=%dms ops=%d lost=%d\n", i, f.kind, f.wasLeader,
			f.hold.Milliseconds(), failover, f.recovery.Milliseconds(), f.formed.Milliseconds(), ops[i], w.lostBy[int64(i)])
	}
	w.mu.Unlock()
	w.h.mu.Lock()
	acked, failed := 0, 0
	errs := map[string]int{}
	for _, p := range w.h.Produces {
		if p.Acked {
			acked++
		} else {
			failed++
			errs[p.Err]++
		}
	}
	reads, commits, final := len(w.h.Reads), len(w.h.Commits), len(w.h.Final)
	rebalances, withGen, withCoord, windows := len(w.h.Assignments), 0, 0, len(w.h.Windows)
	for _, a := range w.h.Assignments {
		if a.Generation >= 0 {
			withGen++
		}
		if a.Coordinator != 0 {
			withCoord++
		}
	}
	w.h.mu.Unlock()
	fmt.Fprintf(&b, "produced: %d acknowledged, %d failed; reads: %d; commit samples: %d; final read: %d records\n",
		acked, failed, reads, commits, final)
	for e, n := range errs {
		fmt.Fprintf(&b, "  %d sends failed with: %s\n", n, e)
	}
	fmt.Fprintf(&b, "rebalance events: %d, %d with the member's generation, %d with the SyncGroup's node; minority windows: %d\n", rebalances, withGen, withCoord, windows)
	fmt.Fprintf(&b, "members that lost partitions: %d; proxy connections from an unknown sender: %d (%d refused, %d closed: a link of their node was down)\n",
		w.lost.Load(), unknown.Total, unknown.Refused, unknown.Closed)
	whys := slices.Sorted(maps.Keys(unknown.Why))
	for _, why := range whys {
		fmt.Fprintf(&b, "  %d: %s\n", unknown.Why[why], why)
	}
	fmt.Fprintf(&b, "anomalies: %d %v\n", len(anomalies), Summary(anomalies))
	return b.String()
}

// quantile of ds (q=1 is the max); "-" for none. failover counts only the
// faults after which the workload moved on before the heal.
func quantile(ds []time.Duration, q float64) string {
	if len(ds) == 0 {
		return "-"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i].Round(10 * time.Millisecond).String()
}

// flapGap is the time a flapping link stays cut or up: 200-800 ms.
func flapGap(r *rand.Rand) time.Duration {
	if r == nil {
		return 0
	}
	return 200*time.Millisecond + time.Duration(r.Int63n(int64(600*time.Millisecond)+1))
}
