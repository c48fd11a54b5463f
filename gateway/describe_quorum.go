package gateway

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
)

// DescribeQuorum reports kgate's own Raft quorum in the shape Kafka gives
// its KRaft metadata quorum (topic __cluster_metadata, partition 0): the
// leader, the term as leader epoch, the commit index as high watermark,
// and per voter its log end (last Raft index), when it last heard from the
// leader and when it was last caught up. Only the leader can say that for
// every voter, so followers forward; the leader asks each voter for its
// own numbers over the cluster's link (a request marked quorumProbeClientID
// that the voter answers about itself alone; only the cluster's own link
// carries such a probe, so no client can forge one). Non-voters (nodes
// catching up after a join, before the leader promotes them) are Kafka's
// observers: probed the same way, listed under Observers.

const (
	metadataTopic       = "__cluster_metadata"
	quorumProbeClientID = "kgate-quorum-probe"
	quorumProbeTimeout  = 2 * time.Second
	raftListenerName    = "RAFT"
)

// quorumCluster is what DescribeQuorum reads beyond Cluster; *cluster.Node
// provides it.
type quorumCluster interface {
	Voters() []cluster.Voter
	NonVoters() []cluster.Voter
	RaftState() cluster.RaftState
}

func (s *Server) handleDescribeQuorum(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeQuorumRequest)
	if !s.allowedCluster(r, kmsg.ACLOperationDescribe) {
		resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	qc, ok := s.cluster.(quorumCluster)
	if !ok || !isMetadataPartition(req) {
		// As Kafka: every partition asked for is unknown.
		resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
		for _, rt := range req.Topics {
			t := quorumTopic(kerr.UnknownTopicOrPartition.Code)
			t.Topic, t.Partitions = rt.Topic, nil
			for _, rp := range rt.Partitions {
				p := quorumTopic(kerr.UnknownTopicOrPartition.Code).Partitions[0]
				p.Partition = rp.Partition
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return now(resp)
	}
	if r.Forwarded && r.ClientID != nil && *r.ClientID == quorumProbeClientID {
		return now(s.quorumSelf(req, qc))
	}
	return later(func() kmsg.Response {
		return s.viaLeader(ctx, r, func() kmsg.Response { return s.describeQuorum(ctx, req, qc) })
	})
}

func isMetadataPartition(req *kmsg.DescribeQuorumRequest) bool {
	return len(req.Topics) == 1 && req.Topics[0].Topic == metadataTopic &&
		len(req.Topics[0].Partitions) == 1 && req.Topics[0].Partitions[0].Partition == 0
}

func quorumTopic(code int16) kmsg.DescribeQuorumResponseTopic {
	t := kmsg.NewDescribeQuorumResponseTopic()
	t.Topic = metadataTopic
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.ErrorCode = code
	p.LeaderID = -1
	if code != 0 {
		msg := kerr.TypedErrorForCode(code).Description
		p.ErrorMessage = &msg
	}
	t.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{p}
	return t
}

// quorumSelf answers a leader's probe: this node's own log end and contact.
func (s *Server) quorumSelf(req *kmsg.DescribeQuorumRequest, qc quorumCluster) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	st := qc.RaftState()
	t := quorumTopic(0)
	p := &t.Partitions[0]
	p.LeaderEpoch = int32(st.Term)
	p.HighWatermark = int64(st.CommitIndex)
	v := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	v.ReplicaID = s.cluster.Self().ID
	v.LogEndOffset = int64(st.LastIndex)
	if !st.LastContact.IsZero() {
		v.LastFetchTimestamp = st.LastContact.UnixMilli()
		// Caught up as of that contact when it held everything the leader
		// had committed by then; otherwise when it last was is unknown.
		if st.LastIndex >= st.CommitIndex {
			v.LastCaughtUpTimestamp = v.LastFetchTimestamp
		}
	}
	p.CurrentVoters = []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{v}
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{t}
	return resp
}

// describeQuorum is the leader's full answer.
func (s *Server) describeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest, qc quorumCluster) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	st := qc.RaftState()
	self := s.cluster.Self().ID
	if !st.Leader {
		resp.Topics = []kmsg.DescribeQuorumResponseTopic{quorumTopic(kerr.NotLeaderForPartition.Code)}
		return resp
	}
	t := quorumTopic(0)
	p := &t.Partitions[0]
	p.LeaderID = self

	brokers := map[int32]cluster.NodeInfo{}
	for _, b := range s.cluster.Brokers() {
		brokers[b.ID] = b
	}
	voters, observers := qc.Voters(), qc.NonVoters()
	all := append(append([]cluster.Voter(nil), voters...), observers...)
	states := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, len(all))
	var wg sync.WaitGroup
	for i, v := range all {
		rs := &states[i]
		*rs = kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		rs.ReplicaID = v.ID
		rs.LogEndOffset = -1
		if v.ID == self {
			continue // after the probes, so that no voter is ahead of it
		}
		to, known := brokers[v.ID]
		if !known {
			continue // not alive to gossip: unknown
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, ok := s.probeVoter(ctx, to, req.GetVersion()); ok && got.ReplicaID == v.ID {
				rs.LogEndOffset, rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = got.LogEndOffset, got.LastFetchTimestamp, got.LastCaughtUpTimestamp
			}
		}()
	}
	wg.Wait()
	st = qc.RaftState()
	p.LeaderEpoch = int32(st.Term)
	p.HighWatermark = int64(st.CommitIndex)
	for i := range states {
		if states[i].ReplicaID == self {
			nowMs := time.Now().UnixMilli() // the leader is always caught up with itself
			states[i].LogEndOffset, states[i].LastFetchTimestamp, states[i].LastCaughtUpTimestamp = int64(st.LastIndex), nowMs, nowMs
		}
	}
	p.CurrentVoters = states[:len(voters)]
	p.Observers = states[len(voters):] // Kafka lists no observer's endpoints under Nodes
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{t}
	for _, v := range voters {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = v.ID
		if host, port, err := net.SplitHostPort(v.Address); err == nil {
			if pn, err := strconv.ParseUint(port, 10, 16); err == nil {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = raftListenerName, host, uint16(pn)
				n.Listeners = append(n.Listeners, l)
			}
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp
}

// probeVoter asks one voter for its own replica state.
func (s *Server) probeVoter(ctx context.Context, to cluster.NodeInfo, version int16) (kmsg.DescribeQuorumResponseTopicPartitionReplicaState, bool) {
	var none kmsg.DescribeQuorumResponseTopicPartitionReplicaState
	ctx, cancel := context.WithTimeout(ctx, quorumProbeTimeout)
	defer cancel()
	nc, err := s.cluster.DialPeer(ctx, to)
	if err != nil {
		return none, false
	}
	defer nc.Close()
	pc := &peerConn{nc: nc, br: bufio.NewReader(nc), fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID(quorumProbeClientID))}
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(version)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	kresp, _, err := pc.exchange(ctx, req)
	if err != nil {
		return none, false
	}
	resp := kresp.(*kmsg.DescribeQuorumResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return none, false
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.CurrentVoters) != 1 {
		return none, false
	}
	return p.CurrentVoters[0], true
}
