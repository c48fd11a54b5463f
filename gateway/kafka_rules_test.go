package gateway_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/records"
)

// Kafka's answers to requests that are malformed or ask for what cannot
// be, API by API, found by sending the same requests to a Kafka 4.3
// broker. Each test runs against an in-process kgate node and, when
// KGATE_COMPARE_KAFKA names a broker, against it too (groupTargets).

// incAlterReq sets one config of a topic (IncrementalAlterConfigs v1).
func incAlterReq(validateOnly bool, topic, name, value string) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version, req.ValidateOnly = 1, validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = name, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	return req
}

// uniqueTopic is a topic name of the test's own, fresh on a shared broker.
func uniqueTopic(t *testing.T) string {
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	return fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
}

// createTopics creates topics and waits until each one's partition 0
// answers at its leader (a broker answers NOT_LEADER_OR_FOLLOWER for a
// moment after CreateTopics).
func createTopics(t *testing.T, c *rawConn, topics ...kmsg.CreateTopicsRequestTopic) {
	t.Helper()
	resp := c.do(createTopicsReq(false, topics...)).(*kmsg.CreateTopicsResponse)
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create %s: code %d", rt.Topic, rt.ErrorCode)
		}
	}
	for _, tp := range topics {
		awaitLeader(t, c, tp.Topic)
	}
}

// awaitLeader waits until the topic's partition 0 answers at its leader.
func awaitLeader(t *testing.T, c *rawConn, topic string) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for {
		resp := c.do(listOffsetsReq(8, topic, -1)).(*kmsg.ListOffsetsResponse)
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: partition 0 answers code %d", topic, code)
		}
		time.Sleep(50 * time.Millisecond) // a poll bounded by the deadline
	}
}

func TestCreateTopicsNameGivenTwiceIsAnsweredOnce(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		twice, other := uniqueTopic(t), uniqueTopic(t)+"-other"
		resp := c.do(createTopicsReq(true, newTopic(twice, 1), newTopic(twice, 2), newTopic(other, 1))).(*kmsg.CreateTopicsResponse)
		got := map[string][]int16{}
		for _, rt := range resp.Topics {
			got[rt.Topic] = append(got[rt.Topic], rt.ErrorCode)
		}
		if !slices.Equal(got[twice], []int16{kerr.InvalidRequest.Code}) || !slices.Equal(got[other], []int16{0}) || len(got) != 2 {
			t.Errorf("codes by topic %v; want one INVALID_REQUEST (42) for the name given twice and 0 for the other", got)
		}
	})
}

func listOffsetsReq(version int16, topic string, timestamps ...int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, ts := range timestamps {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestListOffsetsSpecialTimestampsByVersion: a negative timestamp Kafka
// does not know, or one sent in a version older than it, is
// UNSUPPORTED_VERSION (-5 and below name tiered storage, from v9 on); a
// partition named more than once is answered once, INVALID_REQUEST.
func TestListOffsetsSpecialTimestampsByVersion(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		unsupported := kerr.UnsupportedVersion.Code
		for _, tc := range []struct {
			version int16
			ts      int64
			code    int16
		}{
			{1, -1, 0}, {1, -2, 0}, {6, -3, unsupported}, {7, -3, 0}, {7, -4, unsupported}, {8, -4, 0},
			{8, -5, unsupported}, {8, -6, unsupported}, {8, -7, unsupported}, {8, -1000, unsupported}, {8, 0, 0},
		} {
			resp := c.do(listOffsetsReq(tc.version, "a", tc.ts)).(*kmsg.ListOffsetsResponse)
			if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.code {
				t.Errorf("v%d timestamp %d: code %d, want %d", tc.version, tc.ts, got, tc.code)
			}
		}
		resp := c.do(listOffsetsReq(8, "a", -1, -2, -3)).(*kmsg.ListOffsetsResponse)
		if ps := resp.Topics[0].Partitions; len(ps) != 1 || ps[0].ErrorCode != kerr.InvalidRequest.Code ||
			ps[0].Offset != -1 || ps[0].Timestamp != -1 || ps[0].LeaderEpoch != -1 {
			t.Errorf("partition 0 named three times: answers %+v, want one INVALID_REQUEST (42) with offset, timestamp and epoch -1", ps)
		}
		// An answer without an offset carries no epoch either.
		for _, tc := range []struct {
			version int16
			ts      int64
		}{{7, -4}, {8, -5}} {
			p := c.do(listOffsetsReq(tc.version, "a", tc.ts)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
			if p.Offset != -1 || p.LeaderEpoch != -1 {
				t.Errorf("v%d timestamp %d (unsupported): offset %d epoch %d, want -1 and -1", tc.version, tc.ts, p.Offset, p.LeaderEpoch)
			}
		}
	})
}

// TestOffsetForLeaderEpochUndefinedEpoch: asked for epoch -1 (none), Kafka
// answers an undefined epoch and end offset; asked for the current epoch,
// the log end.
func TestOffsetForLeaderEpochUndefinedEpoch(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		md := c.do(metadataReq(12, false, "a")).(*kmsg.MetadataResponse)
		current := md.Topics[0].Partitions[0].LeaderEpoch
		ask := func(epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version = 4
			req.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = "a"
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, epoch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return c.do(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		}
		if p := ask(-1); p.ErrorCode != 0 || p.LeaderEpoch != -1 || p.EndOffset != -1 {
			t.Errorf("epoch -1: code %d, epoch %d, end offset %d; want 0, -1, -1", p.ErrorCode, p.LeaderEpoch, p.EndOffset)
		}
		if p := ask(current); p.ErrorCode != 0 || p.LeaderEpoch != current || p.EndOffset != 0 {
			t.Errorf("the current epoch %d: code %d, epoch %d, end offset %d; want 0, %d, 0 (the empty log's end)", current, p.ErrorCode, p.LeaderEpoch, p.EndOffset, current)
		}
	})
}

