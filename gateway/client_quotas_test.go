package gateway_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway"
)

func alterQuotaReq(validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasRequest {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.SetVersion(1)
	req.ValidateOnly = validateOnly
	req.Entries = entries
	return req
}

func quotaEntry(clientID *string, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
	return kmsg.AlterClientQuotasRequestEntry{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: clientID}},
		Ops:    ops,
	}
}

func describeQuotas(t *testing.T, c *rawConn, strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.SetVersion(1)
	req.Components, req.Strict = comps, strict
	return c.do(req).(*kmsg.DescribeClientQuotasResponse)
}

func TestClientQuotasAlterAndDescribe(t *testing.T) {
	n := startNode(t, nil)
	c := dialRaw(t, n.addr)
	set := kmsg.AlterClientQuotasRequestEntryOp{Key: "producer_byte_rate", Value: 1024}
	resp := c.do(alterQuotaReq(false,
		quotaEntry(kmsg.StringPtr("app"), set, kmsg.AlterClientQuotasRequestEntryOp{Key: "consumer_byte_rate", Value: 2048}),
		quotaEntry(nil, kmsg.AlterClientQuotasRequestEntryOp{Key: "request_percentage", Value: 50}),
		quotaEntry(kmsg.StringPtr("bad"), kmsg.AlterClientQuotasRequestEntryOp{Key: "no_such_quota", Value: 1}),
		quotaEntry(kmsg.StringPtr("bad"), kmsg.AlterClientQuotasRequestEntryOp{Key: "producer_byte_rate", Value: -1}),
		kmsg.AlterClientQuotasRequestEntry{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "ip", Name: kmsg.StringPtr("1.2.3.4")}},
			Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "connection_creation_rate", Value: 1}}},
	)).(*kmsg.AlterClientQuotasResponse)
	want := []int16{0, 0, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	for i, e := range resp.Entries {
		if e.ErrorCode != want[i] || (want[i] != 0) != (e.ErrorMessage != nil) {
			t.Errorf("entry %d: error %d message %v, want %d", i, e.ErrorCode, e.ErrorMessage, want[i])
		}
	}
	// Validate-only changes nothing.
	c.do(alterQuotaReq(true, quotaEntry(kmsg.StringPtr("dry"), set)))

	all := describeQuotas(t, c, false)
	if all.ErrorCode != 0 || len(all.Entries) != 2 {
		t.Fatalf("describe all: error %d entries %+v", all.ErrorCode, all.Entries)
	}
	app := describeQuotas(t, c, true, kmsg.DescribeClientQuotasRequestComponent{EntityType: "client-id", MatchType: 0, Match: kmsg.StringPtr("app")})
	if len(app.Entries) != 1 || len(app.Entries[0].Values) != 2 || app.Entries[0].Values[0].Key != "consumer_byte_rate" ||
		app.Entries[0].Values[0].Value != 2048 || app.Entries[0].Values[1].Value != 1024 || *app.Entries[0].Entity[0].Name != "app" {
		t.Fatalf("describe client app: %+v", app.Entries)
	}
	def := describeQuotas(t, c, true, kmsg.DescribeClientQuotasRequestComponent{EntityType: "client-id", MatchType: 1})
	if len(def.Entries) != 1 || def.Entries[0].Entity[0].Name != nil || def.Entries[0].Values[0].Key != "request_percentage" {
		t.Fatalf("describe default client: %+v", def.Entries)
	}
	if u := describeQuotas(t, c, false, kmsg.DescribeClientQuotasRequestComponent{EntityType: "user", MatchType: 2}); len(u.Entries) != 0 {
		t.Fatalf("describe any user: %+v", u.Entries)
	}
	if ip := describeQuotas(t, c, false, kmsg.DescribeClientQuotasRequestComponent{EntityType: "ip", MatchType: 2}); ip.ErrorCode != 0 || len(ip.Entries) != 0 {
		t.Fatalf("describe ip: error %d entries %+v, want none", ip.ErrorCode, ip.Entries)
	}
	if bad := describeQuotas(t, c, false, kmsg.DescribeClientQuotasRequestComponent{EntityType: "group", MatchType: 2}); bad.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("describe an unknown entity type: error %d", bad.ErrorCode)
	}

	// Removing every value removes the entity.
	c.do(alterQuotaReq(false, quotaEntry(kmsg.StringPtr("app"),
		kmsg.AlterClientQuotasRequestEntryOp{Key: "producer_byte_rate", Remove: true},
		kmsg.AlterClientQuotasRequestEntryOp{Key: "consumer_byte_rate", Remove: true})))
	if all := describeQuotas(t, c, false); len(all.Entries) != 1 {
		t.Fatalf("after removal: %+v", all.Entries)
	}
}

