package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/iggy/iggytest"
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

	// A follower forwards InitProducerId to the leader.
	ipid := kmsg.NewPtrInitProducerIDRequest()
	ipid.TransactionTimeoutMillis = -1
	resp, err = cl.Broker(follower.id).Request(ctx, ipid)
	if err != nil || resp.(*kmsg.InitProducerIDResponse).ErrorCode != 0 {
		t.Fatalf("InitProducerId through a follower: %v %+v", err, resp)
	}

	scrapes := map[int]scrape{}
	for _, n := range nodes {
		eventually(t, 10*time.Second, func() string {
			s := scrapeNode(t, n.admin)
			scrapes[n.id] = s
			want := []expectSeries{
				{"kgate_group_lag", []string{"group", "dashboards", "topic", "clicks", "partition", "0"}, eq(produced - committed), "= produced - committed"},
				{"kgate_group_committed_offset", []string{"group", "dashboards", "topic", "clicks", "partition", "0"}, eq(committed), "= committed"},
				{"kgate_groups", []string{"state", "Stable"}, eq(1), "= 1"},
				{"kgate_group_members", []string{"group", "dashboards"}, eq(1), "= 1"},
				{"kgate_partition_high_watermark", []string{"topic", "clicks", "partition", "0"}, eq(produced), "= produced"},
				{"kgate_partition_size_bytes", []string{"topic", "clicks"}, gt(0), "> 0"},
				{"kgate_partition_segments", []string{"topic", "clicks"}, eq(1), "= 1"},
				{"kgate_raft_voters", nil, eq(3), "= 3"},
				{"kgate_raft_pinned_bytes", nil, eq(0), "= 0 (no snapshot yet: nothing compacted, nothing kept past it)"},
				{"kgate_partition_rewritten_bytes_total", nil, eq(0), "= 0"},
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
				{"go_sched_latencies_seconds", nil, gt(0), "> 0 goroutines scheduled"},
				{"go_sched_pauses_total_gc_seconds", nil, gte(0), ">= 0"},
				{"process_resident_memory_bytes", nil, gt(0), "> 0"},
			}
			if n.id == leader {
				want = append(want,
					expectSeries{"kgate_kafka_requests_total", []string{"api", "Produce"}, gte(produced), ">= produced (one record a request, retries aside)"},
					expectSeries{"kgate_kafka_bytes_in_total", []string{"topic", "clicks"}, gt(produced * 60), "> 60 bytes a batch"},
					expectSeries{"kgate_kafka_bytes_out_total", []string{"topic", "clicks"}, gt(0), "> 0"},
					expectSeries{"kgate_raft_apply_duration_seconds", nil, gt(produced), "> produced observations"},
					expectSeries{"kgate_group_rebalances_total", []string{"reason", "member_joined"}, eq(1), "= 1"},
					expectSeries{"kgate_kafka_request_duration_seconds", []string{"api", "JoinGroup"}, gt(0), "> 0"},
				)
			}
			if n.id == follower.id {
				want = append(want,
					expectSeries{"kgate_kafka_request_errors_total", []string{"api", "Heartbeat", "error", "NOT_COORDINATOR"}, eq(1), "= 1"},
					expectSeries{"kgate_kafka_forwarded_requests_total", []string{"api", "InitProducerID", "result", "ok"}, gte(1), ">= 1 (the producer's own may be forwarded too)"})
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

	// Every metric the Grafana dashboard queries is in these scrapes or
	// in one of a node with --backend iggy.
	// So is every metric of the alert rules in docs/operations.md.
	iggyScrape := scrapeIggyNode(ctx, t)
	exists := func(name string) bool {
		for _, s := range append([]scrape{iggyScrape}, scrapes[1], scrapes[2], scrapes[3]) {
			if s.has(name) {
				return true
			}
		}
		return false
	}
	dashboardMetrics(t, exists)
	alertMetrics(t, exists)
}

// alertMetrics checks the metrics named in the `expr:` lines of the docs'
// alert rules.
func alertMetrics(t *testing.T, exists func(string) bool) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules := 0
	for _, line := range strings.Split(string(raw), "\n") {
		expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr: ")
		if !ok {
			continue
		}
		rules++
		names := metricRef.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("alert %q names no metric", expr)
		}
		for _, name := range names {
			if !exists(name) {
				t.Errorf("alert %q uses %s, which no scrape has", expr, name)
			}
		}
	}
	if rules < 10 {
		t.Fatalf("found %d alert rules in docs/operations.md", rules)
	}
}

// has reports whether the scrape has a family name, or name is the
// _bucket, _sum or _count series of a histogram family.
func (s scrape) has(name string) bool {
	if _, ok := s[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := s[strings.TrimSuffix(name, suffix)]; ok && strings.HasSuffix(name, suffix) &&
			(f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
			return true
		}
	}
	return false
}

// scrapeIggyNode runs one node with --backend iggy against the in-process
// Iggy double, produces and fetches a record, and scrapes it.
func scrapeIggyNode(ctx context.Context, t *testing.T) scrape {
	t.Helper()
	srv, err := iggytest.Start(iggytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	kafka, admin := freeAddr(t), freeAddr(t)
	runServe(t, []string{"--backend", "iggy", "--iggy-addr", srv.Addr(), "--data-dir", t.TempDir(),
		"--kafka-addr", kafka, "--raft-addr", freeAddr(t), "--admin-addr", admin,
		"--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms", "--log-level", "error"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic("iggy-metrics"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("iggy-metrics"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce through the Iggy backend: %v", err)
	}
	for got := 0; got < 1; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("record not read back through the Iggy backend")
		}
		got += len(fs.Records())
	}
	s := scrapeNode(t, "http://"+admin)
	for _, want := range []struct{ name, label, value string }{
		{"kgate_iggy_requests_total", "command", "send_messages"},
		{"kgate_iggy_requests_total", "command", "poll_messages"},
		{"kgate_iggy_dialect", "dialect", "current"},
	} {
		if v, ok := s.value(want.name, want.label, want.value); !ok || v < 1 {
			t.Errorf("iggy node: %s{%s=%q} = %v (present %v), want >= 1", want.name, want.label, want.value, v, ok)
		}
	}
	return s
}

// metricRef finds metric names in PromQL: our families and the Go and
// process collectors'.
var metricRef = regexp.MustCompile(`\b(?:kgate|go|process)_[a-z0-9_]+\b`)

// dashboardMetrics checks that deploy/grafana/kgate-dashboard.json parses
// and that every metric a panel queries is known to exist.
func dashboardMetrics(t *testing.T, exists func(string) bool) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "kgate-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"` // a collapsed row's panels
	}
	var dash struct {
		Title  string  `json:"title"`
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard lacks title, uid or panels")
	}
	queried := 0
	var check func(ps []panel)
	check = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				names := metricRef.FindAllString(tg.Expr, -1)
				if len(names) == 0 {
					t.Errorf("panel %q: query %q names no metric", p.Title, tg.Expr)
				}
				for _, name := range names {
					queried++
					if !exists(name) {
						t.Errorf("panel %q queries %s, which no scrape has", p.Title, name)
					}
				}
			}
			var nested []panel
			for _, r := range p.Panels {
				var np panel
				if err := json.Unmarshal(r, &np); err != nil {
					t.Fatalf("panel %q: %v", p.Title, err)
				}
				nested = append(nested, np)
			}
			check(nested)
		}
	}
	check(dash.Panels)
	if queried < 40 {
		t.Fatalf("only %d metric references found in the dashboard", queried)
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