// TestConfigsOfAnInvalidTopicName: the config APIs answer a name no topic
// can have INVALID_TOPIC_EXCEPTION, not UNKNOWN_TOPIC_OR_PARTITION
// (DescribeConfigs the empty name too; the alter APIs call that a default
// resource, INVALID_REQUEST).
func TestConfigsOfAnInvalidTopicName(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		for _, name := range []string{"bad name!", ""} {
			dc := kmsg.NewPtrDescribeConfigsRequest()
			dc.Version = 4
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, name
			dc.Resources = append(dc.Resources, dr)
			if got := c.do(dc).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode; got != kerr.InvalidTopicException.Code {
				t.Errorf("DescribeConfigs of %q: code %d, want INVALID_TOPIC_EXCEPTION (17)", name, got)
			}
		}
		if got := c.do(incAlterReq(true, "bad name!", "retention.ms", "5")).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; got != kerr.InvalidTopicException.Code {
			t.Errorf("IncrementalAlterConfigs of %q: code %d, want INVALID_TOPIC_EXCEPTION (17)", "bad name!", got)
		}
		ac := kmsg.NewPtrAlterConfigsRequest()
		ac.Version, ac.ValidateOnly = 2, true
		ar := kmsg.NewAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "bad name!"
		acfg := kmsg.NewAlterConfigsRequestResourceConfig()
		acfg.Name, acfg.Value = "retention.ms", kmsg.StringPtr("5")
		ar.Configs = append(ar.Configs, acfg)
		ac.Resources = append(ac.Resources, ar)
		if got := c.do(ac).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode; got != kerr.InvalidTopicException.Code {
			t.Errorf("AlterConfigs of %q: code %d, want INVALID_TOPIC_EXCEPTION (17)", ar.ResourceName, got)
		}
	})
}

// TestProduceKeepsOnlyWholeBatches: a partition's records are read as
// Kafka reads them, batch by batch by their length fields. Without one
// whole batch the answer is INVALID_RECORD (not CORRUPT_MESSAGE); a cut
// batch after a whole one is dropped, and the whole one is written alone.
func TestProduceKeepsOnlyWholeBatches(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		topic := uniqueTopic(t)
		createTopics(t, c, newTopic(topic, 1))
		whole := build(t, plainBuilder(), valueRecords("w", 1))
		for what, data := range map[string][]byte{"3 bytes": whole[:3], "a cut batch": whole[:30], "a batch one byte short": whole[:len(whole)-1]} {
			if p := produceRaw(t, c, topic, data); p.ErrorCode != kerr.InvalidRecord.Code {
				t.Errorf("%s: code %d, want INVALID_RECORD (87)", what, p.ErrorCode)
			}
		}
		if p := produceRaw(t, c, topic, append(slices.Clone(whole), whole[:20]...)); p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Fatalf("a whole batch and a cut one: code %d, base offset %d; want the whole one written at 0", p.ErrorCode, p.BaseOffset)
		}
		got := fetchRaw(t, c, topic, 0)
		if recs := decodeBatches(t, got.RecordBatches); got.ErrorCode != 0 || got.HighWatermark != 1 || len(recs) != 1 || string(recs[0].Value) != "w0" {
			t.Errorf("read back: code %d, high watermark %d, %d records; want the one record w0", got.ErrorCode, got.HighWatermark, len(recs))
		}
	})
}

