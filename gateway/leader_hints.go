package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
)

// KIP-951: a NOT_LEADER_OR_FOLLOWER answer to Produce (v10+) or Fetch
// (v16+) names the partition's current leader and epoch, and the answer
// lists that leader's endpoint, so a client moves to it at once instead of
// waiting for its next metadata refresh. Clients act on the hint only when
// its epoch is newer than the one they know, which the Raft term is after
// every election.

// Versions that carry CurrentLeader and NodeEndpoints (Kafka's
// ProduceResponse.json and FetchResponse.json).
const (
	produceLeaderHintVersion = 10
	fetchLeaderHintVersion   = 16
)

// leaderHints collects the endpoints named by one response's hints.
type leaderHints struct {
	s     *Server
	epoch int32
	nodes map[int32]cluster.NodeInfo
	order []int32
}

func (s *Server) newLeaderHints() *leaderHints {
	return &leaderHints{s: s, epoch: s.cluster.LeaderEpoch(), nodes: map[int32]cluster.NodeInfo{}}
}

// leader returns the partition's leader and epoch for a hint, noting its
// endpoint; (-1, -1) when there is none now or its address is unknown.
func (h *leaderHints) leader(topic string, partition int32) (int32, int32) {
	id, ok := h.s.backend.PartitionLeader(topic, partition)
	if !ok || id < 0 {
		return -1, -1
	}
	if _, seen := h.nodes[id]; !seen {
		n, found := h.s.node(id)
		if !found {
			return -1, -1
		}
		h.nodes[id] = n
		h.order = append(h.order, id)
	}
	return id, h.epoch
}

func (h *leaderHints) each(fn func(id int32, host string, port int32)) {
	for _, id := range h.order {
		host, port := brokerAddr(h.nodes[id])
		fn(id, host, port)
	}
}

// addProduceLeaderHints fills CurrentLeader and NodeEndpoints of resp.
func (s *Server) addProduceLeaderHints(resp *kmsg.ProduceResponse) {
	if resp.Version < produceLeaderHintVersion {
		return
	}
	var h *leaderHints
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if h == nil {
				h = s.newLeaderHints()
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = h.leader(t.Topic, p.Partition)
		}
	}
	if h != nil {
		h.each(func(id int32, host string, port int32) {
			b := kmsg.NewProduceResponseBroker()
			b.NodeID, b.Host, b.Port = id, host, port
			resp.Brokers = append(resp.Brokers, b)
		})
	}
}

// addFetchLeaderHints fills CurrentLeader and NodeEndpoints of resp; names
// are the request's (from v13 topics go by id).
func (s *Server) addFetchLeaderHints(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	if resp.Version < fetchLeaderHintVersion {
		return
	}
	var h *leaderHints
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		name := t.Topic
		if req.Version >= 13 {
			name, _ = s.backend.TopicName(t.TopicID)
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if h == nil {
				h = s.newLeaderHints()
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = h.leader(name, p.Partition)
		}
	}
	if h != nil {
		h.each(func(id int32, host string, port int32) {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port = id, host, port
			resp.Brokers = append(resp.Brokers, b)
		})
	}
}

// While an election runs, or a new leader catches up, partitions have no
// leader (PartitionLeader -1). A produce or fetch answered
// NOT_LEADER_OR_FOLLOWER then sends the client to its metadata refresh,
// which it may only do seconds later; waiting (bounded by LeaderWait) for
// the leader instead answers it as the leader would, or with a hint naming
// the new leader.

// awaitProduceLeaders waits while a partition of req has no leader.
func (s *Server) awaitProduceLeaders(ctx context.Context, req *kmsg.ProduceRequest) {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if s.leaderless(t.Topic, p.Partition) {
				s.awaitLeader(ctx)
				return
			}
		}
	}
}

// awaitFetchLeaders waits while a partition of req has no leader.
func (s *Server) awaitFetchLeaders(ctx context.Context, req *kmsg.FetchRequest) {
	if s.fetchLeaderless(req) {
		s.awaitLeader(ctx)
	}
}

// fetchLeaderless reports whether a partition of req has no leader.
func (s *Server) fetchLeaderless(req *kmsg.FetchRequest) bool {
	for _, t := range req.Topics {
		name := t.Topic
		if req.Version >= 13 {
			name, _ = s.backend.TopicName(t.TopicID)
		}
		for _, p := range t.Partitions {
			if s.leaderless(name, p.Partition) {
				return true
			}
		}
	}
	return false
}

func (s *Server) leaderless(topic string, partition int32) bool {
	leader, ok := s.backend.PartitionLeader(topic, partition)
	return ok && leader < 0
}
