package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
)

var (
	nemesisSteps = flag.Int("nemesis-steps", 24, "faults in TestRandomFaultsKeepReplicasIdentical")
	nemesisSeed  = flag.Int64("nemesis-seed", 0, "seed of TestRandomFaultsKeepReplicasIdentical (0: from the clock)")
	// How the nodes keep partitions (--partition-storage): by default
	// nodes 1 and 2 as references to Raft entries, node 3 as copies.
	nemesisStorage = flag.String("nemesis-storage", "mixed", "partition storage of TestRandomFaultsKeepReplicasIdentical's nodes: copy, raft-log or mixed (nodes 1 and 2 raft-log, 3 copy)")
)

// TestRandomFaultsKeepReplicasIdentical is the fault campaign of test/chaos
// in miniature, inside one process and without Kafka clients, so that it
// can run thousands of faults where the campaign runs dozens: three nodes
// that snapshot and compact all the time (a few entries kept past each
// snapshot, small log segments) take random crashes (some in the middle
// of a snapshot), cuts, frozen links, leaders cut off or paused while
// proposals still reach them, and retention trims, while one idempotent
// writer per partition appends through whichever node takes itself for
// the leader, retrying each batch until it is acknowledged.
//
// What a Kafka client would see is then checked from what the writers
// recorded alone: every node holds the same bytes in every partition,
// every acknowledged batch is at the offset its acknowledgement named, and
// no batch is there twice. A node whose state machine skipped or repeated
// entries (a snapshot restored over the wrong state, entries applied that
// never committed) fails it. -nemesis-steps and -nemesis-seed set the
// length and replay a run; -nemesis-storage how the nodes keep their
// partitions (references to Raft entries, copies, or both in one cluster).
func TestRandomFaultsKeepReplicasIdentical(t *testing.T) {
	seed := *nemesisSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -nemesis-seed %d), %d faults, -nemesis-storage %s", seed, seed, *nemesisSteps, *nemesisStorage)
	rng := rand.New(rand.NewSource(seed))

	const partitions = 3
	const pausable = 3 // the node whose leadership a pause leaves in place
	c := newCluster(t, 0, nil)
	for i := int32(1); i <= 3; i++ {
		tn := c.newNode(i, nil, 3, func(cfg *Config) {
			cfg.TrailingLogs = 16
			cfg.LogSegmentBytes = 64 << 10
			// Trimmed partitions beside the untrimmed "tail": the Raft
			// log kept for references passes this, and nodes copy
			// batches into their partitions between the faults.
			cfg.RewritePinnedBytes = 256 << 10
			if i == pausable {
				// A leader that keeps taking itself for the leader
				// for seconds without hearing from a majority, as a
				// paused process does: the others elect within half a
				// second, it notices only when it hears of them.
				cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLease = 3*time.Second, 3*time.Second, 3*time.Second
			}
		})
		// Partition segments of 1 MiB: all of a partition's files stay
		// open, and the writers append tens of megabytes.
		tn.fsmSegmentBytes = 1 << 20
		switch *nemesisStorage {
		case "raft-log":
			tn.references = true
		case "mixed":
			tn.references = i != 3
		case "copy":
		default:
			t.Fatalf("-nemesis-storage %q: copy, raft-log or mixed", *nemesisStorage)
		}
	}
	for _, tn := range c.nodes {
		tn.join = []string{c.nodes[0].gossipAddr}
		tn.start(t)
	}
	leaderAmong(t, c.nodes)
	votersAre(t, c.nodes, c.nodes)
	createTopic(t, c.nodes, "nem", partitions)
	createTopic(t, c.nodes, "tail", 1) // what bursts to cut-off leaders write

	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// Where each node's Raft and log store stand, for the failure.
		for _, tn := range c.running() {
			st := tn.n.raft.Stats()
			first, _ := tn.n.store.FirstIndex()
			last, _ := tn.n.store.LastIndex()
			t.Logf("node %d: state %s term %s; Raft: last log %s (term %s), last snapshot %s (term %s), commit %s, applied %s; store: %d..%d; FSM applied %d",
				tn.id, st["state"], st["term"], st["last_log_index"], st["last_log_term"], st["last_snapshot_index"],
				st["last_snapshot_term"], st["commit_index"], st["applied_index"], first, last, tn.f.Applied())
		}
	})

	// The writers see the running nodes through live; the nemesis swaps it
	// before it stops a node and after it starts one.
	var live liveNodes
	live.update(c)

	ctx, cancel := context.WithCancel(context.Background())
	writers := make([]*nemesisWriter, partitions)
	var wg sync.WaitGroup
	defer func() { // the writers end with the test, even one that fails halfway
		for _, tn := range c.nodes {
			streamOf(t, tn.raftAddr).setFrozen(false) // a frozen leader holds their proposals
		}
		cancel()
		wg.Wait()
	}()
	for p := range writers {
		w := &nemesisWriter{partition: int32(p), id: int64(100 + p), acked: map[int32]int64{},
			rng: rand.New(rand.NewSource(seed + int64(p) + 1))}
		writers[p] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, &live)
		}()
	}

	pick := func(leaderBias float64) *testNode {
		running := c.running()
		if rng.Float64() < leaderBias {
			for _, tn := range running {
				if tn.n.RaftLeader() {
					return tn
				}
			}
		}
		return running[rng.Intn(len(running))]
	}
	pause := func(min, max time.Duration) {
		time.Sleep(min + time.Duration(rng.Int63n(int64(max-min))))
	}
	crash := func(tn *testNode) {
		live.drop(tn)
		tn.crash(t)
	}
	restart := func(tn *testNode) {
		tn.start(t)
		live.update(c)
	}
	snapshot := func(tn *testNode) {
		if err := tn.n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			t.Logf("node %d: snapshot: %v", tn.id, err)
		}
	}

	// burst proposes n appends to topic tail at once, without waiting:
	// on a node cut off while it leads, they make a long tail of entries
	// that never commit.
	now := int64(1_800_000_000_000)
	burst := func(tn *testNode, n int) {
		for range n {
			now++
			tn.n.ProposeAsync(fsm.EncodeAppend(&fsm.Append{NowMs: now, Batches: []fsm.Batch{{
				Topic: "tail", Data: fakeBatch(1, now, []byte("tail")), MaxTimestamp: now, ProducerID: -1,
			}}}))
		}
	}

	kinds := map[string]int{}
	for step := 0; step < *nemesisSteps && !t.Failed(); step++ {
		switch k := rng.Intn(8); k {
		case 0: // crash and restart
			tn := pick(0.5)
			kinds["crash"]++
			crash(tn)
			pause(50*time.Millisecond, 1500*time.Millisecond)
			restart(tn)
		case 1: // crash in the middle of a snapshot, or just after it
			tn := pick(0.5)
			kinds["crash-snapshot"]++
			n := tn.n
			done := make(chan struct{})
			go func() { // ends with the snapshot, which the crash ends if not before
				defer close(done)
				n.raft.Snapshot().Error()
			}()
			pause(time.Millisecond, 40*time.Millisecond)
			crash(tn)
			<-done
			pause(50*time.Millisecond, 800*time.Millisecond)
			restart(tn)
		case 2: // cut off, then healed
			tn := pick(0.5)
			kinds["cut"]++
			s := streamOf(t, tn.raftAddr)
			s.setCut(true)
			pause(200*time.Millisecond, 2500*time.Millisecond)
			s.setCut(false)
		case 3: // frozen connections, then thawed
			tn := pick(0.6)
			kinds["freeze"]++
			s := streamOf(t, tn.raftAddr)
			s.setFrozen(true)
			pause(200*time.Millisecond, 2500*time.Millisecond)
			s.setFrozen(false)
		case 4: // snapshots and compactions on some nodes
			kinds["snapshot"]++
			for _, tn := range c.running() {
				if rng.Intn(2) == 0 {
					snapshot(tn)
				}
			}
		case 5: // the leader cut off with a burst of proposals reaching it
			// (a tail of entries that never commit, longer than what the
			// others write meanwhile), the others compacting past the
			// point where it left; healed
			tn := pick(1)
			kinds["cut-leader-compacted"]++
			s := streamOf(t, tn.raftAddr)
			s.setCut(true)
			burst(tn, 200+rng.Intn(3000))
			pause(400*time.Millisecond, 1500*time.Millisecond)
			for _, o := range without(c.running(), tn) {
				snapshot(o)
			}
			pause(50*time.Millisecond, 500*time.Millisecond)
			s.setCut(false)
		case 6: // the leader paused: it leads on, frozen, with proposals
			// reaching it, while the others elect; on waking it finds
			// answers and requests of a term gone by
			tn := c.nodes[pausable-1]
			if l := pick(1); l != tn && l.n.RaftLeader() {
				tf := l.n.raft.LeadershipTransferToServer(raft.ServerID(fmt.Sprint(tn.id)), raft.ServerAddress(tn.raftAddr))
				if err := tf.Error(); err != nil {
					t.Logf("leadership transfer to node %d: %v", tn.id, err)
				}
			}
			for wait := time.Now().Add(2 * time.Second); !tn.n.RaftLeader() && time.Now().Before(wait); {
				time.Sleep(10 * time.Millisecond)
			}
			if !tn.n.RaftLeader() {
				kinds["pause-leader (no transfer)"]++
				continue
			}
			kinds["pause-leader"]++
			s := streamOf(t, tn.raftAddr)
			s.setFrozen(true)
			burst(tn, rng.Intn(2000))
			pause(300*time.Millisecond, 2800*time.Millisecond)
			for _, o := range without(c.running(), tn) {
				if o.n.RaftLeader() && tn.n.RaftLeader() {
					kinds["pause-leader, woken beside a new leader"]++
				}
			}
			s.setFrozen(false)
		case 7: // retention: a partition's start moved halfway to its end
			kinds["trim"]++
			p := int32(rng.Intn(partitions))
			l := leaderAmong(t, c.running())
			start, next := l.f.Partition("nem", p).Log.Bounds()
			propose(t, c.running(), fsm.Encode(&fsm.TrimLog{Topic: "nem", Partition: p, Start: start + (next-start)/2}))
		}
		pause(50*time.Millisecond, 400*time.Millisecond)
	}
	t.Logf("faults: %v", kinds)

	// Heal, let every writer get its last batch in, and compare.
	for _, tn := range c.nodes {
		streamOf(t, tn.raftAddr).setFrozen(false)
		streamOf(t, tn.raftAddr).setCut(false)
	}
	leaderAmong(t, c.nodes)
	for _, w := range writers {
		w.stopAfterAck.Store(true)
	}
	waited := make(chan struct{})
	go func() {
		wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(time.Minute):
		cancel()
		<-waited
		t.Fatalf("a writer's last batch was not acknowledged within a minute of the heal")
	}
	for _, w := range writers {
		if w.err != nil {
			t.Fatalf("writer of partition %d: %v", w.partition, w.err)
		}
	}
	convergedOnLeader(t, c.nodes)

	want := map[int32][][]byte{}
	for p := int32(0); p < partitions; p++ {
		want[p] = readAll(t, c.nodes[0], "nem", p)
		for _, tn := range c.nodes[1:] {
			got := readAll(t, tn, "nem", p)
			if !slices.EqualFunc(got, want[p], bytes.Equal) {
				t.Errorf("partition %d: node %d holds %d batches, node %d %d, not the same bytes",
					p, tn.id, len(got), c.nodes[0].id, len(want[p]))
			}
		}
	}
	total := 0
	for _, w := range writers {
		total += len(w.acked)
		w.check(t, want[w.partition], c.nodes[0].f.Partition("nem", w.partition).Log.Start())
	}
	t.Logf("%d batches acknowledged in %d partitions, every one once, at its offset, on every node", total, partitions)
	for _, tn := range c.nodes {
		if tn.references {
			t.Logf("node %d: %.0f bytes copied from references into partitions (since its last start), %d bytes of Raft log kept for references",
				tn.id, rewritten(t, tn), tn.n.store.RetainedBytes())
		}
	}
}

