package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scrape is one parsed GET /metrics.
type scrape map[string]*dto.MetricFamily

func scrapeNode(t *testing.T, admin string) scrape {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include every pair in labels (k1, v1, k2, v2 …), summed over matches;
// ok is false when none matches.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	var sum float64
	found := false
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			match := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					match = true
				}
			}
			if !match {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, found
}

// TestMetrics scrapes every node of a three-node cluster after a little
// load: produce, a consumer group that commits part of what it read, and a
// request a follower must refuse. The lag is what was produced minus what
// was committed, on every node.
func TestMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)

	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(nodes)...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, "clicks"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	const produced, committed = 25, 7
	produceTo(ctx, t, cl, "clicks", 0, produced)

	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(nodes)...), kgo.ConsumerGroup("dashboards"),
		kgo.ConsumeTopics("clicks"), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < produced; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, produced)
		}
		got += len(fs.Records())
	}
	var commitErr error
	cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"clicks": {0: {Epoch: -1, Offset: committed}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}

	// A follower answers a group request NOT_COORDINATOR.
	follower := nodes[0]
	if follower.id == leader {
		follower = nodes[1]
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "dashboards", "nobody", 1
	resp, err := cl.Broker(follower.id).Request(ctx, hb)
	if err != nil {
		t.Fatalf("heartbeat to follower: %v", err)
	}
	if code := resp.(*kmsg.HeartbeatResponse).ErrorCode; code != 16 {
		t.Fatalf("heartbeat on follower: code %d, want NOT_COORDINATOR (16)", code)
	}

	for _, n := range nodes {
		eventually(t, 10*time.Second, func() string {
			s := scrapeNode(t, n.admin)
			want := []expectSeries{
				{"kgate_group_lag", []string{"group", "dashboards", "topic", "clicks", "partition", "0"}, eq(produced - committed), "= produced - committed"},
				{"kgate_group_committed_offset", []string{"group", "dashboards", "topic", "clicks", "partition", "0"}, eq(committed), "= committed"},
				{"kgate_groups", []string{"state", "Stable"}, eq(1), "= 1"},
				{"kgate_group_members", []string{"group", "dashboards"}, eq(1), "= 1"},
				{"kgate_partition_high_watermark", []string{"topic", "clicks", "partition", "0"}, eq(produced), "= produced"},
				{"kgate_partition_size_bytes", []string{"topic", "clicks"}, gt(0), "> 0"},
				{"kgate_partition_segments", []string{"topic", "clicks"}, eq(1), "= 1"},
				{"kgate_raft_voters", nil, eq(3), "= 3"},
				{"kgate_gossip_members", []string{"state", "alive"}, eq(3), "= 3"},
				{"kgate_raft_term", nil, gt(0), "> 0"},
				{"kgate_raft_commit_index", nil, gt(0), "> 0"},
				{"kgate_raft_applied_index", nil, gt(0), "> 0"},
				{"kgate_raft_has_leader", nil, eq(1), "= 1"},
				{"kgate_raft_leader", nil, eq(b2f(n.id == leader)), "= this node leads"},
				{"kgate_raft_state", []string{"state", map[bool]string{true: "leader", false: "follower"}[n.id == leader]}, eq(1), "= 1"},
				{"kgate_build_info", nil, eq(1), "= 1"},
				{"kgate_kafka_connections", nil, gte(0), ">= 0"},
				{"kgate_kafka_parked_fetches", nil, gte(0), ">= 0"},
				{"kgate_group_parked_requests", []string{"api", "JoinGroup"}, eq(0), "= 0"},
				{"go_goroutines", nil, gt(0), "> 0"},
				{"process_resident_memory_bytes", nil, gt(0), "> 0"},
			}
			if n.id == leader {
				want = append(want,
					expectSeries{"kgate_kafka_requests_total", []string{"api", "Produce"}, eq(produced), "= produced (one record a request)"},
					expectSeries{"kgate_kafka_bytes_in_total", []string{"topic", "clicks"}, gt(produced * 60), "> 60 bytes a batch"},
					expectSeries{"kgate_kafka_bytes_out_total", []string{"topic", "clicks"}, gt(0), "> 0"},
					expectSeries{"kgate_raft_apply_duration_seconds", nil, gt(produced), "> produced observations"},
					expectSeries{"kgate_group_rebalances_total", []string{"reason", "member_joined"}, eq(1), "= 1"},
					expectSeries{"kgate_kafka_request_duration_seconds", []string{"api", "JoinGroup"}, gt(0), "> 0"},
				)
			}
			if n.id == follower.id {
				want = append(want, expectSeries{"kgate_kafka_request_errors_total", []string{"api", "Heartbeat", "error", "NOT_COORDINATOR"}, eq(1), "= 1"})
			}
			for _, w := range want {
				v, ok := s.value(w.name, w.labels...)
				if !ok {
					return fmt.Sprintf("node %d: no %s%v", n.id, w.name, w.labels)
				}
				if !w.check(v) {
					return fmt.Sprintf("node %d: %s%v = %v, want %s", n.id, w.name, w.labels, v, w.what)
				}
			}
			return ""
		})
	}
}

// expectSeries is one series a scrape must have, and what its value must be.
type expectSeries struct {
	name   string
	labels []string
	check  func(float64) bool
	what   string
}

func gte(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }
func eq(want float64) func(float64) bool  { return func(v float64) bool { return v == want } }
func gt(want float64) func(float64) bool  { return func(v float64) bool { return v > want } }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
