package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// handleListTransactions lists transactional ids (kafka-transactions list).
// Only the leader, the one coordinator, lists any: the tools ask every
// broker and merge the answers.
func (s *Server) handleListTransactions(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.ListTransactionsRequest)
	if len(req.StateFilters)+len(req.ProducerIDFilters) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	known := map[string]bool{}
	for _, st := range []fsm.TxnState{fsm.TxnEmpty, fsm.TxnOngoing, fsm.TxnCompleteCommit, fsm.TxnCompleteAbort} {
		known[st.String()] = true
	}
	// Kafka's other states exist there but never here: filtering on them
	// matches nothing rather than being unknown.
	for _, st := range []string{"PrepareCommit", "PrepareAbort", "Dead", "PrepareEpochFence"} {
		known[st] = true
	}
	states := map[string]bool{}
	for _, f := range req.StateFilters {
		if !known[f] {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
		}
		states[f] = true
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	nowMs := s.txns.Now().UnixMilli()
	for _, v := range s.txns.List() {
		switch {
		case len(states) > 0 && !states[v.State.String()],
			len(pids) > 0 && !pids[v.ProducerID],
			req.Version >= 1 && req.DurationFilterMillis >= 0 && (v.State != fsm.TxnOngoing || nowMs-v.StartMs <= req.DurationFilterMillis):
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = v.TransactionalID, v.ProducerID, v.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return now(resp)
}
