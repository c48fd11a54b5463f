package gateway

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/gateway/authz"
)

const authorizedOpsUnset = -2147483648

func (s *Server) handleMetadata(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.MetadataRequest)
	if len(req.Topics) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	a := s.access(r)
	// During an election (or while a follower suspects its leader is
	// gone, or a new leader catches up) every partition would read
	// LEADER_NOT_AVAILABLE or name a dead node, and clients back off for
	// their metadata refresh interval (seconds); wait for the winner
	// instead. A follower names its leader only once it heard from it
	// after the request came (a client asks right after its connection to
	// a dying leader broke); the leader names itself only once a majority
	// confirmed it still leads. A node restarted a moment ago would report
	// the topics of its last snapshot until it has replayed its log.
	leads := s.servesAsLeader()
	return later(func() kmsg.Response {
		if leads && s.confirmedLeader(ctx) {
			return s.metadata(ctx, req, a)
		}
		s.awaitFreshLeader(ctx)
		if _, ok := s.cluster.ServingLeader(); !ok && s.cutOff(r) {
			return cutOffAnswer{}
		}
		s.awaitCaughtUp(ctx)
		return s.metadata(ctx, req, a)
	})
}

// metadata answers req for a client with access a: topics it may not
// describe are left out of a listing of all and answered
// TOPIC_AUTHORIZATION_FAILED when named, as Kafka does.
func (s *Server) metadata(ctx context.Context, req *kmsg.MetadataRequest, a access) kmsg.Response {
	resp := s.metadataOf(ctx, req, a)
	s.listPartitionLeaders(resp)
	return resp
}

// listPartitionLeaders adds to the brokers any partition leader Brokers
// leaves out (a restarted former Raft leader that still leads partitions
// of the Iggy backend): a client cannot produce to a leader it has no
// address for.
func (s *Server) listPartitionLeaders(resp *kmsg.MetadataResponse) {
	listed := map[int32]bool{}
	for _, b := range resp.Brokers {
		listed[b.NodeID] = true
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Leader < 0 || listed[p.Leader] {
				continue
			}
			listed[p.Leader] = true
			if n, ok := s.node(p.Leader); ok {
				host, port := brokerAddr(n)
				resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: n.ID, Host: host, Port: port})
			}
		}
	}
}

// topicSyncWait bounds how long a listing waits for the backend's topic
// list to be refreshed.
const topicSyncWait = time.Second

// allTopics lists every topic, first bringing a backend's cached list up
// to date (TopicSyncer). If that fails (Iggy unreachable), the cached list
// is answered: a listing a moment old beats none.
func (s *Server) allTopics(ctx context.Context) []TopicInfo {
	if ts, ok := s.backend.(TopicSyncer); ok {
		sctx, cancel := context.WithTimeout(ctx, topicSyncWait)
		defer cancel()
		if err := ts.SyncTopics(sctx); err != nil && ctx.Err() == nil {
			s.log.Debug("topic list not refreshed before listing", "err", err)
		}
	}
	return s.backend.Topics()
}

// node finds a node's endpoint among the brokers, then among every live node.
func (s *Server) node(id int32) (cluster.NodeInfo, bool) {
	for _, b := range s.cluster.Brokers() {
		if b.ID == id {
			return b, true
		}
	}
	live, _ := s.cluster.LiveNodes()
	for _, b := range live {
		if b.ID == id {
			return b, true
		}
	}
	return cluster.NodeInfo{}, false
}

