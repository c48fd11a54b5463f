package gateway

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxDescribePartitions caps a DescribeTopicPartitions page, as Kafka's
// max.request.partition.size.limit (default 2000) does.
const maxDescribePartitions = 2000

// DescribeTopicPartitions (KIP-966) is Metadata's topic part, paginated:
// topics by name from the cursor on, at most ResponsePartitionLimit
// partitions a page, NextCursor naming the first partition left out.
func (s *Server) handleDescribeTopicPartitions(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	if len(req.Topics) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > maxDescribePartitions {
		limit = maxDescribePartitions
	}
	var names []string
	a := s.access(r)
	if len(req.Topics) == 0 {
		for _, t := range s.allTopics(ctx) {
			if a.topic(kmsg.ACLOperationDescribe, t.Name) { // others are left out, as in Metadata
				names = append(names, t.Name)
			}
		}
	} else {
		seen := map[string]bool{}
		for _, t := range req.Topics {
			if !seen[t.Topic] {
				seen[t.Topic] = true
				names = append(names, t.Topic)
			}
		}
		sort.Strings(names)
	}
	var cursorTopic string
	var cursorPart int32
	if req.Cursor != nil {
		cursorTopic, cursorPart = req.Cursor.Topic, max(req.Cursor.Partition, 0)
	}
	replicas, isr := s.cluster.Replicas()
	resp.Topics = []kmsg.DescribeTopicPartitionsResponseTopic{}
	for _, name := range names {
		if name < cursorTopic {
			continue
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = &name
		if !a.topic(kmsg.ACLOperationDescribe, name) {
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		t, ok := s.backend.Topic(name)
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if !validTopicName(name) {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		first := int32(0)
		if name == cursorTopic {
			first = cursorPart
		}
		if limit == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: first}
			break
		}
		rt.TopicID = t.ID
		rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		for p := first; p < t.Partitions; p++ {
			if limit == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: p}
				break
			}
			limit--
			rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			rp.Partition = p
			leader, ok := s.backend.PartitionLeader(name, p)
			if !ok || leader < 0 {
				rp.ErrorCode = kerr.LeaderNotAvailable.Code
				leader = -1
			}
			rp.LeaderID, rp.LeaderEpoch = leader, 0
			rp.Replicas, rp.ISR, rp.OfflineReplicas = replicas, isr, offline(replicas, isr)
			rp.EligibleLeaderReplicas, rp.LastKnownELR = []int32{}, []int32{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	return now(resp)
}
