package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
)

// fullStore makes the Raft store's writes fail with ENOSPC while full is
// set: every write, or (termOnly) only the write of the current term,
// which hashicorp/raft panics on.
type fullStore struct {
	logStable
	full     atomic.Bool
	termOnly bool
}

func (s *fullStore) enospc(op string) error {
	if s.full.Load() && !s.termOnly {
		return fmt.Errorf("%s: write raft.db: %w", op, syscall.ENOSPC)
	}
	return nil
}

func (s *fullStore) StoreLog(l *raft.Log) error {
	if err := s.enospc("store log"); err != nil {
		return err
	}
	return s.logStable.StoreLog(l)
}

func (s *fullStore) StoreLogs(ls []*raft.Log) error {
	if err := s.enospc("store logs"); err != nil {
		return err
	}
	return s.logStable.StoreLogs(ls)
}

func (s *fullStore) DeleteRange(min, max uint64) error {
	if err := s.enospc("delete range"); err != nil {
		return err
	}
	return s.logStable.DeleteRange(min, max)
}

func (s *fullStore) Set(k, v []byte) error {
	if err := s.enospc("set"); err != nil {
		return err
	}
	return s.logStable.Set(k, v)
}

func (s *fullStore) SetUint64(k []byte, v uint64) error {
	if s.full.Load() && (!s.termOnly || string(k) == keyCurrentTerm) {
		return fmt.Errorf("set %s: write raft.db: %w", k, syscall.ENOSPC)
	}
	return s.logStable.SetUint64(k, v)
}

// fullDiskCluster starts three nodes whose stores can be filled; halts
// receives every OnHalt.
func fullDiskCluster(t *testing.T, termOnly bool) (*testCluster, map[int32]*fullStore, chan error) {
	stores := map[int32]*fullStore{}
	halts := make(chan error, 8)
	c := newCluster(t, 3, func(cfg *Config) {
		id := cfg.NodeID
		cfg.wrapStore = func(s logStable) logStable {
			fs := &fullStore{logStable: s, termOnly: termOnly}
			stores[id] = fs
			return fs
		}
		cfg.OnHalt = func(err error) { halts <- err }
	})
	return c, stores, halts
}

func awaitStorageHalt(t *testing.T, tn *testNode, halts chan error) *StorageError {
	t.Helper()
	select {
	case err := <-halts:
		var se *StorageError
		if !errors.As(err, &se) || !DiskFull(err) {
			t.Fatalf("halt error %v, want a full-disk StorageError", err)
		}
		if !tn.log().contains("the disk of the data directory is full") {
			t.Errorf("node %d's log does not name the full disk:\n%s", tn.id, tn.log())
		}
		if tn.n.Ready() || tn.n.IsLeader() {
			t.Errorf("halted node %d: ready %v, leader %v", tn.id, tn.n.Ready(), tn.n.IsLeader())
		}
		return se
	case <-time.After(20 * time.Second):
		t.Fatalf("node %d did not halt", tn.id)
		return nil
	}
}

// A node whose Raft store cannot be written halts on the first failed
// write — a follower storing entries, the leader storing its own — while
// the other two go on committing; with room again it restarts and catches
// up.
func TestNodeHaltsWhenItsDiskIsFull(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			c, stores, halts := fullDiskCluster(t, false)
			leader := leaderAmong(t, c.nodes)
			createTopic(t, c.nodes, "before", 1)
			target := leader
			if role == "follower" {
				target = anyFollower(t, c.nodes, leader)
			}
			stores[target.id].full.Store(true)
			// Proposed through the leader; a full leader halts on it and
			// the others elect a new one, through which it is retried.
			createTopic(t, c.running(), "during", 1)
			awaitStorageHalt(t, target, halts)
			others := without(c.nodes, target)
			createTopic(t, others, "while-down", 1)

			target.stop(t) // the process exits; it must not hang
			target.start(t)
			leaderAmong(t, c.nodes)
			eventually(t, 20*time.Second, "the node caught up", func() error {
				for _, name := range []string{"before", "during", "while-down"} {
					if target.f.Topic(name) == nil {
						return fmt.Errorf("topic %s missing on node %d", name, target.id)
					}
				}
				return nil
			})
		})
	}
}

// A failed write of the current term, which hashicorp/raft panics on,
// halts the node without a panic, and the node still shuts down.
func TestNodeHaltsWhenItCannotSaveTheTerm(t *testing.T) {
	c, stores, halts := fullDiskCluster(t, true)
	leader := leaderAmong(t, c.nodes)
	createTopic(t, c.nodes, "before", 1)
	target := anyFollower(t, c.nodes, leader)
	stores[target.id].full.Store(true)
	leader.stop(t) // hands leadership over: a new term
	se := awaitStorageHalt(t, target, halts)
	if se.Op != "set CurrentTerm" {
		t.Errorf("halted on %q, want set CurrentTerm", se.Op)
	}
	stopped := make(chan struct{})
	go func() {
		target.stop(t)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("a node halted inside Raft's term write does not shut down")
	}
}

