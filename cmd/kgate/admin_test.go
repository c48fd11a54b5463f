package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testNodeAddrs are one in-process node's listeners.
type testNodeAddrs struct {
	id    int
	kafka string
	admin string // http://host:port
	stop  func()
}

// startCluster runs n nodes the way `kgate serve` wires them, in this
// process, bootstrapping one cluster together.
func startCluster(t *testing.T, n int) []*testNodeAddrs {
	t.Helper()
	gossip := make([]string, n)
	for i := range gossip {
		gossip[i] = freeAddr(t)
	}
	nodes := make([]*testNodeAddrs, n)
	for i := range nodes {
		nd := &testNodeAddrs{id: i + 1, kafka: freeAddr(t)}
		adminAddr := freeAddr(t)
		nd.admin = "http://" + adminAddr
		nd.stop, _ = startServe(t, []string{
			"--node-id", strconv.Itoa(i + 1), "--data-dir", t.TempDir(),
			"--kafka-addr", nd.kafka, "--raft-addr", freeAddr(t), "--gossip-addr", gossip[i],
			"--admin-addr", adminAddr, "--bootstrap-expect", strconv.Itoa(n), "--join", strings.Join(gossip, ","),
			// Raft's timeouts stay at the defaults users run: shorter ones
			// (a 100 ms lease) made leaders step down on a loaded machine
			// in the middle of a test that assumes one leader throughout.
			"--group-initial-rebalance-delay", "0s", "--log-level", "error",
		})
		nodes[i] = nd
	}
	for _, nd := range nodes {
		awaitKafka(t, nd.kafka)
	}
	return nodes
}

func bootstrap(nodes []*testNodeAddrs) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.kafka)
	}
	return out
}

// getJSON fetches url into v and returns the status code.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", url, ct)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
	return resp.StatusCode
}

// eventually polls cond every 50 ms until it returns "" or the time is up,
// then fails with the last reason.
func eventually(t *testing.T, limit time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitLeader(t *testing.T, nodes []*testNodeAddrs) int {
	t.Helper()
	var leader int
	eventually(t, 30*time.Second, func() string {
		var v struct {
			LeaderID *int `json:"leader_id"`
		}
		getJSON(t, nodes[0].admin+"/v1/cluster", &v)
		if v.LeaderID == nil {
			return "no leader in /v1/cluster"
		}
		leader = *v.LeaderID
		return ""
	})
	return leader
}

type topicsJSON struct {
	Topics []struct {
		Name       string `json:"name"`
		ID         string `json:"id"`
		SizeBytes  *int64 `json:"size_bytes"`
		Partitions []struct {
			Partition      int32  `json:"partition"`
			Leader         int32  `json:"leader"`
			LogStartOffset int64  `json:"log_start_offset"`
			HighWatermark  int64  `json:"high_watermark"`
			SizeBytes      *int64 `json:"size_bytes"`
			Segments       *int   `json:"segments"`
		} `json:"partitions"`
	} `json:"topics"`
}

type groupJSON struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	Generation   int32  `json:"generation"`
	Leader       string `json:"leader"`
	Members      []struct {
		MemberID   string `json:"member_id"`
		ClientID   string `json:"client_id"`
		ClientHost string `json:"client_host"`
		Assignment []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assignment"`
	} `json:"members"`
	Offsets []struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		Committed     *int64 `json:"committed"`
		HighWatermark int64  `json:"high_watermark"`
		Lag           *int64 `json:"lag"`
		Member        string `json:"member"`
	} `json:"offsets"`
	TotalLag int64 `json:"total_lag"`
}

// produceTo writes n records to one partition.
func produceTo(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("record-%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, partition, err)
		}
	}
}

