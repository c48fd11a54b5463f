package gateway

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

func (s *Server) handleOffsetFetch(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if len(req.Topics)+len(req.Groups) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	a := s.access(r)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			var topics []topicRequest
			if g.Topics != nil {
				topics = []topicRequest{}
				for _, t := range g.Topics {
					topics = append(topics, topicRequest{t.Topic, t.Partitions})
				}
			}
			var parts []offsetAnswer
			parts, rg.ErrorCode = s.fetchOffsets(g.Group, topics, a, req.RequireStable)
			for _, t := range groupByTopic(parts) {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.topic
				for _, a := range t.parts {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = a.partition, a.offset, a.epoch, a.metadata, a.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return now(resp)
	}
	var topics []topicRequest
	if req.Topics != nil || req.Version < 2 {
		topics = []topicRequest{}
		for _, t := range req.Topics {
			topics = append(topics, topicRequest{t.Topic, t.Partitions})
		}
	}
	parts, code := s.fetchOffsets(req.Group, topics, a, req.RequireStable)
	resp.ErrorCode = code
	for _, t := range groupByTopic(parts) {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.topic
		for _, a := range t.parts {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = a.partition, a.offset, a.epoch, a.metadata, a.code
			if req.Version < 2 && code != 0 {
				rp.ErrorCode = code // v0-1 have no top-level error
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp)
}

type topicRequest struct {
	topic      string
	partitions []int32
}

type offsetAnswer struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	metadata  *string
	code      int16
}

// fetchOffsets answers the partitions asked for (topics nil: every
// committed one). Partitions with no commit get offset -1, as in Kafka.
// A client that may not describe the group gets GROUP_AUTHORIZATION_FAILED;
// topics it may not describe are left out of "every" and answered
// TOPIC_AUTHORIZATION_FAILED when named. With stable (KIP-447's
// require_stable), a partition whose offset waits in an ongoing
// transaction gets UNSTABLE_OFFSET_COMMIT, retriable.
func (s *Server) fetchOffsets(group string, topics []topicRequest, acc access, stable bool) ([]offsetAnswer, int16) {
	if !acc.allows(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, group) {
		return nil, kerr.GroupAuthorizationFailed.Code
	}
	offs, code := s.groups.FetchOffsets(group)
	var pending map[fsm.TopicPartition]bool
	if stable && s.txns != nil && code == 0 {
		pending = s.txns.PendingOffsets(group)
	}
	var out []offsetAnswer
	answer := func(tp fsm.TopicPartition) offsetAnswer {
		empty := ""
		a := offsetAnswer{topic: tp.Topic, partition: tp.Partition, offset: -1, epoch: -1, metadata: &empty, code: code}
		if pending[tp] {
			a.code = kerr.UnstableOffsetCommit.Code
			return a
		}
		if o, ok := offs[tp]; ok && code == 0 {
			md := o.Metadata
			a.offset, a.epoch, a.metadata = o.Offset, o.LeaderEpoch, &md
		}
		return a
	}
	if topics == nil {
		if code != 0 {
			return nil, code
		}
		tps := make([]fsm.TopicPartition, 0, len(offs))
		for tp := range offs {
			if acc.topic(kmsg.ACLOperationDescribe, tp.Topic) {
				tps = append(tps, tp)
			}
		}
		sort.Slice(tps, func(i, j int) bool {
			if tps[i].Topic != tps[j].Topic {
				return tps[i].Topic < tps[j].Topic
			}
			return tps[i].Partition < tps[j].Partition
		})
		for _, tp := range tps {
			out = append(out, answer(tp))
		}
		return out, 0
	}
	for _, t := range topics {
		denied := !acc.topic(kmsg.ACLOperationDescribe, t.topic)
		for _, p := range t.partitions {
			a := answer(fsm.TopicPartition{Topic: t.topic, Partition: p})
			if denied {
				a.offset, a.epoch, a.code = -1, -1, kerr.TopicAuthorizationFailed.Code
			}
			out = append(out, a)
		}
	}
	return out, code
}

type topicAnswers struct {
	topic string
	parts []offsetAnswer
}

// groupByTopic keeps first-seen topic order.
func groupByTopic(as []offsetAnswer) []topicAnswers {
	var out []topicAnswers
	idx := map[string]int{}
	for _, a := range as {
		i, ok := idx[a.topic]
		if !ok {
			i = len(out)
			idx[a.topic] = i
			out = append(out, topicAnswers{topic: a.topic})
		}
		out[i].parts = append(out[i].parts, a)
	}
	return out
}