// throttleHook counts the throttles a client is told of and notes when
// each produced batch was acknowledged, with its bytes on the wire.
type throttleHook struct {
	n   atomic.Int64
	max atomic.Int64

	mu    sync.Mutex
	acked []ackedBatch
}

type ackedBatch struct {
	at    time.Time
	bytes int
}

func (h *throttleHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acked = append(h.acked, ackedBatch{time.Now(), m.CompressedBytes})
}

// rate is the byte rate of the batches acknowledged in [from, to): the
// bytes after the first such batch over the time from it to the last.
func (h *throttleHook) rate(from, to time.Time) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var first, last time.Time
	total := 0
	for _, b := range h.acked {
		if b.at.Before(from) || !b.at.Before(to) {
			continue
		}
		if first.IsZero() {
			first = b.at
			continue
		}
		last = b.at
		total += b.bytes
	}
	if !last.After(first) {
		return 0, false
	}
	return float64(total) / last.Sub(first).Seconds(), true
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.n.Add(1)
	for {
		cur := h.max.Load()
		if int64(d) <= cur || h.max.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// TestProduceQuotaThrottlesToRate: a producer going as fast as it can under
// a producer_byte_rate quota is held to at most 10 % above it, not far below (measured after
// the first sampled window, which Kafka lets a client burst through) and is
// told throttle_time_ms; a client id without a quota is not throttled. The
// samples are 25 ms (Kafka: 1 s) so that the test sees many windows.
func TestProduceQuotaThrottlesToRate(t *testing.T) {
	const window = 25 * time.Millisecond // quota samples of 25 ms: 275 ms of rate history
	n := startNode(t, func(c *gateway.Config) { c.QuotaWindow = window })
	createTopic(t, n.addr, "quota", 1, nil)
	c := dialRaw(t, n.addr)
	const quota = 1 << 20 // bytes/s
	if e := c.do(alterQuotaReq(false, quotaEntry(kmsg.StringPtr("slow"),
		kmsg.AlterClientQuotasRequestEntryOp{Key: "producer_byte_rate", Value: quota}))).(*kmsg.AlterClientQuotasResponse).Entries[0]; e.ErrorCode != 0 {
		t.Fatalf("set quota: error %d", e.ErrorCode)
	}

	// measure produces as fast as the client can for warmup+span and
	// returns the byte rate acknowledged during span.
	measure := func(clientID string, hook *throttleHook, warmup, span time.Duration) float64 {
		cl := newClient(t, n.addr, kgo.ClientID(clientID), kgo.DefaultProduceTopic("quota"), kgo.WithHooks(hook),
			kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MaxBufferedRecords(16))
		ctx, cancel := context.WithTimeout(context.Background(), warmup+span+ioTimeout)
		defer cancel()
		value := make([]byte, 4<<10)
		var errs atomic.Value
		start := time.Now()
		for time.Since(start) < warmup+span {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					errs.CompareAndSwap(nil, err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("%s: flush: %v", clientID, err)
		}
		if err := errs.Load(); err != nil {
			t.Fatalf("%s: produce: %v", clientID, err)
		}
		rate, ok := hook.rate(start.Add(warmup), start.Add(warmup+span))
		if !ok {
			t.Fatalf("%s: fewer than two batches acknowledged in %v", clientID, span)
		}
		return rate
	}

	var slowHook throttleHook
	rate := measure("slow", &slowHook, time.Second, 6*time.Second)
	t.Logf("quota %d B/s: measured %.0f B/s (%.1f %%), %d throttles, longest %v",
		quota, rate, 100*rate/quota, slowHook.n.Load(), time.Duration(slowHook.max.Load()))
	// The quota is a ceiling: above it by more than 10 % fails. Below it is
	// the client's own pace too (on a loaded machine it goes slower than
	// the quota allows), so only a client held to half the quota or less,
	// throttled far past its rate, fails.
	if rate > 1.1*quota {
		t.Errorf("throughput %.0f B/s under a quota of %d B/s: more than 10 %% above it", rate, quota)
	}
	if rate < 0.5*quota {
		t.Errorf("throughput %.0f B/s under a quota of %d B/s: held to half of it or less", rate, quota)
	}
	if slowHook.n.Load() == 0 {
		t.Error("the throttled client was never told throttle_time_ms")
	}

	var freeHook throttleHook
	free := measure("free", &freeHook, 0, 500*time.Millisecond)
	t.Logf("client id without a quota: %.0f B/s, %d throttles", free, freeHook.n.Load())
	if freeHook.n.Load() != 0 {
		t.Errorf("a client id without a quota was throttled %d times", freeHook.n.Load())
	}
}

func (h *throttleHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acked = append(h.acked, ackedBatch{time.Now(), m.CompressedBytes})
}

// TestFetchQuotaThrottlesToRate: a consumer reading a backlog as fast as it
// can under a consumer_byte_rate quota is held to at most 10 % above it,
// not far below it, and told throttle_time_ms.
func TestFetchQuotaThrottlesToRate(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) { c.QuotaWindow = 25 * time.Millisecond })
	createTopic(t, n.addr, "fquota", 1, nil)
	c := dialRaw(t, n.addr)
	const quota = 1 << 20 // bytes/s
	if e := c.do(alterQuotaReq(false, quotaEntry(kmsg.StringPtr("slow-reader"),
		kmsg.AlterClientQuotasRequestEntryOp{Key: "consumer_byte_rate", Value: quota}))).(*kmsg.AlterClientQuotasResponse).Entries[0]; e.ErrorCode != 0 {
		t.Fatalf("set quota: error %d", e.ErrorCode)
	}
	// A backlog of 10 MiB in 4 KiB records, uncompressed, in batches of at
	// most 16 KiB (a fetch returns at least one whole batch).
	prod := newClient(t, n.addr, kgo.DefaultProduceTopic("fquota"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(16<<10))
	value := make([]byte, 4<<10)
	for i := 0; i < 10<<8; i++ {
		prod.Produce(testCtx(t), &kgo.Record{Value: value}, nil)
	}
	if err := prod.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	var hook throttleHook
	cons := newClient(t, n.addr, kgo.ClientID("slow-reader"), kgo.ConsumeTopics("fquota"), kgo.WithHooks(&hook),
		kgo.FetchMaxBytes(16<<10), kgo.FetchMaxPartitionBytes(16<<10))
	const warmup, span = time.Second, 6 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), warmup+span)
	defer cancel()
	start := time.Now()
	for ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if ctx.Err() == nil {
				t.Fatalf("fetch: %v", e.Err)
			}
		}
	}
	rate, ok := hook.rate(start.Add(warmup), start.Add(warmup+span))
	if !ok {
		t.Fatal("fewer than two batches read")
	}
	t.Logf("quota %d B/s: measured %.0f B/s (%.1f %%), %d throttles, longest %v",
		quota, rate, 100*rate/quota, hook.n.Load(), time.Duration(hook.max.Load()))
	// The quota is a ceiling: above it by more than 10 % fails. Below it is
	// the client's own pace too (on a loaded machine it goes slower than
	// the quota allows), so only a client held to half the quota or less,
	// throttled far past its rate, fails.
	if rate > 1.1*quota {
		t.Errorf("throughput %.0f B/s under a quota of %d B/s: more than 10 %% above it", rate, quota)
	}
	if rate < 0.5*quota {
		t.Errorf("throughput %.0f B/s under a quota of %d B/s: held to half of it or less", rate, quota)
	}
	if hook.n.Load() == 0 {
		t.Error("the throttled consumer was never told throttle_time_ms")
	}
}