// TestAdminAPI reads /v1/version, /v1/topics and /v1/groups/{id} on every
// node of a three-node cluster with a topic and a consumer group in use.
func TestAdminAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nodes := startCluster(t, 3)
	waitLeader(t, nodes)

	var ver struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	}
	if code := getJSON(t, nodes[1].admin+"/v1/version", &ver); code != 200 || ver.Version == "" || ver.GoVersion != runtime.Version() {
		t.Fatalf("/v1/version: %d %+v", code, ver)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(nodes)...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, 2, -1, nil, "orders"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	produceTo(ctx, t, prod, "orders", 0, 10)
	produceTo(ctx, t, prod, "orders", 1, 5)

	for _, n := range nodes {
		eventually(t, 10*time.Second, func() string {
			var v topicsJSON
			getJSON(t, n.admin+"/v1/topics", &v)
			if len(v.Topics) != 1 || v.Topics[0].Name != "orders" || len(v.Topics[0].Partitions) != 2 {
				return fmt.Sprintf("node %d topics: %+v", n.id, v)
			}
			tp := v.Topics[0]
			if len(tp.ID) != 36 || tp.SizeBytes == nil || *tp.SizeBytes <= 0 {
				return fmt.Sprintf("node %d topic id/size: %+v", n.id, tp)
			}
			for i, want := range []int64{10, 5} {
				p := tp.Partitions[i]
				if p.Partition != int32(i) || p.HighWatermark != want || p.LogStartOffset != 0 || p.Leader < 1 ||
					p.SizeBytes == nil || *p.SizeBytes <= 0 || p.Segments == nil || *p.Segments < 1 {
					return fmt.Sprintf("node %d partition %d: %+v", n.id, i, p)
				}
			}
			return ""
		})
	}

	// A member that reads everything and commits 4 of partition 0's ten
	// records and all five of partition 1: lag 6 and 0.
	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(nodes)...), kgo.ClientID("admin-test"),
		kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < 15; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 15", got)
		}
		got += len(fs.Records())
	}
	commit := map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 4}, 1: {Epoch: -1, Offset: 5}}}
	var commitErr error
	cons.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}

	for _, n := range nodes {
		eventually(t, 10*time.Second, func() string {
			var g groupJSON
			if code := getJSON(t, n.admin+"/v1/groups/billing", &g); code != 200 {
				return fmt.Sprintf("node %d: status %d", n.id, code)
			}
			if g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol == "" || g.Generation < 1 || len(g.Members) != 1 {
				return fmt.Sprintf("node %d group: %+v", n.id, g)
			}
			m := g.Members[0]
			if m.ClientID != "admin-test" || m.ClientHost == "" || g.Leader != m.MemberID ||
				len(m.Assignment) != 1 || m.Assignment[0].Topic != "orders" || fmt.Sprint(m.Assignment[0].Partitions) != "[0 1]" {
				return fmt.Sprintf("node %d member: %+v", n.id, m)
			}
			if len(g.Offsets) != 2 || g.TotalLag != 6 {
				return fmt.Sprintf("node %d offsets: %+v total lag %d", n.id, g.Offsets, g.TotalLag)
			}
			for i, want := range []struct{ committed, hw, lag int64 }{{4, 10, 6}, {5, 5, 0}} {
				o := g.Offsets[i]
				if o.Partition != int32(i) || o.Committed == nil || *o.Committed != want.committed ||
					o.HighWatermark != want.hw || o.Lag == nil || *o.Lag != want.lag || o.Member != m.MemberID {
					return fmt.Sprintf("node %d offset %d: %+v", n.id, i, o)
				}
			}
			return ""
		})
	}

	var notFound map[string]string
	if code := getJSON(t, nodes[2].admin+"/v1/groups/no-such-group", &notFound); code != 404 || notFound["error"] == "" {
		t.Fatalf("unknown group: %d %v", code, notFound)
	}
	// The list keeps its shape.
	var list struct {
		Groups []struct {
			Group   string `json:"group"`
			State   string `json:"state"`
			Members int    `json:"members"`
		} `json:"groups"`
	}
	getJSON(t, nodes[0].admin+"/v1/groups", &list)
	if len(list.Groups) != 1 || list.Groups[0].Group != "billing" || list.Groups[0].Members != 1 {
		t.Fatalf("/v1/groups: %+v", list)
	}
}