// TestProduceTimestampBounds: a record more than
// message.timestamp.after.max.ms ahead of the broker's clock (Kafka 4's
// default: an hour) or more than message.timestamp.before.max.ms behind it
// (default: any age) fails its batch with INVALID_TIMESTAMP, the record
// named by its index; nothing of the batch is written.
func TestProduceTimestampBounds(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		topic, strict := uniqueTopic(t), uniqueTopic(t)+"-strict"
		createTopics(t, c, newTopic(topic, 1), newTopic(strict, 1, "message.timestamp.before.max.ms", "60000", "message.timestamp.after.max.ms", "0"))
		now := time.Now()
		at := func(ds ...time.Duration) []byte {
			recs := make([]records.Record, len(ds))
			for i, d := range ds {
				recs[i] = records.Record{Timestamp: now.Add(d).UnixMilli(), Value: []byte(strconv.Itoa(i))}
			}
			return build(t, plainBuilder(), recs)
		}
		check := func(what, topic string, batch []byte, code int16, bad ...int32) {
			t.Helper()
			p := produceRaw(t, c, topic, batch)
			var got []int32
			for _, e := range p.ErrorRecords {
				got = append(got, e.RelativeOffset)
			}
			if p.ErrorCode != code || !slices.Equal(got, bad) {
				t.Errorf("%s: code %d, records named %v; want code %d, records %v", what, p.ErrorCode, got, code, bad)
			}
		}
		invalid := kerr.InvalidTimestamp.Code
		check("two hours ahead", topic, at(2*time.Hour), invalid, 0)
		check("the second of three two hours ahead", topic, at(0, 2*time.Hour, time.Minute), invalid, 1)
		check("50 minutes ahead", topic, at(50*time.Minute), 0)
		check("ten years old", topic, at(-10*365*24*time.Hour), 0)
		check("strict topic: two minutes old", strict, at(-2*time.Minute, 0), invalid, 0)
		check("strict topic: a minute ahead", strict, at(time.Minute), invalid, 0)
		if hw := highWatermark(t, c, topic); hw != 2 {
			t.Errorf("high watermark %d; want 2: only the two batches accepted were written", hw)
		}
	})
}

// TestFetchOutOfRangeAnswersNoOffsets: a fetch before the log start or
// past the high watermark is OFFSET_OUT_OF_RANGE with the partition's
// offsets -1, as Kafka answers any partition error.
func TestFetchOutOfRangeAnswersNoOffsets(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		topic := uniqueTopic(t)
		createTopics(t, c, newTopic(topic, 1))
		if p := produceRaw(t, c, topic, build(t, plainBuilder(), valueRecords("v", 3))); p.ErrorCode != 0 {
			t.Fatalf("produce: code %d", p.ErrorCode)
		}
		for _, offset := range []int64{-1, 4, 1000} {
			p := fetchRaw(t, c, topic, offset)
			if p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 || p.LastStableOffset != -1 || p.LogStartOffset != -1 {
				t.Errorf("fetch at %d: code %d, high watermark %d, last stable %d, log start %d; want OFFSET_OUT_OF_RANGE (1) and -1 for each offset",
					offset, p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
			}
		}
		if p := fetchRaw(t, c, topic, 3); p.ErrorCode != 0 || p.HighWatermark != 3 || p.LogStartOffset != 0 {
			t.Errorf("fetch at the high watermark: code %d, high watermark %d, log start %d; want 0, 3, 0", p.ErrorCode, p.HighWatermark, p.LogStartOffset)
		}
		// Below a log start that DeleteRecords moved up.
		dr := kmsg.NewPtrDeleteRecordsRequest()
		dr.Version, dr.TimeoutMillis = 2, 10000
		dt := kmsg.NewDeleteRecordsRequestTopic()
		dt.Topic = topic
		dp := kmsg.NewDeleteRecordsRequestTopicPartition()
		dp.Partition, dp.Offset = 0, 2
		dt.Partitions = append(dt.Partitions, dp)
		dr.Topics = append(dr.Topics, dt)
		if p := c.do(dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 2 {
			t.Fatalf("delete records below 2: code %d, low watermark %d", p.ErrorCode, p.LowWatermark)
		}
		if p := fetchRaw(t, c, topic, 1); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 || p.LogStartOffset != -1 {
			t.Errorf("fetch at 1, below the log start 2: code %d, high watermark %d, log start %d; want OFFSET_OUT_OF_RANGE (1), -1, -1", p.ErrorCode, p.HighWatermark, p.LogStartOffset)
		}
	})
}

