package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterFullRestart stops all three nodes with SIGTERM — at once, or
// one after the other starting with the leader — and starts them again on
// the same data directories. The topic, every acknowledged record (exactly
// once, in order), the group and its committed offsets must survive, and a
// new group of consumers must resume exactly at the commits: it reads the
// records produced after the commit and nothing before.
func TestClusterFullRestart(t *testing.T) {
	t.Run("together", func(t *testing.T) {
		runClusterFullRestart(t, func(c *kgateCluster) { c.stopAll() })
	})
	t.Run("one-by-one", func(t *testing.T) {
		runClusterFullRestart(t, func(c *kgateCluster) {
			for len(c.running()) > 0 {
				n := c.running()[0]
				if len(c.running()) > 1 {
					n = c.node(c.leader())
				}
				at := time.Now()
				n.stop()
				t.Logf("node %d stopped (SIGTERM) in %v", n.id, time.Since(at).Round(time.Millisecond))
			}
		})
	})
}

func runClusterFullRestart(t *testing.T, stopAll func(*kgateCluster)) {
	const (
		committedRecords = 1200 // consumed and committed before the restart
		pendingRecords   = 600  // produced after the commit, read after the restart
	)
	c := startCluster(t)
	suffix := time.Now().UnixNano() % 1e9
	topic := fmt.Sprintf("cl-restart-%d", suffix)
	group := fmt.Sprintf("cl-restart-group-%d", suffix)
	createClusterTopic(t, c, topic)

	produce := func(from, to int) {
		t.Helper()
		step(t, fmt.Sprintf("produce %s..%s", clusterValue(from), clusterValue(to-1)), produceTimeout,
			func(ctx context.Context) error { return clProduceRange(ctx, c, topic, from, to) })
	}
	produce(0, committedRecords)

	// A group of three consumes everything and commits it.
	w := newClGroupWatch()
	members, names := clFranzGoMembers.startMembers(t, c, topic, group, "restart-a", w, clMemberOpts{})
	_, adm := c.adminClient()
	before := clWaitGroupStable(t, c, adm, group, topic, names, w)
	w.arm()
	t.Logf("group before the restart: %s", before)
	step(t, "group consumes the first records", time.Minute,
		func(ctx context.Context) error { return clWaitConsumed(ctx, w, indexes(0, committedRecords)) })
	step(t, "commits reach the end", 30*time.Second,
		func(ctx context.Context) error { return clWaitCommitted(ctx, adm, group, topic) })
	w.disarm()
	for _, m := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := m.close(ctx); err != nil {
			t.Errorf("closing %s: %v", m.name(), err)
		}
		cancel()
	}
	w.report(t)
	produce(committedRecords, committedRecords+pendingRecords)

	commits := clFetchCommits(t, adm, group, topic)
	ends := clEndOffsets(t, adm, topic)
	t.Logf("before the restart: committed %v, end offsets %v", commits, ends)
	for p, off := range commits {
		if want := int64(committedRecords / clusterPartitions); off != want {
			t.Fatalf("partition %d committed at %d before the restart, want %d", p, off, want)
		}
	}

	begin := time.Now()
	stopAll(c)
	t.Logf("all nodes stopped (SIGTERM) in %v", time.Since(begin).Round(time.Millisecond))
	for _, n := range c.nodes {
		n.start()
	}
	leader := c.waitFormed(c.ids()...)
	t.Logf("cluster back %v after the stop, leader node %d", time.Since(begin).Round(time.Millisecond), leader)

	_, adm = c.adminClient()
	step(t, "topic metadata after the restart", createTimeout, func(ctx context.Context) error {
		return clTopicLed(ctx, adm, topic)
	})
	if got := clEndOffsets(t, adm, topic); fmt.Sprint(got) != fmt.Sprint(ends) {
		t.Errorf("end offsets after the restart %v, before %v", got, ends)
	}
	step(t, "every record, exactly once and in order", verifyTimeout, func(ctx context.Context) error {
		return clReadAll(ctx, c, topic, committedRecords+pendingRecords)
	})
	groups := clListGroups(t, adm)
	if _, ok := groups[group]; !ok {
		t.Errorf("group %s not listed after the restart (ListGroups: %v)", group, groups)
	}
	if got := clFetchCommits(t, adm, group, topic); fmt.Sprint(got) != fmt.Sprint(commits) {
		t.Errorf("committed offsets after the restart %v, before %v", got, commits)
	}

	// New consumers of the group resume at the commits.
	w2 := newClGroupWatch()
	members2, names2 := clFranzGoMembers.startMembers(t, c, topic, group, "restart-b", w2, clMemberOpts{})
	clWaitGroupStable(t, c, adm, group, topic, names2, w2)
	w2.arm()
	step(t, "restarted group consumes the records produced after the commit", time.Minute,
		func(ctx context.Context) error {
			return clWaitConsumed(ctx, w2, indexes(committedRecords, committedRecords+pendingRecords))
		})
	step(t, "commits reach the end again", 30*time.Second,
		func(ctx context.Context) error { return clWaitCommitted(ctx, adm, group, topic) })
	w2.disarm()
	for _, m := range members2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := m.close(ctx); err != nil {
			t.Errorf("closing %s: %v", m.name(), err)
		}
		cancel()
	}
	w2.report(t)
	if early := w2.consumedBelow(committedRecords); len(early) > 0 {
		t.Errorf("after the restart the group re-read %d records below its commits, e.g. %s", len(early), firstN(early, 10))
	}
}

