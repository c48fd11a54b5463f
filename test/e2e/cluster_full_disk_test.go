//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestClusterFullDisk fills the disk of one node of three — a follower, then
// (a fresh cluster) the leader — while an idempotent acks=all producer
// writes and a group of three franz-go members consumes and commits. Each
// node's data directory is a 64 MiB tmpfs of its own (smallDisk); the test
// fills it to the last byte.
//
// What must happen (docs/reliability.md, "Full disk"): the node's next write
// fails, it halts (fail-stop, as a Kafka broker whose last log dir failed):
// it logs a line naming the full disk and exits non-zero, without a panic.
// A leader's in-flight produces are answered KAFKA_STORAGE_ERROR, a
// retriable error: the producer retries on the new leader. The two others
// go on serving: the producer is acknowledged and the group keeps its
// members and generation. Started again while the disk is still full (a
// supervisor's restart), the node halts the same way and its data is not
// harmed; once the filler is deleted, a restart brings it back as a voter,
// every acknowledged record is readable exactly once and in order, every
// node holds the same bytes of every partition, and committed offsets never
// went back.
//
// In "snapshot" the follower is stopped first, the leader takes a snapshot
// and compacts its log (--raft-trailing-logs 16) while the follower's disk
// is filled: started again, the follower needs the whole snapshot, which
// cannot be written, and must stop the same way rather than refuse it
// forever as a ready voter.
func TestClusterFullDisk(t *testing.T) {
	for _, target := range []string{"follower", "leader", "snapshot"} {
		t.Run(target, func(t *testing.T) { runClusterFullDisk(t, target) })
	}
}

const (
	fullDiskMiB = 64
	// fullDiskStop bounds how long a node with a full disk may take to
	// stop: its next write fails within moments under the load.
	fullDiskStop = 30 * time.Second
	// diskFullLine is what the node logs when it stops for a full disk.
	diskFullLine = "the disk of the data directory is full"
)