// TestLogAppendTimeTopics: a topic with message.timestamp.type
// LogAppendTime keeps the time each batch was appended, not the producer's
// (no bounds apply to those): the answer carries it, and a fetched batch
// is marked as holding append times, every record at that time. A
// CreateTime topic answers -1.
func TestLogAppendTimeTopics(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		appendTimes, createTimes := uniqueTopic(t), uniqueTopic(t)+"-create"
		createTopics(t, c, newTopic(appendTimes, 1, "message.timestamp.type", "LogAppendTime"), newTopic(createTimes, 1))
		recs := []records.Record{
			{Timestamp: 1000, Value: []byte("ancient")},
			{Timestamp: time.Now().Add(2 * time.Hour).UnixMilli(), Value: []byte("ahead")},
		}
		before := time.Now().Add(-time.Second).UnixMilli()
		p := produceRaw(t, c, appendTimes, build(t, plainBuilder(), recs))
		after := time.Now().Add(time.Second).UnixMilli()
		if p.ErrorCode != 0 || p.LogAppendTime < before || p.LogAppendTime > after {
			t.Fatalf("produce: code %d, log append time %d; want 0 and a time in [%d, %d]", p.ErrorCode, p.LogAppendTime, before, after)
		}
		f := fetchRaw(t, c, appendTimes, 0)
		h, err := records.ParseHeader(f.RecordBatches)
		if f.ErrorCode != 0 || err != nil || !h.LogAppendTime() || h.MaxTimestamp != p.LogAppendTime {
			t.Fatalf("fetched batch: code %d (%v), append-time bit %v, max timestamp %d; want the bit and %d", f.ErrorCode, err, h.LogAppendTime(), h.MaxTimestamp, p.LogAppendTime)
		}
		for _, r := range decodeBatches(t, f.RecordBatches) { // checks the CRC too
			if r.Timestamp != p.LogAppendTime {
				t.Errorf("record %q: timestamp %d, want the append time %d", r.Value, r.Timestamp, p.LogAppendTime)
			}
		}
		if lo := listOffset(t, c, appendTimes, before); lo.ErrorCode != 0 || lo.Offset != 0 || lo.Timestamp != p.LogAppendTime {
			t.Errorf("ListOffsets at %d: code %d, offset %d, timestamp %d; want offset 0 at the append time", before, lo.ErrorCode, lo.Offset, lo.Timestamp)
		}
		if p := produceRaw(t, c, createTimes, build(t, plainBuilder(), valueRecords("c", 1))); p.ErrorCode != 0 || p.LogAppendTime != -1 {
			t.Errorf("produce to a CreateTime topic: code %d, log append time %d; want 0, -1", p.ErrorCode, p.LogAppendTime)
		}
	})
}

// TestAuthorizedOperationsWithoutAnAuthorizer: asked what it may do
// (KIP-430), a client of a broker without an authorizer is told every
// operation of the resource's type; not asked, the field stays unset.
func TestAuthorizedOperationsWithoutAnAuthorizer(t *testing.T) {
	const unset = -2147483648
	// Kafka's AclEntry.supportedOperations, as bit fields.
	const topicOps, clusterOps, groupOps = 3576, 8096, 3400
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		for _, include := range []bool{true, false} {
			want := func(ops int32) int32 {
				if include {
					return ops
				}
				return unset
			}
			md := metadataReq(12, false, "a")
			md.IncludeTopicAuthorizedOperations = include
			if got := c.do(md).(*kmsg.MetadataResponse).Topics[0].AuthorizedOperations; got != want(topicOps) {
				t.Errorf("Metadata, asked %v: topic operations %d, want %d", include, got, want(topicOps))
			}
			dc := kmsg.NewPtrDescribeClusterRequest()
			dc.IncludeClusterAuthorizedOperations = include
			if got := c.do(dc).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; got != want(clusterOps) {
				t.Errorf("DescribeCluster, asked %v: cluster operations %d, want %d", include, got, want(clusterOps))
			}
			group := groupName(t, c, fmt.Sprint(include))
			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 5, []string{group}, include
			if got := c.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0].AuthorizedOperations; got != want(groupOps) {
				t.Errorf("DescribeGroups, asked %v: group operations %d, want %d", include, got, want(groupOps))
			}
		}
	})
}