func (s *Server) metadataOf(ctx context.Context, req *kmsg.MetadataRequest, a access) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, n := range s.cluster.Brokers() {
		host, port := brokerAddr(n)
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: n.ID, Host: host, Port: port})
	}
	cid := s.cluster.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = s.controllerID()
	if a.cluster(kmsg.ACLOperationDescribe) {
		resp.AuthorizedOperations = a.ops(req.IncludeClusterAuthorizedOperations, kmsg.ACLResourceTypeCluster, authz.ClusterName)
	}
	topicMetadata := func(t TopicInfo) kmsg.MetadataResponseTopic {
		mt := s.topicMetadata(t)
		mt.AuthorizedOperations = a.ops(req.IncludeTopicAuthorizedOperations, kmsg.ACLResourceTypeTopic, t.Name)
		return mt
	}

	// v0 and a null list (v1+) both mean every topic.
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, t := range s.allTopics(ctx) {
			if a.topic(kmsg.ACLOperationDescribe, t.Name) {
				resp.Topics = append(resp.Topics, topicMetadata(t))
			}
		}
		return resp
	}
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	// A topic named twice is answered once, as Kafka answers (it takes the
	// request's topics as a set).
	type topicKey struct {
		name  string
		named bool
		id    [16]byte
	}
	answered := make(map[topicKey]bool, len(req.Topics))
	for _, rt := range req.Topics {
		key := topicKey{id: rt.TopicID}
		if rt.Topic != nil {
			key = topicKey{name: *rt.Topic, named: true}
		}
		if answered[key] {
			continue
		}
		answered[key] = true
		var name string
		switch {
		case rt.Topic != nil:
			name = *rt.Topic
		case rt.TopicID != [16]byte{}:
			n, ok := s.backend.TopicName(rt.TopicID)
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			name = n
			if !a.topic(kmsg.ACLOperationDescribe, name) {
				// Topic ids are not secret; the name stays hidden.
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		mt := s.lookupTopic(ctx, name, autoCreate, a)
		if mt.ErrorCode == 0 {
			mt.AuthorizedOperations = a.ops(req.IncludeTopicAuthorizedOperations, kmsg.ACLResourceTypeTopic, name)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

func (s *Server) lookupTopic(ctx context.Context, name string, autoCreate bool, a access) kmsg.MetadataResponseTopic {
	fail := func(code int16) kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		mt.ErrorCode = code
		return mt
	}
	// Whether the topic exists is not disclosed to who may not describe it.
	if !a.topic(kmsg.ACLOperationDescribe, name) {
		return fail(kerr.TopicAuthorizationFailed.Code)
	}
	if !validTopicName(name) {
		return fail(kerr.InvalidTopicException.Code)
	}
	if t, ok := s.backend.Topic(name); ok {
		return s.topicMetadata(t)
	}
	if !autoCreate {
		return fail(kerr.UnknownTopicOrPartition.Code)
	}
	if !a.cluster(kmsg.ACLOperationCreate) && !a.topic(kmsg.ACLOperationCreate, name) {
		return fail(kerr.TopicAuthorizationFailed.Code)
	}
	if code := s.autoCreateTopic(ctx, name); code != 0 && code != kerr.TopicAlreadyExists.Code {
		s.log.Debug("auto-create topic", "topic", name, "err", kerr.ErrorForCode(code))
		// Kafka answers a topic being created elsewhere as not yet led.
		return fail(kerr.LeaderNotAvailable.Code)
	}
	if t, ok := s.backend.Topic(name); ok {
		return s.topicMetadata(t)
	}
	return fail(kerr.LeaderNotAvailable.Code)
}

// autoCreateTopic creates a topic as a CreateTopics request would, on the
// leader (a follower forwards it, as Kafka brokers forward auto-creation to
// the controller).
func (s *Server) autoCreateTopic(ctx context.Context, name string) int16 {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = int32(forwardTimeout / time.Millisecond)
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, s.cfg.DefaultPartitions, -1
	req.Topics = append(req.Topics, t)
	out := s.onLeader(ctx, req, false, func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		resp.Topics = append(resp.Topics, s.createTopic(ctx, req, t, false))
		return resp
	})
	resp, ok := out.(*kmsg.CreateTopicsResponse)
	if !ok || len(resp.Topics) != 1 {
		return kerr.UnknownServerError.Code
	}
	return resp.Topics[0].ErrorCode
}

func (s *Server) topicMetadata(t TopicInfo) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.AuthorizedOperations = authorizedOpsUnset
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, t.Partitions)
	replicas, isr := s.cluster.Replicas()
	for p := int32(0); p < t.Partitions; p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		leader, ok := s.backend.PartitionLeader(t.Name, p)
		if !ok || leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			leader = -1
		}
		mp.Leader = leader
		mp.LeaderEpoch = s.cluster.LeaderEpoch()
		mp.Replicas, mp.ISR, mp.OfflineReplicas = replicas, isr, offline(replicas, isr)
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func offline(replicas, isr []int32) []int32 {
	out := []int32{}
	for _, r := range replicas {
		found := false
		for _, i := range isr {
			found = found || i == r
		}
		if !found {
			out = append(out, r)
		}
	}
	return out
}
