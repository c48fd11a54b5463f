package gateway_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestPartitionReassignments(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "ra", 2, nil)
	c := dialRaw(t, n.addr)
	if resp := c.do(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("list: %+v", resp)
	}
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "ra", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{
		{Partition: 0, Replicas: []int32{2}}, {Partition: 1}, {Partition: 9, Replicas: []int32{1}}, {Partition: 0, Replicas: []int32{1}},
	}}}
	resp := c.do(req).(*kmsg.AlterPartitionAssignmentsResponse)
	// The last asks for the replicas partition 0 already has: done.
	want := []int16{kerr.InvalidReplicaAssignment.Code, kerr.NoReassignmentInProgress.Code, kerr.UnknownTopicOrPartition.Code, 0}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 4 {
		t.Fatalf("alter: %+v", resp)
	}
	for i, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != want[i] || (want[i] != 0) != (p.ErrorMessage != nil) {
			t.Errorf("partition %d: error %d, want %d with a message", p.Partition, p.ErrorCode, want[i])
		}
	}
	if msg := *resp.Topics[0].Partitions[0].ErrorMessage; !strings.Contains(msg, "Raft") {
		t.Errorf("message %q does not say why", msg)
	}
}