// TestTopicConfigsAsKafkaHasThem: a topic's DescribeConfigs lists the
// configs a Kafka 4.3 topic has, and each takes the values Kafka takes
// (IncrementalAlterConfigs, validate only): INVALID_CONFIG otherwise.
func TestTopicConfigsAsKafkaHasThem(t *testing.T) {
	names := []string{"cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
		"compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
		"follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
		"local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.decompressed.message.bytes",
		"max.message.bytes", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
		"min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
		"remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
		"segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable"}
	invalid := kerr.InvalidConfig.Code
	values := []struct {
		name, value string
		code        int16
	}{
		{"compression.gzip.level", "-1", 0}, {"compression.gzip.level", "1", 0}, {"compression.gzip.level", "9", 0},
		{"compression.gzip.level", "0", invalid}, {"compression.gzip.level", "10", invalid}, {"compression.gzip.level", "x", invalid},
		{"compression.lz4.level", "1", 0}, {"compression.lz4.level", "17", 0}, {"compression.lz4.level", "18", invalid},
		{"compression.zstd.level", "-131072", 0}, {"compression.zstd.level", "22", 0}, {"compression.zstd.level", "23", invalid},
		{"leader.replication.throttled.replicas", "", 0}, {"leader.replication.throttled.replicas", " * ", 0},
		{"leader.replication.throttled.replicas", "0:1, 1:2", 0}, {"leader.replication.throttled.replicas", "*,0:1", invalid},
		{"follower.replication.throttled.replicas", "0:1:2", invalid}, {"follower.replication.throttled.replicas", "x:y", invalid},
		{"local.retention.ms", "-2", 0}, {"local.retention.ms", "-3", invalid}, {"local.retention.bytes", "1000", 0},
		{"max.decompressed.message.bytes", "1", 0}, {"max.decompressed.message.bytes", "2147483639", 0},
		{"max.decompressed.message.bytes", "0", invalid}, {"max.decompressed.message.bytes", "2147483640", invalid},
		{"remote.log.copy.disable", "true", 0}, {"remote.log.copy.disable", "yes", invalid},
		{"remote.storage.enable", "false", 0}, {"remote.storage.enable", "true", invalid},
		{"segment.bytes", "1048575", invalid}, {"segment.bytes", "1048576", 0}, {"internal.segment.bytes", "1024", 0},
		{"retention.bytes", "-7", 0}, {"retention.bytes", "x", invalid}, {"preallocate", "TRUE", 0}, {"preallocate", "yes", invalid},
		{"cleanup.policy", "", 0}, {"cleanup.policy", " compact , delete ", 0}, {"cleanup.policy", "shrink", invalid},
		{"retention.ms", " 5", 0}, {"compression.type", " gzip ", 0},
	}
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		topic := uniqueTopic(t)
		createTopics(t, c, newTopic(topic, 1))
		dc := kmsg.NewPtrDescribeConfigsRequest()
		dc.Version = 4
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		dc.Resources = append(dc.Resources, dr)
		var got []string
		for _, cfg := range c.do(dc).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
			got = append(got, cfg.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, names) {
			t.Errorf("described configs %v; want %v", got, names)
		}
		for _, v := range values {
			if code := c.do(incAlterReq(true, topic, v.name, v.value)).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != v.code {
				t.Errorf("%s=%q: code %d, want %d", v.name, v.value, code, v.code)
			}
		}
	})
}

// TestProduceBatchChecks: a batch past the topic's max.message.bytes is
// MESSAGE_TOO_LARGE, one not at base offset 0 INVALID_RECORD, zstd before
// Produce v7 UNSUPPORTED_COMPRESSION_TYPE; and a transactional batch in a
// request without a transactional id fails every partition of the request
// with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Nothing of them is written.
func TestProduceBatchChecks(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		topic := uniqueTopic(t)
		createTopics(t, c, newTopic(topic, 2, "max.message.bytes", "2000"))
		awaitLeader(t, c, topic)
		check := func(what string, req *kmsg.ProduceRequest, want int16) {
			t.Helper()
			for _, rt := range c.do(req).(*kmsg.ProduceResponse).Topics {
				for _, p := range rt.Partitions {
					if p.ErrorCode != want {
						t.Errorf("%s, partition %d: code %d, want %d", what, p.Partition, p.ErrorCode, want)
					}
				}
			}
		}
		large := build(t, plainBuilder(), []records.Record{{Value: bytes.Repeat([]byte("x"), 3000)}})
		check("a 3 KB batch, max.message.bytes 2000", produceReq(9, -1, topic, 0, large), kerr.MessageTooLarge.Code)
		moved := build(t, plainBuilder(), valueRecords("m", 1))
		binary.BigEndian.PutUint64(moved, 77) // outside the CRC
		check("base offset 77", produceReq(9, -1, topic, 0, moved), kerr.InvalidRecord.Code)
		zb := plainBuilder()
		zb.Codec = records.Zstd
		zstd := build(t, zb, valueRecords("z", 1))
		check("zstd in Produce v6", produceReq(6, -1, topic, 0, zstd), kerr.UnsupportedCompressionType.Code)
		tb := plainBuilder()
		tb.ProducerID, tb.ProducerEpoch, tb.BaseSequence, tb.Transactional = 4242, 0, 0, true
		mixed := produceReq(9, -1, topic, 0, build(t, plainBuilder(), valueRecords("p", 1)))
		p1 := kmsg.NewProduceRequestTopicPartition()
		p1.Partition, p1.Records = 1, build(t, tb, valueRecords("t", 1))
		mixed.Topics[0].Partitions = append(mixed.Topics[0].Partitions, p1)
		check("a transactional batch without a transactional id", mixed, kerr.TransactionalIDAuthorizationFailed.Code)
		if got := fetchRaw(t, c, topic, 0); got.ErrorCode != 0 || got.HighWatermark != 0 {
			t.Errorf("partition 0 after the refused batches: code %d, high watermark %d; want nothing written", got.ErrorCode, got.HighWatermark)
		}
		check("zstd in Produce v7", produceReq(7, -1, topic, 0, zstd), 0)
	})
}

