package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// handleWriteTxnMarkers writes transaction markers into partitions: Kafka's
// inter-broker API, which kafka-transactions abort sends to a partition's
// leader to close a hanging transaction. Authorized as Kafka authorizes it
// (ALTER or CLUSTER_ACTION on the cluster); answered as Kafka's broker
// answers it: NONE when written, also for a producer with no open
// transaction in the partition, INVALID_PRODUCER_EPOCH when the partition
// has seen a newer epoch of the producer, TRANSACTION_COORDINATOR_FENCED
// when an earlier marker for it there carried a newer coordinator epoch,
// UNKNOWN_TOPIC_OR_PARTITION. The markers of one request are one Raft
// entry.
func (s *Server) handleWriteTxnMarkers(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	n := 0
	for _, m := range req.Markers {
		for _, t := range m.Topics {
			n += len(t.Partitions)
		}
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	if nowMs, admin, ok := coordinatorMarkerTime(r, req); ok {
		if w, ok := s.backend.(MarkerWriter); ok {
			return later(func() kmsg.Response { return s.coordinatorMarkers(ctx, w, req, nowMs, admin) })
		}
	}
	a := s.access(r)
	if !a.cluster(kmsg.ACLOperationAlter) && !a.cluster(kmsg.ACLOperationClusterAction) {
		return now(writeTxnMarkersAnswer(req, resp, nil, kerr.ClusterAuthorizationFailed.Code))
	}
	if n == 0 {
		return now(resp)
	}
	markers := make([]fsm.TxnMarker, 0, len(req.Markers))
	for _, m := range req.Markers {
		tm := fsm.TxnMarker{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				tm.Partitions = append(tm.Partitions, fsm.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		markers = append(markers, tm)
	}
	local := func() kmsg.Response {
		codes, code := s.txns.WriteMarkers(ctx, markers)
		switch code {
		case 0, kerr.UnsupportedVersion.Code:
		default:
			// Off the serving leader: the partitions' leader is the Raft
			// leader, so the sender looks the leader up again and retries.
			code = kerr.NotLeaderForPartition.Code
		}
		return writeTxnMarkersAnswer(req, resp, codes, code)
	}
	if _, ok := s.backend.(MarkerWriter); ok {
		// Iggy: the partition's leader is any node, the coordinator the
		// Raft leader, which writes the markers through the partitions'
		// leaders and records them.
		return later(func() kmsg.Response { return s.viaLeader(ctx, r, local) })
	}
	return later(local)
}

// writeTxnMarkersAnswer fills resp with a code per partition, codes[i] for
// the i-th partition of the request, or code for all when codes is nil.
func writeTxnMarkersAnswer(req *kmsg.WriteTxnMarkersRequest, resp *kmsg.WriteTxnMarkersResponse, codes []int16, code int16) *kmsg.WriteTxnMarkersResponse {
	i := 0
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, partitionCode(codes, i, code)
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}
