package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// handleDescribeTransactions reports transactional ids' state from the
// coordinator, the Raft leader (kafka-transactions describe).
func (s *Server) handleDescribeTransactions(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	if len(req.TransactionalIDs) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		v, code := s.txns.Describe(id)
		st.ErrorCode = code
		if code == 0 {
			st.State, st.TimeoutMillis, st.ProducerID, st.ProducerEpoch = v.State.String(), v.TimeoutMs, v.ProducerID, v.Epoch
			st.StartTimestamp = -1
			if v.State == fsm.TxnOngoing {
				st.StartTimestamp = v.StartMs
			}
			for _, tp := range v.Partitions {
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					st.Topics = append(st.Topics, t)
				}
				st.Topics[len(st.Topics)-1].Partitions = append(st.Topics[len(st.Topics)-1].Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return now(resp)
}
