package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

func (s *Server) handleAddPartitionsToTxn(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	for _, tx := range req.Transactions {
		for _, t := range tx.Topics {
			n += len(t.Partitions)
		}
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	a := s.access(r)
	if req.Version >= 4 && !a.cluster(kmsg.ACLOperationClusterAction) {
		// The batched form is the brokers' own (KIP-890 verification).
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	if req.Version < 4 {
		if code, denied := deniedTxnPartitions(a, req); denied {
			for _, t := range req.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, code(t.Topic)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return now(resp)
		}
	}
	return later(func() kmsg.Response {
		if req.Version < 4 {
			parts := txnPartitions(req.Topics, func(t kmsg.AddPartitionsToTxnRequestTopic) (string, []int32) { return t.Topic, t.Partitions })
			codes, code := s.txns.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts)
			code = fencedAs(code, req.Version, 2)
			i := 0
			for _, t := range req.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, partitionCode(codes, i, code)
					rt.Partitions = append(rt.Partitions, rp)
					i++
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		}
		// The batched form: several transactions, each added or, with
		// verify_only, only checked.
		for _, tx := range req.Transactions {
			parts := txnPartitions(tx.Topics, func(t kmsg.AddPartitionsToTxnRequestTransactionTopic) (string, []int32) {
				return t.Topic, t.Partitions
			})
			var codes []int16
			var code int16
			if tx.VerifyOnly {
				codes, code = s.txns.VerifyPartitions(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts)
			} else {
				codes, code = s.txns.AddPartitions(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts)
			}
			rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rtx.TransactionalID = tx.TransactionalID
			i := 0
			for _, t := range tx.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, partitionCode(codes, i, code)
					rt.Partitions = append(rt.Partitions, rp)
					i++
				}
				rtx.Topics = append(rtx.Topics, rt)
			}
			resp.Transactions = append(resp.Transactions, rtx)
		}
		return resp
	})
}

// deniedTxnPartitions applies Kafka's authorization of a client's
// AddPartitionsToTxn: without WRITE on the transactional id every partition
// gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without WRITE on a topic its
// partitions get TOPIC_AUTHORIZATION_FAILED and the others
// OPERATION_NOT_ATTEMPTED, and nothing is added.
func deniedTxnPartitions(a access, req *kmsg.AddPartitionsToTxnRequest) (func(topic string) int16, bool) {
	if !a.allows(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		return func(string) int16 { return kerr.TransactionalIDAuthorizationFailed.Code }, true
	}
	denied := map[string]bool{}
	for _, t := range req.Topics {
		if !a.topic(kmsg.ACLOperationWrite, t.Topic) {
			denied[t.Topic] = true
		}
	}
	if len(denied) == 0 {
		return nil, false
	}
	return func(topic string) int16 {
		if denied[topic] {
			return kerr.TopicAuthorizationFailed.Code
		}
		return kerr.OperationNotAttempted.Code
	}, true
}

// txnPartitions flattens a request's topics into partitions, in order.
func txnPartitions[T any](topics []T, split func(T) (string, []int32)) []fsm.TopicPartition {
	var out []fsm.TopicPartition
	for _, t := range topics {
		name, ps := split(t)
		for _, p := range ps {
			out = append(out, fsm.TopicPartition{Topic: name, Partition: p})
		}
	}
	return out
}

// partitionCode is the i-th partition's code: the request's code when it
// failed as a whole.
func partitionCode(codes []int16, i int, code int16) int16 {
	if code != 0 || i >= len(codes) {
		return code
	}
	return codes[i]
}
