package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/fsm"
)

// nodeKillEnv starts the test binary as the node TestKill9NodeWithReferences
// kills: "dir raftAddr gossipAddr kafkaAddr adminAddr round".
const nodeKillEnv = "KGATE_NODE_KILL"

// killNodeTune is the configuration both the child and the test's own runs
// of the node use: snapshots only when the child asks (so it knows where the
// checkpoint is), a short Raft log kept past them, and small segment files,
// so that references soon name compacted entries kept for them.
func killNodeTune(cfg *Config) {
	cfg.SnapshotEvery = 1 << 40
	cfg.TrailingLogs = 16
	cfg.LogSegmentBytes = 64 << 10
	cfg.Fsync = true
}

// killNode is the one node of TestKill9NodeWithReferences, the same in the
// child and in the test: on references, with killNodeTune, and partition
// segments of 24 KiB (one rolls between most checkpoints, and a round makes
// a few dozen files for each snapshot to link).
func killNode(dir, raftAddr, gossipAddr, kafkaAddr, adminAddr string) *testNode {
	return &testNode{id: 1, dir: dir, raftAddr: raftAddr, gossipAddr: gossipAddr, kafkaAddr: kafkaAddr,
		adminAddr: adminAddr, expect: 1, tune: killNodeTune, references: true, fsmSegmentBytes: 24 << 10}
}

// killPayload is what entry i of a round writes to partition p: unique, so a
// batch found twice or at another offset shows.
func killPayload(round, i int, p int32) []byte {
	word := fmt.Sprintf("r%d/i%d/p%d;", round, i, p)
	return bytes.Repeat([]byte(word), 1024/len(word)+1)[:1024]
}

