package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProducerDescriber is a Backend that keeps idempotent producers' state
// per partition.
type ProducerDescriber interface {
	Producers(topic string, partition int32) ([]ProducerState, error)
}

// ProducerState is one idempotent producer of a partition.
type ProducerState struct {
	ID            int64
	Epoch         int16
	LastSequence  int32
	LastTimestamp int64 // ms
	TxnStart      int64 // first offset of its open transaction; -1 when none
	// CoordinatorEpoch is that of the last WriteTxnMarkers marker for it
	// in the partition; -1 when none (kgate's coordinator has no epoch).
	CoordinatorEpoch int32
}

// DescribeProducers reports the idempotence state the partition's replica
// here keeps and the start of each producer's open transaction; the
// coordinator epoch is -1 unless a WriteTxnMarkers marker set one. On Iggy
// the sequences are known where the partition is written (its leader) and
// the open transactions everywhere (iggybackend.Backend.Producers).
func (s *Server) handleDescribeProducers(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	pd, _ := s.backend.(ProducerDescriber)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		permitted := s.allowedTopic(r, kmsg.ACLOperationRead, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			rp.ActiveProducers = []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
			_, known := s.backend.PartitionLeader(t.Topic, p)
			switch {
			case !permitted:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case pd != nil:
				// Every voter holds a replica of the partition's producer
				// state, and Kafka answers from any replica's log: so does
				// every node here (kafka-transactions find-hanging
				// --broker-id asks each broker about its replicas).
				states, err := pd.Producers(t.Topic, p)
				rp.ErrorCode = ErrorCode(err)
				for _, st := range states {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = st.ID, int32(st.Epoch)
					ap.LastSequence, ap.LastTimestamp = st.LastSequence, st.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = st.CoordinatorEpoch, st.TxnStart
					rp.ActiveProducers = append(rp.ActiveProducers, ap)
				}
			}
			if rp.ErrorCode != 0 {
				msg := kerr.TypedErrorForCode(rp.ErrorCode).Description
				rp.ErrorMessage = &msg
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp)
}