// TestFetchNamesEachPartitionOnce: a partition named twice in one fetch is
// answered once, where it was first named, from the offset it was last
// named with; a topic in two entries in a row gets one; and a fetch with
// max_bytes 0 still gets its first batch (KIP-74), and only that.
func TestFetchNamesEachPartitionOnce(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		topic := uniqueTopic(t)
		createTopics(t, c, newTopic(topic, 2))
		awaitLeader(t, c, topic)
		for _, p := range []int32{0, 0, 0, 1} {
			req := produceReq(9, -1, topic, p, build(t, plainBuilder(), valueRecords("v", 2)))
			if code := c.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("produce to partition %d: code %d", p, code)
			}
		}
		shape := func(resp *kmsg.FetchResponse) string {
			var b strings.Builder
			for _, rt := range resp.Topics {
				b.WriteString("[")
				for _, p := range rt.Partitions {
					fmt.Fprintf(&b, " p%d:%d", p.Partition, len(decodeBatches(t, p.RecordBatches)))
				}
				b.WriteString(" ]")
			}
			return b.String()
		}
		// Partition 0 at offsets 0 and then 4 (2 records left), partition 1 between them.
		req := fetchReq(topic, 0, 0, 0, 0, 1<<20)
		p1, again := req.Topics[0].Partitions[0], req.Topics[0].Partitions[0]
		p1.Partition, again.FetchOffset = 1, 4
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1, again)
		if got, want := shape(c.do(req).(*kmsg.FetchResponse)), "[ p0:2 p1:2 ]"; got != want {
			t.Errorf("partition 0 named twice: answered %s, want %s", got, want)
		}
		req = fetchReq(topic, 0, 0, 0, 0, 1<<20)
		second := req.Topics[0]
		second.Partitions = []kmsg.FetchRequestTopicPartition{p1}
		req.Topics = append(req.Topics, second)
		if got, want := shape(c.do(req).(*kmsg.FetchResponse)), "[ p0:6 p1:2 ]"; got != want {
			t.Errorf("a topic in two entries in a row: answered %s, want %s", got, want)
		}
		// Past 16 partitions the repeat is found another way: name 2..17
		// (unknown) between the two namings of partition 0.
		req = fetchReq(topic, 0, 0, 0, 0, 1<<20)
		want := "[ p0:2"
		for p := int32(2); p < 18; p++ {
			unknown := req.Topics[0].Partitions[0]
			unknown.Partition = p
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, unknown)
			want += fmt.Sprintf(" p%d:0", p)
		}
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, again)
		if got, want := shape(c.do(req).(*kmsg.FetchResponse)), want+" ]"; got != want {
			t.Errorf("partition 0 named twice among 18: answered %s, want %s", got, want)
		}
		req = fetchReq(topic, 0, 0, 0, 0, 1<<20)
		req.MaxBytes = 0
		if got, want := shape(c.do(req).(*kmsg.FetchResponse)), "[ p0:2 ]"; got != want {
			t.Errorf("max_bytes 0: answered %s, want %s (the first batch)", got, want)
		}
	})
}

