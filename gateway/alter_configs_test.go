package gateway_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/records"
)

// describedConfig is one topic config as DescribeConfigs reports it.
type describedConfig struct {
	value  string
	source kmsg.ConfigSource
}

// describeTopic returns every config of a topic through kadm's DescribeConfigs.
func describeTopic(t *testing.T, adm *kadm.Client, topic string) map[string]describedConfig {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	out := map[string]describedConfig{}
	for _, c := range rc.Configs {
		out[c.Key] = describedConfig{c.MaybeValue(), c.Source}
	}
	return out
}

func wantDynamic(t *testing.T, cfgs map[string]describedConfig, key, value string) {
	t.Helper()
	if c := cfgs[key]; c.value != value || c.source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("%s = %q (source %v), want %q as DYNAMIC_TOPIC_CONFIG", key, c.value, c.source, value)
	}
}

func wantDefault(t *testing.T, cfgs map[string]describedConfig, key, value string) {
	t.Helper()
	if c := cfgs[key]; c.value != value || c.source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("%s = %q (source %v), want the default %q", key, c.value, c.source, value)
	}
}

// alterResult is the one response of an alter call for name.
func alterResult(t *testing.T, rs kadm.AlterConfigsResponses, err error, name string) kadm.AlterConfigsResponse {
	t.Helper()
	if err != nil {
		t.Fatalf("alter %s: %v", name, err)
	}
	r, err := rs.On(name, nil)
	if err != nil {
		t.Fatalf("alter %s: no response for it: %v", name, err)
	}
	return r
}

func wantAlterError(t *testing.T, r kadm.AlterConfigsResponse, code *kerr.Error, msgHas string) {
	t.Helper()
	if !errors.Is(r.Err, code) {
		t.Errorf("%s: error %v (%s), want %v", r.Name, r.Err, r.ErrMessage, code)
	}
	if !strings.Contains(r.ErrMessage, msgHas) {
		t.Errorf("%s: message %q does not mention %q", r.Name, r.ErrMessage, msgHas)
	}
}

func setConfig(name, value string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: kmsg.StringPtr(value)}
}