func runClusterFullDisk(t *testing.T, mode string) {
	begin := time.Now()
	disks := map[int32]*smallDisk{}
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			disks[n.id] = mountSmallDisk(t, n.dataDir, fullDiskMiB)
			if mode == "snapshot" {
				n.args = append(n.args, "--raft-trailing-logs", "16")
			}
		}
	})
	_, adm := c.adminClient()
	suffix := time.Now().UnixNano() % 1e9
	topic := fmt.Sprintf("cl-disk-%d", suffix)
	group := fmt.Sprintf("cl-disk-group-%d", suffix)
	createClusterTopic(t, c, topic)

	prod := startClusterProducer(t, c, topic)
	w := newClGroupWatch()
	w.noDuplicates = true
	members, names := clFranzGoMembers.startMembers(t, c, topic, group, "disk", w, leaderKillsMemberOpts)
	before := clWaitGroupStable(t, c, adm, group, topic, names, w)
	w.arm()
	kgoBefore := clKgoGroupMeta(members)
	offsets := clWatchOffsets(c, group, topic)
	t.Logf("group stable %v after start: %s", time.Since(begin).Round(time.Millisecond), before)

	leader := c.leader()
	target := c.node(leader)
	if mode != "leader" {
		for _, n := range c.nodes {
			if n.id != leader {
				target = n
				break
			}
		}
	}
	disk := disks[target.id]
	if mode == "snapshot" {
		target.stop()
		if err := prod.waitAcked(prod.acked()+500, 30*time.Second); err != nil {
			t.Fatalf("producer makes no progress with node %d stopped: %v", target.id, err)
		}
		step(t, fmt.Sprintf("snapshot and log compaction on the leader, node %d", leader), 30*time.Second,
			func(ctx context.Context) error { return c.takeSnapshot(ctx, c.node(leader)) })
	}
	used, size := disk.usage()
	filled := disk.fill(t)
	at := time.Now()
	t.Logf("node %d (leader %d): %d of %d bytes used; filled the rest (%d bytes)", target.id, leader, used, size, filled)
	if mode == "snapshot" {
		target.start()
	}

	// The node stops by itself, cleanly, naming the disk.
	awaitDiskFullStop := func(what string) {
		t.Helper()
		select {
		case <-target.exited:
		case <-time.After(fullDiskStop):
			t.Fatalf("%s: node %d still running %v after its disk filled\nlog tail:\n%s", what, target.id, fullDiskStop,
				tailFile(target.logPath, 40))
		}
		target.stopping = true // expected: cleanup must not report it
		tail := tailFile(target.logPath, 60)
		if target.runErr == nil {
			t.Errorf("%s: node %d exited 0 on a full disk, want a non-zero exit (fail-stop)", what, target.id)
		}
		if !strings.Contains(tail, diskFullLine) {
			t.Errorf("%s: node %d's log does not say %q:\n%s", what, target.id, diskFullLine, tail)
		}
		if strings.Contains(tail, "panic") || strings.Contains(tail, "goroutine ") {
			t.Errorf("%s: node %d panicked:\n%s", what, target.id, tail)
		}
	}
	awaitDiskFullStop("first fill")
	t.Logf("node %d stopped %v after its disk filled (%s)", target.id, time.Since(at).Round(time.Millisecond), target.exitStatus())

	// The two others serve on: the producer is acknowledged through them.
	var survivors []int32
	for _, n := range c.running() {
		survivors = append(survivors, n.id)
	}
	newLeader := c.waitFormed(survivors...)
	acked := prod.acked()
	if err := prod.waitAcked(acked+500, 30*time.Second); err != nil {
		t.Fatalf("producer makes no progress with node %d down: %v", target.id, err)
	}
	t.Logf("node %d leads; producer acknowledged again %v after the fill", newLeader, time.Since(at).Round(time.Millisecond))

	// A supervisor restarts it while the disk is still full: it stops again.
	target.start()
	awaitDiskFullStop("restart on the full disk")
	t.Logf("restarted on the full disk, node %d stopped again (%s)", target.id, target.exitStatus())

	disk.free(t)
	freed := time.Now()
	target.start()
	c.waitFormed(c.ids()...)
	t.Logf("space freed; node %d back as a voter %v later", target.id, time.Since(freed).Round(time.Millisecond))
	if err := prod.waitAcked(prod.acked()+500, 30*time.Second); err != nil {
		t.Fatalf("producer makes no progress after node %d came back: %v", target.id, err)
	}

	ackedIdx, adm := clDrain(t, c, prod, w, group, topic)
	step(t, "every acknowledged record, exactly once and in order", verifyTimeout,
		func(ctx context.Context) error { return clReadAll(ctx, c, topic, len(ackedIdx)) })
	step(t, "every node holds the same bytes of every partition", 30*time.Second,
		func(ctx context.Context) error { return clSameLogDirs(ctx, adm, topic) })

	after := clDescribeGroupWithin(t, c, adm, group, topic, 30*time.Second)
	t.Logf("group after the full disk: %s", after)
	clGroupKept(t, "the full disk", before, after, kgoBefore, members, w)
	offsets.finish(t)
	clCloseMembers(t, w, members)
	t.Logf("full disk (%s) done in %v", mode, time.Since(begin).Round(time.Millisecond))
}

// clSameLogDirs waits until every node reports (DescribeLogDirs, each node
// for its own files) the same non-zero size for every partition of topic.
func clSameLogDirs(ctx context.Context, adm *kadm.Client, topic string) error {
	var last error
	for {
		last = func() error {
			all, err := adm.DescribeAllLogDirs(ctx, nil) // nil: every node (a set goes to the leader only)
			if err != nil {
				return err
			}
			if len(all) != clusterSize {
				return fmt.Errorf("log dirs of %d nodes, want %d", len(all), clusterSize)
			}
			var first string
			for broker, dirs := range all {
				sizes := map[int32]int64{}
				for _, d := range dirs {
					if d.Err != nil {
						return fmt.Errorf("node %d dir %s: %w", broker, d.Dir, d.Err)
					}
					for p, dp := range d.Topics[topic] {
						sizes[p] += dp.Size
					}
				}
				if len(sizes) != clusterPartitions {
					return fmt.Errorf("node %d has %d partitions, want %d", broker, len(sizes), clusterPartitions)
				}
				s := fmt.Sprint(sizes)
				if first == "" {
					first = s
				} else if s != first {
					return fmt.Errorf("partition sizes differ: %s and node %d %s", first, broker, s)
				}
			}
			return nil
		}()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// takeSnapshot has node n take a snapshot (GET /v1/snapshot, as kgate
// snapshot save does), which also compacts its Raft log down to the
// trailing entries, and discards it.
func (c *kgateCluster) takeSnapshot(ctx context.Context, n *clusterNode) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addrs["admin-addr"]+"/v1/snapshot", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v1/snapshot on node %d: %s", n.id, resp.Status)
	}
	return nil
}