// nemesisWriter appends batches of two records to one partition as an
// idempotent producer: each batch is retried, with its sequence, until one
// attempt is acknowledged.
type nemesisWriter struct {
	partition    int32
	id           int64
	rng          *rand.Rand
	stopAfterAck atomic.Bool

	acked map[int32]int64 // base sequence -> acknowledged base offset
	err   error           // an answer no retry explains
}

func nemesisPayload(partition int32, seq int32, size int) []byte {
	word := []byte(fmt.Sprintf("p%d/s%d;", partition, seq))
	return bytes.Repeat(word, size/len(word)+1)[:size]
}

func (w *nemesisWriter) run(ctx context.Context, live *liveNodes) {
	now := int64(1_700_000_000_000)
	for seq := int32(0); ctx.Err() == nil; seq += 2 {
		now++
		// Mostly small batches, some of 32 KiB, so that snapshots take a
		// while to send.
		size := 100 + w.rng.Intn(400)
		if w.rng.Intn(20) == 0 {
			size = 32 << 10
		}
		cmd := fsm.EncodeAppend(&fsm.Append{NowMs: now, Batches: []fsm.Batch{{
			Topic: "nem", Partition: w.partition, Data: fakeBatch(2, now, nemesisPayload(w.partition, seq, size)),
			LastOffsetDelta: 1, MaxTimestamp: now, ProducerID: w.id, BaseSequence: seq,
		}}})
		for ctx.Err() == nil {
			// Any node that takes itself for the leader, a deposed one
			// included: that is how logs grow tails that never commit.
			var leaders []*Node
			for _, n := range live.nodes() {
				if n.RaftLeader() {
					leaders = append(leaders, n)
				}
			}
			if len(leaders) == 0 {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			n := leaders[w.rng.Intn(len(leaders))]
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			res, err := n.Propose(pctx, cmd, true)
			cancel()
			if err != nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			r := res.(*fsm.AppendResults).Results[0]
			if r.Code != fsm.ErrNone {
				w.err = fmt.Errorf("batch of sequence %d answered with code %d", seq, r.Code)
				return
			}
			w.acked[seq] = r.BaseOffset
			break
		}
		if w.stopAfterAck.Load() {
			return
		}
		time.Sleep(time.Duration(w.rng.Intn(3)) * time.Millisecond)
	}
}

// check compares the partition's final batches with the acknowledgements:
// each acknowledged batch at its offset unless retention removed it (its
// last record is before start), no batch twice, sequences in order.
func (w *nemesisWriter) check(t *testing.T, batches [][]byte, start int64) {
	t.Helper()
	at := map[int32][]int64{}
	last := int32(-1)
	for _, b := range batches {
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		var part, seq int32
		if _, err := fmt.Sscanf(string(b[61:]), "p%d/s%d;", &part, &seq); err != nil || part != w.partition {
			t.Errorf("partition %d: the batch at offset %d is not one of its writer's (%q…)", w.partition, base, b[61:min(len(b), 80)])
			continue
		}
		if !bytes.Equal(b[61:], nemesisPayload(part, seq, len(b)-61)) {
			t.Errorf("partition %d: the batch at offset %d (sequence %d) is damaged", w.partition, base, seq)
		}
		if seq <= last {
			t.Errorf("partition %d: sequence %d at offset %d after sequence %d", w.partition, seq, base, last)
		}
		last = seq
		at[seq] = append(at[seq], base)
	}
	for seq, offs := range at {
		if len(offs) > 1 {
			t.Errorf("partition %d: the batch of sequence %d is there %d times, at offsets %v", w.partition, seq, len(offs), offs)
		}
	}
	for seq, base := range w.acked {
		offs := at[seq]
		switch {
		case len(offs) == 0 && base+1 < start:
		case len(offs) == 0:
			t.Errorf("partition %d: the batch of sequence %d, acknowledged at offset %d, is missing", w.partition, seq, base)
		case offs[0] != base:
			t.Errorf("partition %d: the batch of sequence %d was acknowledged at offset %d and is at %d", w.partition, seq, base, offs[0])
		}
	}
}