func TestIncrementalAlterConfigs(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "inc", 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000"), "max.message.bytes": kmsg.StringPtr("5000")})
	adm := kadm.NewClient(newClient(t, n.addr))
	ctx := testCtx(t)

	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		setConfig("retention.bytes", "4096"),
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "inc")
	if r := alterResult(t, rs, err, "inc"); r.Err != nil {
		t.Fatalf("SET/DELETE: %v (%s)", r.Err, r.ErrMessage)
	}
	cfgs := describeTopic(t, adm, "inc")
	wantDynamic(t, cfgs, "retention.bytes", "4096")
	wantDefault(t, cfgs, "retention.ms", "604800000")
	wantDynamic(t, cfgs, "max.message.bytes", "5000") // untouched keys stay

	// ValidateOnly checks but changes nothing.
	rs, err = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{setConfig("retention.bytes", "1")}, "inc")
	if r := alterResult(t, rs, err, "inc"); r.Err != nil {
		t.Fatalf("validate only: %v (%s)", r.Err, r.ErrMessage)
	}
	rs, err = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{setConfig("retention.bytes", "7 bytes")}, "inc")
	wantAlterError(t, alterResult(t, rs, err, "inc"), kerr.InvalidConfig, "retention.bytes")
	wantDynamic(t, describeTopic(t, adm, "inc"), "retention.bytes", "4096")

	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{setConfig("retention.ms", "1")}, "no-such-topic")
	wantAlterError(t, alterResult(t, rs, err, "no-such-topic"), kerr.UnknownTopicOrPartition, "no-such-topic")

	// A bad entry fails the whole resource: the good SET before it is not applied.
	for _, tc := range []struct {
		name string
		ops  []kadm.AlterConfig
		code *kerr.Error
		key  string
	}{
		{"unknown key", []kadm.AlterConfig{setConfig("retention.ms", "5"), setConfig("no.such.config", "1")}, kerr.InvalidConfig, "no.such.config"},
		{"not a number", []kadm.AlterConfig{setConfig("retention.ms", "5"), setConfig("segment.bytes", "big")}, kerr.InvalidConfig, "segment.bytes"},
		{"below -1", []kadm.AlterConfig{setConfig("retention.ms", "-2")}, kerr.InvalidConfig, "retention.ms"},
		{"bad enum", []kadm.AlterConfig{setConfig("compression.type", "brotli")}, kerr.InvalidConfig, "compression.type"},
		{"null value", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms"}}, kerr.InvalidConfig, "retention.ms"},
		{"append to a long", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: kmsg.StringPtr("5")}}, kerr.InvalidConfig, "retention.ms"},
		{"subtract from a long", []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "retention.bytes", Value: kmsg.StringPtr("5")}}, kerr.InvalidConfig, "retention.bytes"},
		{"append an unknown policy", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("shrink")}}, kerr.InvalidConfig, "cleanup.policy"},
		{"key twice", []kadm.AlterConfig{setConfig("retention.ms", "5"), setConfig("retention.ms", "6")}, kerr.InvalidRequest, "retention.ms"},
	} {
		rs, err := adm.AlterTopicConfigs(ctx, tc.ops, "inc")
		r := alterResult(t, rs, err, "inc")
		if !errors.Is(r.Err, tc.code) || !strings.Contains(r.ErrMessage, tc.key) {
			t.Errorf("%s: error %v (%q), want %v naming %s", tc.name, r.Err, r.ErrMessage, tc.code, tc.key)
		}
	}
	cfgs = describeTopic(t, adm, "inc")
	wantDefault(t, cfgs, "retention.ms", "604800000")
	wantDefault(t, cfgs, "segment.bytes", "67108864")
	wantDefault(t, cfgs, "cleanup.policy", "delete")

	// As Kafka 4.3 answers: deleting a config it does not know changes
	// nothing and succeeds, and a policy may be subtracted to nothing.
	for _, op := range []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "no.such.config"},
		{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}} {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{op}, "inc")
		if r := alterResult(t, rs, err, "inc"); r.Err != nil {
			t.Errorf("%v of %s: %v (%s), want success", op.Op, op.Name, r.Err, r.ErrMessage)
		}
	}
	wantDynamic(t, describeTopic(t, adm, "inc"), "cleanup.policy", "")
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "cleanup.policy"}}, "inc")
	if r := alterResult(t, rs, err, "inc"); r.Err != nil {
		t.Fatalf("delete cleanup.policy: %v (%s)", r.Err, r.ErrMessage)
	}

	// APPEND to a LIST config starts from the default and adds missing items only.
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}}, "inc")
	if r := alterResult(t, rs, err, "inc"); r.Err != nil {
		t.Fatalf("APPEND cleanup.policy: %v (%s)", r.Err, r.ErrMessage)
	}
	wantDynamic(t, describeTopic(t, adm, "inc"), "cleanup.policy", "delete")

	// Broker configs are static.
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setConfig("num.partitions", "3")}, 1)
	wantAlterError(t, alterResult(t, rs, err, "1"), kerr.InvalidRequest, "num.partitions")
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setConfig("num.partitions", "3")})
	wantAlterError(t, alterResult(t, rs, err, ""), kerr.InvalidRequest, "static")
}

