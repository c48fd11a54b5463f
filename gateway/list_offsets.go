package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// ListOffsets special timestamps.
const (
	latestTimestamp        = -1
	earliestTimestamp      = -2
	maxTimestamp           = -3
	earliestLocalTimestamp = -4
)

// specialSince is the first version each special timestamp is valid in.
// Any other negative timestamp, or one sent in an older version, is
// UNSUPPORTED_VERSION, as Kafka answers (-5 and later name tiered storage
// and need versions above ours).
var specialSince = map[int64]int16{latestTimestamp: 1, earliestTimestamp: 1, maxTimestamp: 7, earliestLocalTimestamp: 8}

func timestampSupported(ts int64, version int16) bool {
	since, known := specialSince[ts]
	return ts >= 0 || known && version >= since
}

func (s *Server) handleListOffsets(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	// A partition named twice is INVALID_REQUEST, answered once (Kafka).
	named := map[fsm.TopicPartition]int{} // set to 0 once answered
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			named[fsm.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]++
		}
	}
	self := s.cluster.Self().ID
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		permitted := s.allowedTopic(r, kmsg.ACLOperationDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			tp := fsm.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			times := named[tp]
			if times == 0 {
				continue
			}
			named[tp] = 0
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			if !permitted {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if times > 1 {
				sp.ErrorCode = kerr.InvalidRequest.Code
			} else if !timestampSupported(rp.Timestamp, req.Version) {
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			} else if leader, ok := s.backend.PartitionLeader(rt.Topic, rp.Partition); !ok {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if leader != self {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			} else {
				sp.Offset, sp.Timestamp, sp.ErrorCode = s.listOffset(ctx, rt.Topic, rp.Partition, rp.Timestamp)
				if req.IsolationLevel == readCommitted && sp.ErrorCode == 0 && s.txnBackend != nil && rp.Timestamp != earliestTimestamp && rp.Timestamp != earliestLocalTimestamp {
					// read_committed reads up to the last stable offset:
					// latest is it, and a lookup finds nothing past it.
					if lso, err := s.txnBackend.LastStableOffset(rt.Topic, rp.Partition); err == nil {
						switch {
						case rp.Timestamp == latestTimestamp:
							sp.Offset = lso
						case sp.Offset >= lso:
							sp.Offset, sp.Timestamp = -1, -1
						}
					}
				}
			}
			if sp.ErrorCode == 0 && sp.Offset >= 0 {
				// An offset found carries epoch 0, as it always did
				// here (kgate stamps no leader epoch into batches);
				// -1 stays Kafka's answer without an offset.
				sp.LeaderEpoch = 0
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}

func (s *Server) listOffset(ctx context.Context, topic string, p int32, ts int64) (offset, timestamp int64, code int16) {
	switch ts {
	case latestTimestamp, earliestTimestamp, earliestLocalTimestamp:
		start, end, err := s.backend.Offsets(ctx, topic, p)
		if err != nil {
			return -1, -1, ErrorCode(err)
		}
		if ts == latestTimestamp {
			return end, -1, 0
		}
		return start, -1, 0
	case maxTimestamp:
		off, t, err := s.backend.MaxTimestampOffset(ctx, topic, p)
		return off, t, ErrorCode(err)
	}
	off, t, err := s.backend.OffsetForTime(ctx, topic, p, ts)
	return off, t, ErrorCode(err)
}
