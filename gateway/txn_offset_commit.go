package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// handleTxnOffsetCommit stages a consumer group's offsets in a transaction;
// the group sees them once the transaction commits.
func (s *Server) handleTxnOffsetCommit(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	a := s.access(r)
	denyAll := int16(0)
	switch {
	case !a.allows(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID):
		denyAll = kerr.TransactionalIDAuthorizationFailed.Code
	case !a.allows(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group):
		denyAll = kerr.GroupAuthorizationFailed.Code
	}
	var offsets []fsm.OffsetCommit
	type slot struct{ t, p int }
	var slots []slot
	for ti, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		info, known := s.backend.Topic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case denyAll != 0:
				rp.ErrorCode = denyAll
			case !a.topic(kmsg.ACLOperationRead, t.Topic):
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known || p.Partition < 0 || p.Partition >= info.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				oc := fsm.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
				if req.Version >= 2 {
					oc.LeaderEpoch = p.LeaderEpoch
				}
				if p.Metadata != nil {
					oc.Metadata = *p.Metadata
				}
				offsets = append(offsets, oc)
				slots = append(slots, slot{ti, len(rt.Partitions)})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	generation, member, instance := int32(-1), "", ""
	if req.Version >= 3 {
		generation, member = req.Generation, req.MemberID
		if req.InstanceID != nil {
			instance = *req.InstanceID
		}
	}
	return later(func() kmsg.Response {
		if len(offsets) == 0 {
			return resp
		}
		codes, code := s.txns.CommitOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group,
			member, instance, generation, offsets)
		code = fencedAs(code, req.Version, 3)
		for i, sl := range slots {
			resp.Topics[sl.t].Partitions[sl.p].ErrorCode = partitionCode(codes, i, code)
		}
		return resp
	})
}