func TestAlterConfigsReplacesAll(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "rep", 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000"), "retention.bytes": kmsg.StringPtr("9999")})
	adm := kadm.NewClient(newClient(t, n.addr))
	ctx := testCtx(t)

	rs, err := adm.ValidateAlterTopicConfigsState(ctx, []kadm.AlterConfig{setConfig("segment.bytes", "1048576")}, "rep")
	if r := alterResult(t, rs, err, "rep"); r.Err != nil {
		t.Fatalf("validate only: %v (%s)", r.Err, r.ErrMessage)
	}
	cfgs := describeTopic(t, adm, "rep")
	wantDynamic(t, cfgs, "retention.ms", "1000")
	wantDefault(t, cfgs, "segment.bytes", "67108864")

	rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{setConfig("segment.bytes", "1048576"), setConfig("retention.ms", "2000")}, "rep")
	if r := alterResult(t, rs, err, "rep"); r.Err != nil {
		t.Fatalf("alter: %v (%s)", r.Err, r.ErrMessage)
	}
	cfgs = describeTopic(t, adm, "rep")
	wantDynamic(t, cfgs, "segment.bytes", "1048576")
	wantDynamic(t, cfgs, "retention.ms", "2000")
	wantDefault(t, cfgs, "retention.bytes", "-1") // not in the new set: back to the default

	rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{setConfig("retention.ms", "-5")}, "rep")
	wantAlterError(t, alterResult(t, rs, err, "rep"), kerr.InvalidConfig, "retention.ms")
	rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{setConfig("bogus", "1")}, "rep")
	wantAlterError(t, alterResult(t, rs, err, "rep"), kerr.InvalidConfig, "bogus")
	rs, err = adm.AlterTopicConfigsState(ctx, nil, "missing")
	wantAlterError(t, alterResult(t, rs, err, "missing"), kerr.UnknownTopicOrPartition, "missing")
	wantDynamic(t, describeTopic(t, adm, "rep"), "retention.ms", "2000")

	rs, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{setConfig("message.max.bytes", "10")}, 1)
	wantAlterError(t, alterResult(t, rs, err, "1"), kerr.InvalidRequest, "message.max.bytes")

	// An empty set removes every dynamic config.
	rs, err = adm.AlterTopicConfigsState(ctx, nil, "rep")
	if r := alterResult(t, rs, err, "rep"); r.Err != nil {
		t.Fatalf("empty set: %v (%s)", r.Err, r.ErrMessage)
	}
	for k, c := range describeTopic(t, adm, "rep") {
		if c.source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s still %v after replacing with nothing", k, c.source)
		}
	}
}

// Every version, flexible or not, through a raw connection; repeated
// resources and other resource types.
func TestAlterConfigsVersionsAndResources(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "v", 1, nil)
	c := dialRaw(t, n.addr)
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.SetVersion(v)
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "v"
		cf := kmsg.NewAlterConfigsRequestResourceConfig()
		cf.Name, cf.Value = "retention.ms", kmsg.StringPtr(strings.Repeat("1", int(v)+1))
		res.Configs = append(res.Configs, cf)
		req.Resources = append(req.Resources, res)
		other := kmsg.NewAlterConfigsRequestResource()
		other.ResourceType, other.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
		req.Resources = append(req.Resources, other)
		resp := c.do(req).(*kmsg.AlterConfigsResponse)
		if len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != 0 || resp.Resources[0].ResourceName != "v" {
			t.Fatalf("AlterConfigs v%d: %+v", v, resp.Resources)
		}
		if r := resp.Resources[1]; r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
			t.Errorf("AlterConfigs v%d broker logger: %+v", v, r)
		}
	}
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.SetVersion(v)
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "v"
		cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cf.Name, cf.Op, cf.Value = "retention.bytes", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("12345")
		res.Configs = append(res.Configs, cf)
		req.Resources = append(req.Resources, res, res) // named twice
		resp := c.do(req).(*kmsg.IncrementalAlterConfigsResponse)
		if len(resp.Resources) != 2 {
			t.Fatalf("IncrementalAlterConfigs v%d: %+v", v, resp.Resources)
		}
		for _, r := range resp.Resources {
			if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
				t.Errorf("IncrementalAlterConfigs v%d, resource named twice: %+v", v, r)
			}
		}
		req.Resources = req.Resources[:1]
		req.Resources[0].Configs[0].Op = 7
		resp = c.do(req).(*kmsg.IncrementalAlterConfigsResponse)
		if r := resp.Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "operation") {
			t.Errorf("IncrementalAlterConfigs v%d, unknown operation: %+v", v, r)
		}
		req.Resources[0].Configs[0].Op = kmsg.IncrementalAlterConfigOpSet
		resp = c.do(req).(*kmsg.IncrementalAlterConfigsResponse)
		if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("IncrementalAlterConfigs v%d: %+v", v, resp.Resources)
		}
	}
	cfgs := describeTopic(t, kadm.NewClient(newClient(t, n.addr)), "v")
	wantDynamic(t, cfgs, "retention.ms", "111")
	wantDynamic(t, cfgs, "retention.bytes", "12345")
}

