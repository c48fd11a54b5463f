//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterKillDuringSnapshot SIGKILLs the leader of three inside a
// snapshot that links its segment files: while the links are staged, and
// the moment they move into the snapshot's directory (the snapshot's
// metadata is being written). Restarted, the node removes what the kill
// left, every record is there exactly once and in order at the same
// offsets, and a follower that must catch up by snapshot after that gets
// every partition's bytes from the linked snapshot.
func TestClusterKillDuringSnapshot(t *testing.T) {
	for _, w := range []struct {
		name string
		mask uint32
	}{
		{"links-staged", syscall.IN_CREATE},
		{"links-moved", syscall.IN_MOVED_FROM},
	} {
		t.Run(w.name, func(t *testing.T) { runKillDuringSnapshot(t, w.mask) })
	}
}

func runKillDuringSnapshot(t *testing.T, mask uint32) {
	const first, more = 2000, 1000
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			n.args = append(n.args, "--raft-trailing-logs", "16")
		}
	})
	topic := fmt.Sprintf("cl-snapkill-%d", time.Now().UnixNano()%1e9)
	createClusterTopic(t, c, topic)
	step(t, fmt.Sprintf("produce %d records", first), produceTimeout,
		func(ctx context.Context) error { return clProduceRange(ctx, c, topic, 0, first) })
	_, adm := c.adminClient()
	ends := clEndOffsets(t, adm, topic)

	target := c.node(c.leader())
	killInSnapshot(t, c, target, mask)
	left := snapshotLeftovers(target.dataDir)
	t.Logf("node %d killed inside its snapshot; it left %v", target.id, left)

	target.start()
	c.waitFormed(c.ids()...)
	if left := snapshotLeftovers(target.dataDir); len(left) > 0 {
		t.Errorf("node %d restarted and kept what the kill left: %v", target.id, left)
	}
	_, adm = c.adminClient()
	if got := clEndOffsets(t, adm, topic); fmt.Sprint(got) != fmt.Sprint(ends) {
		t.Errorf("end offsets after the kill %v, before %v", got, ends)
	}
	step(t, "every record, exactly once and in order", verifyTimeout,
		func(ctx context.Context) error { return clReadAll(ctx, c, topic, first) })

	// A follower that falls behind the leader's compacted log catches up
	// from the leader's snapshot, which links the segment files.
	leader := c.node(c.leader())
	var f *clusterNode
	for _, n := range c.nodes {
		if n != leader {
			f = n
			break
		}
	}
	f.stop()
	// In many requests: more Raft entries than the 16 trailing ones.
	step(t, fmt.Sprintf("produce %d more records with node %d stopped", more, f.id), produceTimeout,
		func(ctx context.Context) error {
			for i := first; i < first+more; i += more / 40 {
				if err := clProduceRange(ctx, c, topic, i, i+more/40); err != nil {
					return err
				}
			}
			return nil
		})
	step(t, fmt.Sprintf("snapshot and log compaction on the leader, node %d", leader.id), 30*time.Second,
		func(ctx context.Context) error { return c.takeSnapshot(ctx, leader) })
	linked, _ := filepath.Glob(filepath.Join(leader.dataDir, "raft", "snapshots", "*", "segments", "*.log"))
	if len(linked) == 0 {
		t.Errorf("the leader's snapshots link no segment file")
	}
	var snapIndex float64
	step(t, "the leader's snapshot index", 10*time.Second, func(ctx context.Context) (err error) {
		snapIndex, err = metricValue(ctx, leader, "kgate_raft_last_snapshot_index")
		return err
	})
	f.start()
	c.waitFormed(c.ids()...)
	step(t, fmt.Sprintf("node %d installed the leader's snapshot", f.id), 30*time.Second, func(ctx context.Context) error {
		for {
			got, err := metricValue(ctx, f, "kgate_raft_last_snapshot_index")
			if err == nil && got >= snapIndex {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last snapshot index %v, error %v; the leader's %v)", ctx.Err(), got, err, snapIndex)
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	step(t, "every node holds the same bytes of every partition", 60*time.Second,
		func(ctx context.Context) error { return clSameLogDirs(ctx, adm, topic) })
	step(t, "every record, exactly once and in order", verifyTimeout,
		func(ctx context.Context) error { return clReadAll(ctx, c, topic, first+more) })
}

// killInSnapshot asks node n for a snapshot (GET /v1/snapshot) and SIGKILLs
// the node the moment it reaches the step of raft/snapshot-links that mask
// watches.
func killInSnapshot(t *testing.T, c *kgateCluster, n *clusterNode, mask uint32) {
	t.Helper()
	dir := filepath.Join(n.dataDir, "raft", "snapshot-links")
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "inotify "+dir) // non-blocking: reads honour deadlines
	defer f.Close()
	if _, err := syscall.InotifyAddWatch(fd, dir, mask); err != nil {
		t.Fatalf("inotify on %s: %v", dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		// The node has taken no snapshot since the records: this one
		// links their segment files. The kill makes it fail.
		_ = c.takeSnapshot(ctx, n)
	}()
	defer func() { cancel(); <-asked }()
	if err := f.SetReadDeadline(time.Now().Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if _, err := f.Read(buf); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("node %d took no snapshot that reached %s within 60s", n.id, dir)
		}
		t.Fatal(err)
	}
	n.kill9()
}

// snapshotLeftovers lists unfinished snapshot directories and staged links.
func snapshotLeftovers(dataDir string) []string {
	var out []string
	if es, err := os.ReadDir(filepath.Join(dataDir, "raft", "snapshots")); err == nil {
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".tmp") {
				out = append(out, "raft/snapshots/"+e.Name())
			}
		}
	}
	if es, err := os.ReadDir(filepath.Join(dataDir, "raft", "snapshot-links")); err == nil {
		for _, e := range es {
			out = append(out, "raft/snapshot-links/"+e.Name())
		}
	}
	return out
}

// metricValue reads one unlabelled metric from node n's /metrics.
func metricValue(ctx context.Context, n *clusterNode, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addrs["admin-addr"]+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in node %d's metrics", name, n.id)
}