// TestTopicConfigValuesAsKafkaStoresThem: values are described as Kafka
// parses them (trimmed, numbers and booleans in their plain form, list
// items joined by commas), internal.segment.bytes is listed only where set,
// and deleting a config no topic has changes nothing.
func TestTopicConfigValuesAsKafkaStoresThem(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		topic := uniqueTopic(t)
		given := map[string]string{"retention.ms": " 007", "preallocate": "TRUE", "cleanup.policy": " compact , delete",
			"min.cleanable.dirty.ratio": " 1", "compression.type": " gzip ", "internal.segment.bytes": "1048576"}
		var kv []string
		for k, v := range given {
			kv = append(kv, k, v)
		}
		createTopics(t, c, newTopic(topic, 1, kv...))
		want := map[string]string{"retention.ms": "7", "preallocate": "true", "cleanup.policy": "compact,delete",
			"min.cleanable.dirty.ratio": "1.0", "compression.type": "gzip", "internal.segment.bytes": "1048576"}
		describe := func() map[string]string {
			dc := kmsg.NewPtrDescribeConfigsRequest()
			dc.Version = 4
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			dc.Resources = append(dc.Resources, dr)
			got := map[string]string{}
			for _, cfg := range c.do(dc).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
				if cfg.Value != nil {
					got[cfg.Name] = *cfg.Value
				}
			}
			return got
		}
		got := describe()
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s given %q: described %q, want %q", k, given[k], got[k], v)
			}
		}
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		for _, name := range []string{"no.such.config", "internal.segment.bytes"} {
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Op = name, kmsg.IncrementalAlterConfigOpDelete
			res.Configs = append(res.Configs, cfg)
		}
		req.Resources = append(req.Resources, res)
		if code := c.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
			t.Errorf("deleting an unknown config and internal.segment.bytes: code %d, want NONE", code)
		}
		if v, listed := describe()["internal.segment.bytes"]; listed {
			t.Errorf("internal.segment.bytes still listed (%q) once deleted", v)
		}
	})
}

// TestMetadataNamesEachTopicOnce: a topic named twice in one Metadata
// request is answered once, as Kafka takes the request's topics as a set.
func TestMetadataNamesEachTopicOnce(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		topic := uniqueTopic(t)
		createTopics(t, c, newTopic(topic, 1))
		awaitLeader(t, c, topic)
		unknown := topic + "-unknown"
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		for _, name := range []string{topic, unknown, topic, unknown} {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, mt)
		}
		got := map[string]int{}
		for _, mt := range c.do(req).(*kmsg.MetadataResponse).Topics {
			if mt.Topic != nil {
				got[*mt.Topic]++
			}
		}
		if got[topic] != 1 || got[unknown] != 1 || len(got) != 2 {
			t.Errorf("two topics named twice each: answered %v, want each once", got)
		}
	})
}

// TestBrokerConfigsOfTheDefaultEntity: the broker resource "" is the
// cluster's dynamic defaults (kafka-configs.sh --entity-default), none set
// on a fresh cluster: an empty list, while the node's own id lists its
// configs.
func TestBrokerConfigsOfTheDefaultEntity(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		md.Topics = []kmsg.MetadataRequestTopic{}
		self := strconv.Itoa(int(c.do(md).(*kmsg.MetadataResponse).Brokers[0].NodeID))
		dc := kmsg.NewPtrDescribeConfigsRequest()
		dc.Version = 4
		for _, name := range []string{"", self} {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
			r.ConfigNames = []string{"num.partitions"}
			dc.Resources = append(dc.Resources, r)
		}
		rs := c.do(dc).(*kmsg.DescribeConfigsResponse).Resources
		if len(rs) != 2 || rs[0].ErrorCode != 0 || len(rs[0].Configs) != 0 {
			t.Errorf("broker \"\": %+v, want no error and no configs", rs)
		}
		if len(rs) == 2 && (rs[1].ErrorCode != 0 || len(rs[1].Configs) != 1) {
			t.Errorf("broker %s: code %d, %d configs; want num.partitions", self, rs[1].ErrorCode, len(rs[1].Configs))
		}
	})
}