func TestAlterConfigsElementCap(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) { c.MaxElements = 3 })
	createTopic(t, n.addr, "cap", 1, nil)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "cap"
	for _, k := range []string{"retention.ms", "retention.bytes"} {
		cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cf.Name, cf.Value = k, kmsg.StringPtr("100")
		res.Configs = append(res.Configs, cf)
	}
	req.Resources = append(req.Resources, res)
	if resp := c.do(req).(*kmsg.IncrementalAlterConfigsResponse); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("within the cap: %+v", resp.Resources)
	}
	cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cf.Name, cf.Value = "segment.bytes", kmsg.StringPtr("100000")
	req.Resources[0].Configs = append(req.Resources[0].Configs, cf)
	c.send(req)
	expectClosed(t, c.nc)

	c = dialRaw(t, n.addr)
	legacy := kmsg.NewPtrAlterConfigsRequest()
	for i := 0; i < 4; i++ {
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "cap"
		legacy.Resources = append(legacy.Resources, r)
	}
	c.send(legacy)
	expectClosed(t, c.nc)
	expectServing(t, n.addr)
}

// A lowered retention.ms applies right after the change, not at the next
// retention tick (here an hour away).
func TestRetentionHonoursLoweredRetentionMs(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "ret-ms", 1, map[string]*string{"internal.segment.bytes": kmsg.StringPtr("1024")})
	c := dialRaw(t, n.addr)
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for i := 0; i < 12; i++ {
		b := records.Builder{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: old}
		recs := []records.Record{{Value: []byte(strings.Repeat("x", 400))}}
		if sp := produceRaw(t, c, "ret-ms", build(t, b, recs)); sp.ErrorCode != 0 {
			t.Fatalf("produce %d: error %d", i, sp.ErrorCode)
		}
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.backend.RunRetention(ctx, time.Hour)
	}()
	t.Cleanup(func() { stop(); wg.Wait() })

	// Two-hour-old records are within the default seven days.
	if p := listOffset(t, c, "ret-ms", -2); p.ErrorCode != 0 || p.Offset != 0 {
		t.Fatalf("log start %d (error %d) before the change", p.Offset, p.ErrorCode)
	}
	adm := kadm.NewClient(newClient(t, n.addr))
	rs, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{setConfig("retention.ms", "3600000")}, "ret-ms")
	if r := alterResult(t, rs, err, "ret-ms"); r.Err != nil {
		t.Fatalf("alter: %v (%s)", r.Err, r.ErrMessage)
	}

	deadline := testCtx(t)
	var start int64
	for {
		p := listOffset(t, c, "ret-ms", -2)
		if p.ErrorCode != 0 {
			t.Fatalf("list offsets earliest: error %d", p.ErrorCode)
		}
		if start = p.Offset; start > 0 {
			break
		}
		select {
		case <-deadline.Done():
			t.Fatal("a lowered retention.ms never moved the log start offset")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Retention keeps the active segment: everything before it is gone.
	segs := n.fsm.Partition("ret-ms", 0).Log.Segments()
	if want := segs[0].Base; len(segs) != 1 || start != want {
		t.Errorf("log start %d with %d segments left (first at %d): want only the active segment", start, len(segs), want)
	}
	if sp := fetchRaw(t, c, "ret-ms", 0); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at 0 after retention: error %d, want OFFSET_OUT_OF_RANGE", sp.ErrorCode)
	}
	if lo := listOffset(t, c, "ret-ms", -2); lo.ErrorCode != 0 || lo.Offset != start {
		t.Errorf("earliest offset after retention: error %d, offset %d (want %d)", lo.ErrorCode, lo.Offset, start)
	}
	if hw := highWatermark(t, c, "ret-ms"); hw != 12 {
		t.Errorf("high watermark %d, want 12", hw)
	}
}