func indexes(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// consumedBelow lists the consumed values with index < n.
func (w *clGroupWatch) consumedBelow(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i := range w.consumed {
		if i < n {
			out = append(out, clusterValue(i))
		}
	}
	sort.Strings(out)
	return out
}

// clProduceRange produces clusterValue(i) to partition i%clusterPartitions
// for i in from..to-1 and waits for every acknowledgement.
func clProduceRange(ctx context.Context, c *kgateCluster, topic string, from, to int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % clusterPartitions), Value: []byte(clusterValue(i))})
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// clTopicLed waits until Metadata shows the topic with clusterPartitions
// led partitions.
func clTopicLed(ctx context.Context, adm *kadm.Client, topic string) error {
	var last error
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td := md.Topics[topic]
			led := 0
			for _, p := range td.Partitions {
				if p.Err == nil && p.Leader >= 0 {
					led++
				}
			}
			if td.Err == nil && led == clusterPartitions && len(td.Partitions) == clusterPartitions {
				return nil
			}
			err = fmt.Errorf("topic error %v, %d partitions, %d led", td.Err, len(td.Partitions), led)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// clFetchCommits returns the group's committed offset per partition of topic.
func clFetchCommits(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	step(t, "fetch committed offsets", 30*time.Second, func(ctx context.Context) error {
		for {
			resp, err := adm.FetchOffsets(ctx, group)
			if err == nil {
				err = resp.Error()
			}
			if err == nil {
				for p, r := range resp[topic] {
					out[p] = r.At
				}
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return out
}

func clEndOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	step(t, "list end offsets", 30*time.Second, func(ctx context.Context) error {
		for {
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err == nil {
				err = ends.Error()
			}
			if err == nil {
				ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return out
}

func clListGroups(t *testing.T, adm *kadm.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	step(t, "list groups", 30*time.Second, func(ctx context.Context) error {
		for {
			lg, err := adm.ListGroups(ctx)
			if err == nil {
				for g, l := range lg {
					out[g] = l.State
				}
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return out
}

// clReadAll reads every partition from offset 0 by direct assignment and
// checks that the topic holds exactly clusterValue(0..n-1), each in its
// partition, in produce order.
func clReadAll(ctx context.Context, c *kgateCluster, topic string, n int) error {
	parts := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range int32(clusterPartitions) {
		parts[topic][p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumePartitions(parts),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := map[int]int{}
	last := map[int32]int{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %d of %d records: %w", len(seen), n, err)
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			i, ok := parseClusterValue(string(r.Value))
			switch {
			case bad != nil:
			case !ok || i >= n:
				bad = fmt.Errorf("partition %d offset %d: unexpected value %q", r.Partition, r.Offset, r.Value)
			case int32(i%clusterPartitions) != r.Partition:
				bad = fmt.Errorf("%s in partition %d", r.Value, r.Partition)
			case seen[i] > 0:
				bad = fmt.Errorf("%s appears twice (again at partition %d offset %d)", r.Value, r.Partition, r.Offset)
			default:
				if prev, ok := last[r.Partition]; ok && i < prev {
					bad = fmt.Errorf("partition %d offset %d: %s after %s", r.Partition, r.Offset, r.Value, clusterValue(prev))
				}
				last[r.Partition] = i
				seen[i]++
			}
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}