// TestTopicsNamedTwiceInAdminRequests: CreatePartitions and DeleteTopics
// answer a topic named twice (or, for DeleteTopics, identified twice) once,
// with INVALID_REQUEST, and leave it as it is, while the request's other
// topics are served.
func TestTopicsNamedTwiceInAdminRequests(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		twice, other, byID := uniqueTopic(t), uniqueTopic(t)+"-other", uniqueTopic(t)+"-id"
		createTopics(t, c, newTopic(twice, 1), newTopic(other, 1), newTopic(byID, 1))
		for _, n := range []string{twice, other, byID} {
			awaitLeader(t, c, n)
		}
		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.Version, cp.TimeoutMillis = 3, 5000
		cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: twice, Count: 3}, {Topic: other, Count: 2}, {Topic: twice, Count: 4}}
		got := map[string][]int16{}
		for _, tt := range c.do(cp).(*kmsg.CreatePartitionsResponse).Topics {
			got[tt.Topic] = append(got[tt.Topic], tt.ErrorCode)
		}
		want := map[string][]int16{twice: {kerr.InvalidRequest.Code}, other: {0}}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("CreatePartitions naming %s twice: answered %v, want %v", twice, got, want)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		for _, n := range []string{twice, other, byID} {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(n)
			md.Topics = append(md.Topics, mt)
		}
		meta := func() map[string]kmsg.MetadataResponseTopic {
			m := map[string]kmsg.MetadataResponseTopic{}
			for _, mt := range c.do(md).(*kmsg.MetadataResponse).Topics {
				m[*mt.Topic] = mt
			}
			return m
		}
		before := meta()
		if n := len(before[twice].Partitions); n != 1 {
			t.Errorf("%s named twice has %d partitions, want 1 (unchanged)", twice, n)
		}
		if n := len(before[other].Partitions); n != 2 {
			t.Errorf("%s has %d partitions, want 2", other, n)
		}
		dt := kmsg.NewPtrDeleteTopicsRequest()
		dt.Version, dt.TimeoutMillis = 6, 5000
		id := before[byID].TopicID
		dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(twice)}, {Topic: kmsg.StringPtr(other)},
			{Topic: kmsg.StringPtr(twice)}, {TopicID: id}, {TopicID: id}}
		got = map[string][]int16{}
		for _, tt := range c.do(dt).(*kmsg.DeleteTopicsResponse).Topics {
			name := "<by id>"
			if tt.Topic != nil {
				name = *tt.Topic
			} else if tt.TopicID != id {
				t.Errorf("an answer without a name for id %x", tt.TopicID)
			}
			got[name] = append(got[name], tt.ErrorCode)
		}
		want = map[string][]int16{twice: {kerr.InvalidRequest.Code}, other: {0}, "<by id>": {kerr.InvalidRequest.Code}}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("DeleteTopics naming %s twice and %s's id twice: answered %v, want %v", twice, byID, got, want)
		}
		after := meta()
		if after[twice].ErrorCode != 0 || after[byID].ErrorCode != 0 {
			t.Errorf("after DeleteTopics: %s code %d, %s code %d; want both kept", twice, after[twice].ErrorCode, byID, after[byID].ErrorCode)
		}
	})
}

// TestDescribeClusterEndpointTypes: a broker lists brokers (endpoint type
// 1), answers a request for controllers (2, --bootstrap-controller) with
// MISMATCHED_ENDPOINT_TYPE and any other type with UNSUPPORTED_ENDPOINT_TYPE.
func TestDescribeClusterEndpointTypes(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		c := dialRaw(t, addr)
		for typ, want := range map[int8]int16{1: 0, 2: kerr.MismatchedEndpointType.Code, 3: kerr.UnsupportedEndpointType.Code} {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version, req.EndpointType = 1, typ
			resp := c.do(req).(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != want || want == 0 && len(resp.Brokers) == 0 {
				t.Errorf("endpoint type %d: code %d, %d brokers; want code %d", typ, resp.ErrorCode, len(resp.Brokers), want)
			}
		}
	})
}

// TestAcksZeroFailureClosesTheConnection: an acks=0 produce gets no answer,
// so one a partition of which fails (an unknown partition, a corrupt
// batch) closes the connection, for the client to learn of it; one that
// succeeds leaves it serving.
func TestAcksZeroFailureClosesTheConnection(t *testing.T) {
	groupTargets(t, func(t *testing.T, addr string) {
		topic := uniqueTopic(t)
		c := dialRaw(t, addr)
		createTopics(t, c, newTopic(topic, 1))
		awaitLeader(t, c, topic)
		good := build(t, plainBuilder(), valueRecords("z", 1))
		corrupt := slices.Clone(good)
		corrupt[len(corrupt)-1] ^= 1
		for _, tc := range []struct {
			what      string
			partition int32
			batch     []byte
			closes    bool
		}{{"a batch written", 0, good, false}, {"an unknown partition", 5, good, true}, {"a corrupt batch", 0, corrupt, true}} {
			c := dialRaw(t, addr)
			c.send(produceReq(9, 0, topic, tc.partition, tc.batch))
			if tc.closes {
				expectClosed(t, c.nc)
				continue
			}
			md := kmsg.NewPtrMetadataRequest()
			md.Version, md.Topics = 12, []kmsg.MetadataRequestTopic{}
			c.do(md) // fails the test if the connection closed
		}
	})
}
