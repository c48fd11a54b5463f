package gateway_test

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOneConnectionOneOrder: requests on one connection take effect in the
// order they were sent, as in Kafka (ARCHITECTURE rule 9). Each round sends
// 2-5 OffsetCommits for one partition and then an OffsetFetch, all without
// waiting; the fetch must return the last offset committed, and every
// commit must succeed.
func TestOneConnectionOneOrder(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "ordered", 1, nil)
	c := dialRaw(t, n.addr)
	rng := rand.New(rand.NewPCG(1, 2))
	offset := int64(0)
	for round := range 1000 {
		commits := 2 + rng.IntN(4)
		var sent []int32
		var reqs []kmsg.Request
		for range commits {
			offset++
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version = 8
			req.Group = "ordered-group"
			req.Generation = -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "ordered"
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, offset
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			sent = append(sent, c.send(req))
			reqs = append(reqs, req)
		}
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Version = 7
		fetch.Group = "ordered-group"
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "ordered", []int32{0}
		fetch.Topics = append(fetch.Topics, ft)
		fetchCorr := c.send(fetch)
		for i, corr := range sent {
			resp := c.recv(corr, reqs[i]).(*kmsg.OffsetCommitResponse)
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("round %d: commit %d: code %d", round, i, code)
			}
		}
		resp := c.recv(fetchCorr, fetch).(*kmsg.OffsetFetchResponse)
		if got := resp.Topics[0].Partitions[0].Offset; resp.ErrorCode != 0 || got != offset {
			t.Fatalf("round %d: OffsetFetch after %d pipelined commits returned offset %d (code %d), last committed %d",
				round, commits, got, resp.ErrorCode, offset)
		}
	}
}
