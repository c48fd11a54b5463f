package gateway_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeTopicPartitionsPages(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "dtp-a", 3, nil)
	createTopic(t, n.addr, "dtp-b", 2, nil)
	c := dialRaw(t, n.addr)
	type tp struct {
		topic string
		part  int32
	}
	var seen []tp
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 2
	pages := 0
	for {
		pages++
		resp := c.do(req).(*kmsg.DescribeTopicPartitionsResponse)
		for _, t2 := range resp.Topics {
			if t2.ErrorCode != 0 || t2.TopicID == [16]byte{} {
				t.Fatalf("topic %v: error %d", *t2.Topic, t2.ErrorCode)
			}
			for _, p := range t2.Partitions {
				if p.LeaderID != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
					t.Errorf("%s/%d: leader %d replicas %v isr %v", *t2.Topic, p.Partition, p.LeaderID, p.Replicas, p.ISR)
				}
				seen = append(seen, tp{*t2.Topic, p.Partition})
			}
		}
		if resp.NextCursor == nil {
			break
		}
		if pages > 10 {
			t.Fatal("more than 10 pages")
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := []tp{{"dtp-a", 0}, {"dtp-a", 1}, {"dtp-a", 2}, {"dtp-b", 0}, {"dtp-b", 1}}
	if pages != 3 || len(seen) != len(want) {
		t.Fatalf("%d pages with %v, want 3 with %v", pages, seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("pages gave %v, want %v", seen, want)
		}
	}

	req = kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "dtp-b"}, {Topic: "dtp-missing"}}
	resp := c.do(req).(*kmsg.DescribeTopicPartitionsResponse)
	if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "dtp-b" || len(resp.Topics[0].Partitions) != 2 ||
		*resp.Topics[1].Topic != "dtp-missing" || resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.NextCursor != nil {
		t.Fatalf("named topics: %+v", resp.Topics)
	}
}
