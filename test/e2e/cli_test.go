package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runCLI runs bin/kgate with args and returns its stdout, stderr and exit
// status.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kgateBinary(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kgate %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// mustCLI runs bin/kgate and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("kgate %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// follower is a running node that does not lead.
func (c *kgateCluster) follower() *clusterNode {
	c.t.Helper()
	leader := c.leader()
	for _, n := range c.running() {
		if n.id != leader {
			return n
		}
	}
	c.t.Fatal("no follower running")
	return nil
}

// fillTopic creates topic with partitions and produces n records
// ("v0".."v<n-1>", round robin over the partitions).
func fillTopic(t *testing.T, ctx context.Context, bootstrap []string, topic string, partitions int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%d", i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// commitOffsets commits offset for every partition of topic in group as a
// simple (memberless) group commit.
func commitOffsets(t *testing.T, ctx context.Context, bootstrap []string, group, topic string, partitions int32, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs := kadm.Offsets{}
	for p := range partitions {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: offset, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}

// TestCLI drives kgate status, topics, groups, health and leave against a
// three-node cluster, asking a follower's admin API, in tables and --json.
func TestCLI(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := c.follower()
	admin := f.addrs["admin-addr"]
	leader := c.leader()

	// status
	out := mustCLI(t, "status", "--admin", admin)
	if !strings.Contains(out, fmt.Sprintf("leader %d\n", leader)) {
		t.Errorf("kgate status does not name leader %d:\n%s", leader, out)
	}
	for _, n := range c.nodes {
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^%d +alive +yes +%s +%s `, n.id, yesNo(n.id == leader), regexp.QuoteMeta(n.kafka())))
		if !row.MatchString(out) {
			t.Errorf("kgate status has no row for node %d (alive, voter, leader %v, %s):\n%s", n.id, n.id == leader, n.kafka(), out)
		}
	}
	var sv struct {
		LeaderID *int32 `json:"leader_id"`
		Nodes    []struct {
			ID int32 `json:"id"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "status", "--json", "--admin", admin)), &sv); err != nil {
		t.Fatalf("kgate status --json: %v", err)
	}
	if sv.LeaderID == nil || *sv.LeaderID != leader || len(sv.Nodes) != 3 {
		t.Errorf("kgate status --json: leader %v, %d nodes", sv.LeaderID, len(sv.Nodes))
	}

	// topics
	fillTopic(t, ctx, c.bootstrap(), "cli-topic", 2, 10)
	waitFor(t, ctx, "the follower reports both partitions' ends", func() error {
		out = mustCLI(t, "topics", "--admin", admin)
		for p := range 2 {
			row := regexp.MustCompile(fmt.Sprintf(`(?m)^cli-topic +%d +%d +0 +5 +5 +[0-9]+$`, p, leader))
			if !row.MatchString(out) {
				return fmt.Errorf("no row for partition %d (leader %d, 0..5, 5 records):\n%s", p, leader, out)
			}
		}
		return nil
	})

	// groups: a member with an assignment and committed offsets with lag.
	commitOffsets(t, ctx, c.bootstrap(), "cli-group", "cli-topic", 2, 2)
	member, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumerGroup("cli-group"),
		kgo.ConsumeTopics("cli-topic"), kgo.DisableAutoCommit(), kgo.ClientID("cli-member"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	go func() {
		for ctx.Err() == nil {
			if member.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	waitFor(t, ctx, "kgate groups lists the stable group", func() error {
		out = mustCLI(t, "groups", "--admin", admin)
		if !regexp.MustCompile(`(?m)^cli-group +Stable +consumer +[0-9]+ +1$`).MatchString(out) {
			return fmt.Errorf("kgate groups:\n%s", out)
		}
		return nil
	})
	out = mustCLI(t, "groups", "cli-group", "--admin", admin)
	for _, want := range []string{
		`(?m)^group cli-group  state Stable  generation [0-9]+  protocol \S+  total lag 6$`,
		`(?m)^\S+ \(leader\) +cli-member +\S+ +cli-topic:0,1$`,
		`(?m)^cli-topic +0 +2 +5 +3 +\S+$`,
		`(?m)^cli-topic +1 +2 +5 +3 +\S+$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("kgate groups cli-group does not match %s:\n%s", want, out)
		}
	}
	var gv struct {
		TotalLag int64 `json:"total_lag"`
		Members  []struct {
			ClientID string `json:"client_id"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "groups", "--json", "--admin", admin, "cli-group")), &gv); err != nil {
		t.Fatal(err)
	}
	if gv.TotalLag != 6 || len(gv.Members) != 1 || gv.Members[0].ClientID != "cli-member" {
		t.Errorf("kgate groups --json cli-group: %+v", gv)
	}
	if _, errOut, code := runCLI(t, "groups", "--admin", admin, "no-such-group"); code != 1 || !strings.Contains(errOut, "no such group") {
		t.Errorf("kgate groups no-such-group: exit %d, stderr %q", code, errOut)
	}
	member.Close()

	// health
	if out := mustCLI(t, "health", "--admin", admin); out != "ready\n" {
		t.Errorf("kgate health: %q", out)
	}
	if _, _, code := runCLI(t, "health", "--admin", "127.0.0.1:1", "--timeout", "2s"); code != 1 {
		t.Errorf("kgate health on a closed port: exit %d, want 1", code)
	}

	// leave: the follower leaves through another node's admin API, and the
	// leader takes it out of the voters.
	other := c.node(leader).addrs["admin-addr"]
	out = mustCLI(t, "leave", strconv.Itoa(int(f.id)), "--admin", other)
	if !strings.Contains(out, fmt.Sprintf("node %d left the cluster", f.id)) {
		t.Errorf("kgate leave: %q", out)
	}
	waitFor(t, ctx, "the node that left is no voter", func() error {
		v, err := c.view(ctx, c.node(leader))
		if err != nil {
			return err
		}
		if m, ok := v.member(f.id); ok && m.Voter {
			return fmt.Errorf("node %d still a voter: %+v", f.id, m)
		}
		return nil
	})
	f.stop()
	if _, errOut, code := runCLI(t, "leave", "9", "--admin", other); code != 1 || !strings.Contains(errOut, "node 9 is not in the cluster") {
		t.Errorf("kgate leave 9: exit %d, stderr %q", code, errOut)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestSnapshotSaveRestore: a snapshot saved through a follower's admin API
// (the CLI fetches it from the leader) of a running cluster and restored into a new node's data directory gives a new
// cluster with the same cluster id, every record, and the groups' committed
// offsets; two more nodes then join it.
func TestSnapshotSaveRestore(t *testing.T) {
	a := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fillTopic(t, ctx, a.bootstrap(), "kept", 3, 90)
	commitOffsets(t, ctx, a.bootstrap(), "kept-group", "kept", 3, 20)
	f := a.follower()
	waitFor(t, ctx, "the follower applied the commit", func() error {
		var g struct {
			TotalLag int64 `json:"total_lag"`
		}
		if err := a.getJSON(ctx, f, "/v1/groups/kept-group", &g); err != nil {
			return err
		}
		if g.TotalLag != 30 {
			return fmt.Errorf("total lag %d", g.TotalLag)
		}
		return nil
	})
	va, err := a.view(ctx, f)
	if err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "kgate.snap")
	out := mustCLI(t, "snapshot", "save", file, "--admin", f.addrs["admin-addr"])
	if !strings.Contains(out, fmt.Sprintf("saved snapshot of cluster %s from node %d ", va.ClusterID, a.leader())) {
		t.Errorf("kgate snapshot save: %q", out)
	}
	// A second save with nothing new since reuses the latest snapshot.
	mustCLI(t, "snapshot", "save", file+".2", "--admin", f.addrs["admin-addr"])

	// The new cluster: node 1 restored from the file, 2 and 3 join it.
	b := &kgateCluster{t: t, bin: kgateBinary(t), dir: t.TempDir(), http: &http.Client{Timeout: 2 * time.Second}, used: map[string]bool{}}
	for range clusterSize {
		b.newNode()
	}
	n1 := b.node(1)
	out = mustCLI(t, "snapshot", "restore", file, "--node-id", "1", "--data-dir", n1.dataDir, "--raft-addr", n1.addrs["raft-addr"])
	if !strings.Contains(out, "restored snapshot of cluster "+va.ClusterID) {
		t.Errorf("kgate snapshot restore: %q", out)
	}
	if _, errOut, code := runCLI(t, "snapshot", "restore", file, "--node-id", "1", "--data-dir", n1.dataDir,
		"--raft-addr", n1.addrs["raft-addr"]); code != 1 || !strings.Contains(errOut, "not empty") {
		t.Errorf("restore into a used data directory: exit %d, stderr %q", code, errOut)
	}
	n1.args = []string{}
	for _, n := range b.nodes[1:] {
		n.args = []string{"--join", n1.addrs["gossip-addr"]}
	}
	t.Cleanup(b.cleanup)
	for _, n := range b.nodes {
		n.start()
	}
	b.waitFormed(1, 2, 3)
	vb, err := b.view(ctx, b.node(2))
	if err != nil {
		t.Fatal(err)
	}
	if vb.ClusterID != va.ClusterID {
		t.Errorf("restored cluster id %s, want %s", vb.ClusterID, va.ClusterID)
	}

	// Every record, and the committed offsets, through the new cluster.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.bootstrap()...), kgo.ConsumeTopics("kept"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	for len(seen) < 90 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 90 records from the restored cluster", len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	for i := range 90 {
		if !seen[fmt.Sprintf("v%d", i)] {
			t.Errorf("record v%d missing after restore", i)
		}
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "kept-group")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if o, ok := offs.Lookup("kept", p); !ok || o.At != 20 {
			t.Errorf("kept-group partition %d: committed %+v (found %v), want 20", p, o, ok)
		}
	}
	out = mustCLI(t, "groups", "kept-group", "--admin", b.node(3).addrs["admin-addr"])
	if !strings.Contains(out, "total lag 30") {
		t.Errorf("kgate groups kept-group on the restored cluster:\n%s", out)
	}
	b.stopAll()
}
