package gateway_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/records"
)

// TestProduceRequestOfMegabytes: one idempotent produce request carrying
// batches of 700 KiB for three partitions, listed out of order, and one
// for a partition that does not exist (several megabytes: the backend
// proposes it as several Raft entries). Every partition gets its own answer
// at its own offset, the missing one UNKNOWN_TOPIC_OR_PARTITION; the
// records read back are those sent; the same request sent again (a
// producer's retry) is answered with the same offsets and appends nothing.
func TestProduceRequestOfMegabytes(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "big", 3, nil)
	c := dialRaw(t, n.addr)

	// Partition p starts with p+1 records, so each answer's offset shows
	// which partition it belongs to.
	for p := int32(0); p < 3; p++ {
		req := produceReq(9, -1, "big", p, build(t, plainBuilder(), valueRecords("pre", int(p)+1)))
		if code := c.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("producing to partition %d: error %d", p, code)
		}
	}
	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.TransactionTimeoutMillis = 60000
	ir := c.do(initReq).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("InitProducerID: error %d", ir.ErrorCode)
	}

	value := func(p int32) []byte { return bytes.Repeat([]byte{byte('a' + p)}, 700<<10) }
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "big"
	order := []int32{2, 0, 7, 1}
	for _, p := range order {
		b := records.Builder{ProducerID: ir.ProducerID, ProducerEpoch: ir.ProducerEpoch, BaseSequence: 0,
			BaseTimestamp: 1}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = build(t, b, []records.Record{{Value: value(p)}})
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)

	check := func(try string) {
		t.Helper()
		resp := c.do(req).(*kmsg.ProduceResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(order) {
			t.Fatalf("%s: answer shape %+v", try, resp.Topics)
		}
		for i, sp := range resp.Topics[0].Partitions {
			p := order[i]
			if sp.Partition != p {
				t.Fatalf("%s: answer %d is for partition %d, want %d", try, i, sp.Partition, p)
			}
			if p == 7 {
				if sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Errorf("%s: partition 7: error %d, want UNKNOWN_TOPIC_OR_PARTITION", try, sp.ErrorCode)
				}
				continue
			}
			if sp.ErrorCode != 0 || sp.BaseOffset != int64(p)+1 {
				t.Errorf("%s: partition %d: error %d, base offset %d, want 0 and %d", try, p, sp.ErrorCode, sp.BaseOffset, p+1)
			}
		}
	}
	check("first send")
	check("retry")

	for p := int32(0); p < 3; p++ {
		fp := fetchPartition(t, c.do(fetchReq("big", p, int64(p)+1, 0, 0, 2<<20)).(*kmsg.FetchResponse))
		recs := decodeBatches(t, fp.RecordBatches)
		if fp.ErrorCode != 0 || fp.HighWatermark != int64(p)+2 || len(recs) != 1 || !bytes.Equal(recs[0].Value, value(p)) {
			var got string
			if len(recs) > 0 {
				got = fmt.Sprintf("%d bytes of %q", len(recs[0].Value), recs[0].Value[:1])
			}
			t.Errorf("partition %d: error %d, high watermark %d (want %d), %d records (want 1), first %s",
				p, fp.ErrorCode, fp.HighWatermark, p+2, len(recs), got)
		}
	}
}