// A leader handing over leadership that halts inside Raft's term write (the
// new leader's vote request carries the next term, and the disk is full)
// must not wait for Raft to answer the transfer: Raft's goroutine is held
// in that write until Shutdown. The campaign saw such a leader's shutdown
// hang on its transfer for six minutes, heartbeating, while the others
// elected nobody. The hand-over returns, the node shuts down, and the
// others lead.
func TestLeaderHaltedInsideTheTermWriteDuringATransferShutsDown(t *testing.T) {
	c, stores, halts := fullDiskCluster(t, true)
	leader := leaderAmong(t, c.nodes)
	createTopic(t, c.nodes, "before", 1)
	stores[leader.id].full.Store(true)
	handedOver := make(chan struct{})
	go func() {
		defer close(handedOver)
		leader.n.StepDown()
	}()
	awaitStorageHalt(t, leader, halts)
	select {
	case <-handedOver:
	case <-time.After(20 * time.Second):
		t.Fatal("the hand-over of a leader halted inside the term write did not return")
	}
	stopped := make(chan struct{})
	go func() {
		leader.stop(t)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("a leader halted inside the term write during a transfer does not shut down")
	}
	others := without(c.nodes, leader)
	leaderAmong(t, others)
	createTopic(t, others, "after", 1)
}

// A snapshot left unfinished (the disk filled while it was written) is
// removed at start: Raft never reads nor removes it, and it would keep
// holding the space it took.
func TestStartRemovesUnfinishedSnapshots(t *testing.T) {
	c := &testCluster{t: t, used: map[string]bool{}}
	tn := c.newNode(1, nil, 1, nil)
	tn.start(t)
	leaderAmong(t, c.nodes)
	createTopic(t, c.nodes, "t", 1)
	tn.stop(t)
	partial := filepath.Join(tn.dir, "raft", "snapshots", "2-409-1796409420875.tmp")
	if err := os.MkdirAll(partial, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(partial, "state.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	tn.start(t)
	if _, err := os.Stat(partial); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unfinished snapshot %s still there after start (%v)", partial, err)
	}
	leaderAmong(t, c.nodes)
	if tn.f.Topic("t") == nil {
		t.Fatal("topic t lost across the restart")
	}
}

// singleNode starts a one-node cluster (tune, if set, adjusts its config)
// and waits until it leads.
func singleNode(t *testing.T, tune func(*Config)) (*testCluster, *testNode) {
	t.Helper()
	c := &testCluster{t: t, used: map[string]bool{}}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	tn := c.newNode(1, nil, 1, tune)
	tn.start(t)
	leaderAmong(t, []*testNode{tn})
	return c, tn
}

// A node started again on a disk that is still full fails to start with
// an error naming the full disk. hashicorp/raft's NewRaft writes the
// current term back to the stable store and panics when that fails; when
// nothing before it needed a free block (a restart that only cut an
// unfinished write off the Raft log), the process died in that panic.
func TestStartOnAFullDiskFailsWithoutPanicking(t *testing.T) {
	var full atomic.Bool
	_, tn := singleNode(t, func(cfg *Config) {
		cfg.wrapStore = func(s logStable) logStable {
			fs := &fullStore{logStable: s, termOnly: true}
			fs.full.Store(full.Load())
			return fs
		}
	})
	createTopic(t, []*testNode{tn}, "t", 1)
	tn.stop(t)

	full.Store(true)
	sink := &logSink{}
	f, err := fsm.Open(fsm.Options{Dir: tn.dir, SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg := Config{NodeID: tn.id, DataDir: tn.dir, RaftAddr: tn.raftAddr, KafkaAddr: tn.kafkaAddr,
		Logger: slog.New(slog.NewTextHandler(sink, nil)), transport: cuttableTransport}
	tn.tune(&cfg)
	var n *Node
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Start panicked on a full disk: %v", p)
			}
		}()
		n, err = Start(cfg, f)
	}()
	if err == nil {
		n.Shutdown()
		t.Fatal("Start on a full disk succeeded")
	}
	var se *StorageError
	if !errors.As(err, &se) || !DiskFull(err) {
		t.Fatalf("Start: %v, want a full-disk StorageError", err)
	}
	if !sink.contains("the disk of the data directory is full") {
		t.Errorf("the log does not name the full disk:\n%s", sink)
	}
}
