package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// previousRelease is the commit the rolling-upgrade test upgrades from: the
// last one before feature levels (its entries carry no version byte and it
// skips what it cannot decode, so it must never see a new command kind).
const previousRelease = "f2d51b6"

// TestClusterRollingUpgrade runs a three-node cluster of the previous
// release under load — an idempotent producer and a consumer group of
// three — and replaces the binary node by node (followers first, the
// leader last) with this one, as docs/operations.md describes. No node may
// stop on its own, every acknowledged record is consumed and committed, and
// once the last node runs the new binary the leader raises the cluster's
// feature level; the members' leaves, written at that level, empty the group.
func TestClusterRollingUpgrade(t *testing.T) {
	oldBin := previousReleaseBinary(t)
	newBin := kgateBinary(t)
	begin := time.Now()
	c := startClusterOf(t, oldBin, nil)
	_, adm := c.adminClient()
	suffix := time.Now().UnixNano() % 1e9
	topic := fmt.Sprintf("cl-upgrade-%d", suffix)
	group := fmt.Sprintf("cl-upgrade-group-%d", suffix)
	createClusterTopic(t, c, topic)

	prod := startClusterProducer(t, c, topic)
	w := newClGroupWatch()
	members, names := clFranzGoMembers.startMembers(t, c, topic, group, "upgrade", w, clMemberOpts{})
	before := clWaitGroupStable(t, c, adm, group, topic, names, w)
	w.arm()
	t.Logf("group stable %v after start: %s", time.Since(begin).Round(time.Millisecond), before)
	offsets := clWatchOffsets(c, group, topic)

	upgraded := map[int32]bool{}
	for len(upgraded) < clusterSize {
		leader := c.leader()
		n := c.node(leader)
		for _, cand := range c.nodes {
			if !upgraded[cand.id] && cand.id != leader {
				n = cand
				break
			}
		}
		acked := prod.acked()
		at := time.Now()
		n.stop()
		n.bin = newBin
		n.start()
		upgraded[n.id] = true
		newLeader := c.waitFormed(c.ids()...)
		if err := prod.waitAcked(acked, 30*time.Second); err != nil {
			t.Fatalf("producer makes no progress after node %d was upgraded: %v", n.id, err)
		}
		t.Logf("node %d (leader: %v) upgraded in %v; leader now node %d", n.id, n.id == leader,
			time.Since(at).Round(time.Millisecond), newLeader)
	}

	step(t, "the cluster's feature level is raised on every node", 30*time.Second, func(ctx context.Context) error {
		return retry(ctx, 100*time.Millisecond, func() error { return c.featureLevelRaised(ctx) })
	})
	// Some load written at the new level too.
	if err := prod.waitAcked(prod.acked()+500, 30*time.Second); err != nil {
		t.Fatalf("producer after the feature level was raised: %v", err)
	}
	_, adm = clDrain(t, c, prod, w, group, topic)
	after := clDescribeGroupWithin(t, c, adm, group, topic, 30*time.Second)
	t.Logf("group after the upgrade: %s", after)
	if after.state != "Stable" {
		t.Errorf("group state %s after the upgrade, want Stable", after.state)
	}
	offsets.finish(t)
	for _, n := range c.nodes {
		if !n.running() {
			t.Errorf("node %d is not running after the upgrade (%s)", n.id, n.exitStatus())
		}
	}

	w.disarm()
	for _, m := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := m.close(ctx); err != nil {
			t.Errorf("closing %s: %v", m.name(), err)
		}
		cancel()
	}
	// At the new level each leave is a guarded removal (RemoveMembers v2):
	// they still empty the group.
	step(t, "the members' leaves empty the group", 30*time.Second, func(ctx context.Context) error {
		for {
			s, err := clDescribeGroup(ctx, c, adm, group, topic)
			if err == nil && s.state == "Empty" && len(s.members) == 0 {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("group %s with members %v", s.state, s.members)
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	w.report(t)
	t.Logf("rolling upgrade from %s done in %v", previousRelease, time.Since(begin).Round(time.Millisecond))
}

// featureLevelRaised reports whether every node shows the cluster at the
// highest feature level its binary supports.
func (c *kgateCluster) featureLevelRaised(ctx context.Context) error {
	for _, n := range c.nodes {
		v, err := c.view(ctx, n)
		if err != nil {
			return err
		}
		if v.MaxFeatureLevel == 0 || v.FeatureLevel != v.MaxFeatureLevel {
			return fmt.Errorf("node %d at feature level %d of %d", n.id, v.FeatureLevel, v.MaxFeatureLevel)
		}
	}
	return nil
}

// previousReleaseBinary builds kgate at previousRelease from this
// repository's history (git archive, then go build), once: the binary is
// kept as bin/kgate-<commit>.
func previousReleaseBinary(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	out := filepath.Join(root, "bin", "kgate-"+previousRelease)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	src := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, previousRelease, src)
	if b, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extracting %s from git history (the test needs the repository's history): %v\n%s", previousRelease, err, b)
	}
	tmp := out + ".tmp"
	build := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./cmd/kgate")
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kgate %s: %v\n%s", previousRelease, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}