// runNodeUntilKilled is the child: a one-node cluster on the embedded
// backend with references (--partition-storage=raft-log) and --fsync, four
// producers appending one batch to each of topic k's two partitions per Raft
// entry, and a snapshot (the checkpoint) once 40 more entries are
// acknowledged after the last one ended. It
// prints "ack i base0 base1" once entry i is acknowledged, "snap" before a
// snapshot and "ckpt" once it is persisted, until it is killed.
func runNodeUntilKilled(spec string) {
	fail := func(what string, err error) {
		fmt.Printf("%s: %v\n", what, err)
		os.Exit(1)
	}
	a := strings.Fields(spec)
	if len(a) != 6 {
		fail("spec", fmt.Errorf("%q", spec))
	}
	round, err := strconv.Atoi(a[5])
	if err != nil {
		fail("spec", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tn := killNode(a[0], a[1], a[2], a[3], a[4])
	if err := tn.open(logger); err != nil {
		fail("start", err)
	}
	n := tn.n
	deadline := time.After(30 * time.Second)
	for !n.IsLeader() {
		select {
		case <-n.LeaderChanged():
		case <-deadline:
			fail("leader", fmt.Errorf("not leader after 30s"))
		}
	}
	var (
		out   sync.Mutex
		acked = make(chan struct{}, 1024)
	)
	for w := range 4 {
		go func() { // ends with the process (killed)
			for i := w; ; i += 4 {
				cmd := fsm.EncodeAppend(&fsm.Append{NowMs: int64(i), Batches: []fsm.Batch{
					{Topic: "k", Partition: 0, Data: fakeBatch(2, int64(i), killPayload(round, i, 0)), LastOffsetDelta: 1, MaxTimestamp: int64(i), ProducerID: -1},
					{Topic: "k", Partition: 1, Data: fakeBatch(2, int64(i), killPayload(round, i, 1)), LastOffsetDelta: 1, MaxTimestamp: int64(i), ProducerID: -1},
				}})
				res, err := n.Propose(context.Background(), cmd, false)
				if err != nil {
					fail("append", err)
				}
				r := res.(*fsm.AppendResults).Results
				if r[0].Code != fsm.ErrNone || r[1].Code != fsm.ErrNone {
					fail("append", fmt.Errorf("codes %d, %d", r[0].Code, r[1].Code))
				}
				out.Lock()
				fmt.Printf("ack %d %d %d\n", i, r[0].BaseOffset, r[1].BaseOffset)
				out.Unlock()
				acked <- struct{}{}
			}
		}()
	}
	for {
		// 40 entries acknowledged after the last snapshot ended (those
		// acknowledged while it ran do not count: snapshots would follow
		// each other without a pause once one takes as long as 40 entries).
		for pending := true; pending; {
			select {
			case <-acked:
			default:
				pending = false
			}
		}
		for range 40 {
			<-acked
		}
		out.Lock()
		fmt.Println("snap")
		out.Unlock()
		if err := n.raft.Snapshot().Error(); err != nil {
			fail("snapshot", err)
		}
		out.Lock()
		fmt.Println("ckpt")
		out.Unlock()
	}
}

// TestKill9NodeWithReferences kills a whole node keeping its partitions as
// references to its Raft log (--partition-storage=raft-log, --fsync) while
// four producers append, at moments of two kinds taken in turn: with
// references written past the last checkpoint and no snapshot running, and
// just as a snapshot (the checkpoint) begins. After each kill the node is
// started again from its data directory: every acknowledged batch is at
// the offset it was acknowledged with, byte for byte; no batch is there
// twice; each partition's offsets run without a gap; and the next round
// appends on top.
func TestKill9NodeWithReferences(t *testing.T) {
	const rounds = 8
	c := newClusterOf(t, 0, true, nil)
	tn := c.newNode(1, nil, 1, nil)
	*tn = *killNode(tn.dir, tn.raftAddr, tn.gossipAddr, tn.kafkaAddr, tn.adminAddr) // the child's node, on fresh addresses
	tn.start(t)
	leaderAmong(t, c.nodes)
	createTopic(t, c.nodes, "k", 2)
	tn.stop(t)

	var acks []killAck
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := range rounds {
		midSnapshot := round%2 == 1
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %s %s %d", nodeKillEnv,
			tn.dir, tn.raftAddr, tn.gossipAddr, tn.kafkaAddr, tn.adminAddr, round))
		var stderr bytes.Buffer // the child's log, shown if the round fails
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Acknowledged entries printed since the last "ckpt": up to four
		// (one a producer) may have been applied before the snapshot was
		// taken, so the target of eight or more means references past the
		// checkpoint in every kill between checkpoints.
		target := 8 + rng.IntN(20)
		sinceCkpt, snapshots, inSnapshot, killed := 0, 0, false, false
		lines := bufio.NewScanner(out)
		for !killed && lines.Scan() {
			line := lines.Text()
			switch {
			case strings.HasPrefix(line, "ack "):
				var a killAck
				if _, err := fmt.Sscanf(line, "ack %d %d %d", &a.i, &a.base[0], &a.base[1]); err != nil {
					t.Fatalf("round %d: child said %q", round, line)
				}
				a.round = round
				acks = append(acks, a)
				sinceCkpt++
				killed = !midSnapshot && snapshots > 0 && !inSnapshot && sinceCkpt >= target
			case line == "snap":
				inSnapshot = true
				killed = midSnapshot && snapshots > 0
			case line == "ckpt":
				inSnapshot, sinceCkpt = false, 0
				snapshots++
			default:
				t.Fatalf("round %d: child said %q", round, line)
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: the child stopped (%v) before the kill; its log:\n%s", round, lines.Err(), stderr.Bytes())
		}
		t.Logf("round %d: killed %s, %d entries acknowledged since the last checkpoint (%d in all)",
			round, map[bool]string{true: "as a snapshot began", false: "between checkpoints"}[midSnapshot], sinceCkpt, len(acks))

		tn.start(t)
		leaderAmong(t, c.nodes)
		if h := tn.n.HaltErr(); h != nil {
			t.Fatalf("round %d: the node halted after the restart: %v", round, h)
		}
		checkKillAcks(t, tn, round, acks)
		// The oldest batches are read from compacted entries the log
		// keeps for them, so the pin is under test too.
		if tn.n.store.RetainedBytes() == 0 {
			t.Fatalf("round %d: no compacted Raft log file is kept for references", round)
		}
		tn.stop(t)
	}
}

// killAck is entry i of a round, acknowledged at these base offsets of
// partitions 0 and 1.
type killAck struct {
	round, i int
	base     [2]int64
}

// checkKillAcks reads topic k's partitions on tn and checks every
// acknowledged entry against them.
func checkKillAcks(t *testing.T, tn *testNode, round int, acks []killAck) {
	t.Helper()
	for p := range int32(2) {
		at := map[int64][]byte{} // base offset -> payload
		seen := map[string]int64{}
		log := tn.f.Partition("k", p).Log
		next := log.Start()
		for _, b := range readAll(t, tn, "k", p) {
			base := int64(binary.BigEndian.Uint64(b[0:8]))
			if base != next {
				t.Fatalf("round %d: k/%d: batch at %d where %d was next", round, p, base, next)
			}
			payload := b[61:]
			key := string(payload[:bytes.IndexByte(payload, ';')+1])
			if prev, ok := seen[key]; ok {
				t.Fatalf("round %d: k/%d: batch %s at offsets %d and %d", round, p, key, prev, base)
			}
			seen[key], at[base] = base, payload
			next = base + int64(int32(binary.BigEndian.Uint32(b[23:27]))) + 1
		}
		if next != log.Next() {
			t.Fatalf("round %d: k/%d: the batches end at %d, the log at %d", round, p, next, log.Next())
		}
		for _, a := range acks {
			if got := at[a.base[p]]; !bytes.Equal(got, killPayload(a.round, a.i, p)) {
				t.Fatalf("round %d: k/%d: entry %d of round %d was acknowledged at offset %d; there now: %.20q",
					round, p, a.i, a.round, a.base[p], got)
			}
		}
		t.Logf("round %d: k/%d holds %d batches, every one of the %d acknowledged at its offset", round, p, len(at), len(acks))
	}
}
