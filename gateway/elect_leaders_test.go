package gateway_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestElectLeadersAlreadyElected(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "el", 2, nil)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrElectLeadersRequest()
	req.SetVersion(2)
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "el", Partitions: []int32{0, 1, 5}}}
	resp := c.do(req).(*kmsg.ElectLeadersResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("response %+v", resp)
	}
	for _, p := range resp.Topics[0].Partitions {
		want := kerr.ElectionNotNeeded.Code
		if p.Partition == 5 {
			want = kerr.UnknownTopicOrPartition.Code
		}
		if p.ErrorCode != want || p.ErrorMessage == nil {
			t.Errorf("partition %d: error %d, want %d with a message", p.Partition, p.ErrorCode, want)
		}
	}
	req.Topics = nil // every partition: none needs an election (Kafka lists each topic, empty)
	resp = c.do(req).(*kmsg.ElectLeadersResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Topic != "el" || len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("all partitions: %+v", resp)
	}
}
