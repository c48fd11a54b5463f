package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/records"
)

func deleteRecordsReq(topic string, offsets map[int32]int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.SetVersion(2)
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < 8; p++ {
		if off, ok := offsets[p]; ok {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	req.Topics = []kmsg.DeleteRecordsRequestTopic{rt}
	return req
}

func TestDeleteRecordsMovesLogStart(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "dr", 2, nil)
	c := dialRaw(t, n.addr)
	produceRaw(t, c, "dr", build(t, plainBuilder(), valueRecords("a", 4)))
	produceRaw(t, c, "dr", build(t, plainBuilder(), valueRecords("b", 4)))

	resp := c.do(deleteRecordsReq("dr", map[int32]int64{0: 6, 1: 5, 7: 0})).(*kmsg.DeleteRecordsResponse)
	got := map[int32]kmsg.DeleteRecordsResponseTopicPartition{}
	for _, p := range resp.Topics[0].Partitions {
		got[p.Partition] = p
	}
	if p := got[0]; p.ErrorCode != 0 || p.LowWatermark != 6 {
		t.Errorf("partition 0: error %d low watermark %d, want 6", p.ErrorCode, p.LowWatermark)
	}
	if p := got[1]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("partition 1 (empty) to 5: error %d, want OFFSET_OUT_OF_RANGE", p.ErrorCode)
	}
	if p := got[7]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("partition 7: error %d, want UNKNOWN_TOPIC_OR_PARTITION", p.ErrorCode)
	}
	if lo := listOffset(t, c, "dr", -2); lo.Offset != 6 {
		t.Fatalf("earliest offset %d after DeleteRecords to 6", lo.Offset)
	}
	if fp := fetchRaw(t, c, "dr", 2); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the new start: error %d, want OFFSET_OUT_OF_RANGE", fp.ErrorCode)
	}
	var offsets []int64
	for _, r := range decodeBatches(t, fetchRaw(t, c, "dr", 6).RecordBatches) {
		if r.Offset >= 6 {
			offsets = append(offsets, r.Offset)
		}
	}
	if len(offsets) != 2 || offsets[0] != 6 || offsets[1] != 7 {
		t.Fatalf("records from 6: %v", offsets)
	}

	// Lower than the start: nothing changes; -1: up to the high watermark.
	if p := c.do(deleteRecordsReq("dr", map[int32]int64{0: 2})).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 6 {
		t.Errorf("below the start: error %d low watermark %d, want 6", p.ErrorCode, p.LowWatermark)
	}
	if p := c.do(deleteRecordsReq("dr", map[int32]int64{0: -1})).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 8 {
		t.Errorf("-1: error %d low watermark %d, want the high watermark 8", p.ErrorCode, p.LowWatermark)
	}
	if p := c.do(deleteRecordsReq("dr", map[int32]int64{0: 9})).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("past the high watermark: error %d, want OFFSET_OUT_OF_RANGE", p.ErrorCode)
	}
	// A partition named twice is answered once, for the last offset.
	twice := deleteRecordsReq("dr", map[int32]int64{1: 0})
	twice.Topics[0].Partitions = append(twice.Topics[0].Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: 1, Offset: 7})
	if ps := c.do(twice).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions; len(ps) != 1 || ps[0].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("partition named twice: %+v, want one answer for offset 7", ps)
	}
}

func TestDeleteRecordsDropsWholeSegments(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "drseg", 1, map[string]*string{"internal.segment.bytes": kmsg.StringPtr("1024")})
	c := dialRaw(t, n.addr)
	for i := 0; i < 6; i++ {
		produceRaw(t, c, "drseg", build(t, plainBuilder(), []records.Record{{Value: make([]byte, 700)}}))
	}
	dir := filepath.Join(n.dataDir, "topics", fmt.Sprintf("%x-0", topicMeta(t, c, "drseg").TopicID))
	before := segmentFiles(t, dir)
	if before < 3 {
		t.Fatalf("%d segments, want several", before)
	}
	if p := c.do(deleteRecordsReq("drseg", map[int32]int64{0: 4})).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 4 {
		t.Fatalf("error %d low watermark %d", p.ErrorCode, p.LowWatermark)
	}
	if after := segmentFiles(t, dir); after >= before {
		t.Fatalf("%d segments after deleting records below 4, had %d", after, before)
	}
}

// plainBackend hides the optional backend interfaces (RecordDeleter,
// ProducerDescriber, LogDirReporter, QuotaStore), as the Iggy backend
// lacks the first two.
type plainBackend struct{ gateway.Backend }

// TestWithoutRecordDeletion: a backend that cannot delete records answers
// POLICY_VIOLATION per partition; one without idempotence state lists no
// producers.
func TestWithoutRecordDeletion(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "plain", 1, nil)
	log := slog.New(slog.DiscardHandler)
	srv := gateway.New(gateway.Config{Addr: freeLoopbackAddr(t), Logger: log}, plainBackend{n.backend}, n.node)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	c := dialRaw(t, srv.Addr().String())
	produceRaw(t, c, "plain", build(t, plainBuilder(), valueRecords("p", 3)))

	p := c.do(deleteRecordsReq("plain", map[int32]int64{0: 1, 3: 0})).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions
	if len(p) != 2 || p[0].ErrorCode != kerr.PolicyViolation.Code || p[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partitions %+v, want POLICY_VIOLATION and UNKNOWN_TOPIC_OR_PARTITION", p)
	}
	if lo := listOffset(t, c, "plain", -2); lo.Offset != 0 {
		t.Fatalf("earliest offset %d: records were deleted", lo.Offset)
	}
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "plain", Partitions: []int32{0}}}
	if dp := c.do(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]; dp.ErrorCode != 0 || len(dp.ActiveProducers) != 0 {
		t.Fatalf("describe producers: %+v", dp)
	}
	// Without a quota store the quota APIs are not offered.
	for _, k := range c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == 48 || k.ApiKey == 49 {
			t.Fatalf("quota API %d advertised without a quota store", k.ApiKey)
		}
	}
}
