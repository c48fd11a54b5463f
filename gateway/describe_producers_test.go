package gateway_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/records"
)

func TestDescribeProducers(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "dp", 1, nil)
	c := dialRaw(t, n.addr)
	ip := initProducerID(t, c, nil)
	start := time.Now().UnixMilli()
	bld := records.Builder{ProducerID: ip.ProducerID, ProducerEpoch: ip.ProducerEpoch, BaseSequence: 0, BaseTimestamp: start}
	produceRaw(t, c, "dp", build(t, bld, valueRecords("x", 3)))
	bld.BaseSequence = 3
	produceRaw(t, c, "dp", build(t, bld, valueRecords("y", 2)))
	produceRaw(t, c, "dp", build(t, plainBuilder(), valueRecords("plain", 1))) // not idempotent: not listed

	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "dp", Partitions: []int32{0, 3}}}
	resp := c.do(req).(*kmsg.DescribeProducersResponse)
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || ps[0].ErrorCode != 0 || len(ps[0].ActiveProducers) != 1 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partitions %+v", ps)
	}
	ap := ps[0].ActiveProducers[0]
	if ap.ProducerID != ip.ProducerID || ap.ProducerEpoch != int32(ip.ProducerEpoch) || ap.LastSequence != 4 ||
		ap.LastTimestamp < start || ap.CoordinatorEpoch != -1 || ap.CurrentTxnStartOffset != -1 {
		t.Fatalf("producer %+v, want id %d epoch %d last sequence 4", ap, ip.ProducerID, ip.ProducerEpoch)
	}
}
