package gateway

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleCreateTopics(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	if len(req.Topics) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	// CREATE on the cluster allows every topic, else CREATE on each.
	var denied []kmsg.CreateTopicsRequestTopic
	if !s.allowedCluster(r, kmsg.ACLOperationCreate) {
		req.Topics, denied = partitionAllowed(req.Topics, func(t kmsg.CreateTopicsRequestTopic) bool {
			return s.allowedTopic(r, kmsg.ACLOperationCreate, t.Topic)
		})
	}
	// The configs of a created topic are shown only to who may describe
	// them (Kafka's TopicConfigErrorCode, v5+).
	hideConfigs := map[string]bool{}
	for _, t := range req.Topics {
		hideConfigs[t.Topic] = !s.allowedTopic(r, kmsg.ACLOperationDescribeConfigs, t.Topic)
	}
	answerDenied := func(resp kmsg.Response) kmsg.Response {
		cr, ok := resp.(*kmsg.CreateTopicsResponse)
		if !ok {
			return resp
		}
		for i := range cr.Topics {
			if rt := &cr.Topics[i]; rt.ErrorCode == 0 && hideConfigs[rt.Topic] {
				rt.Configs, rt.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
			}
		}
		for _, t := range denied {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, -1, -1
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			cr.Topics = append(cr.Topics, rt)
		}
		return cr
	}
	if len(req.Topics) == 0 {
		return now(answerDenied(resp))
	}
	return later(func() kmsg.Response {
		return answerDenied(s.viaLeader(ctx, r, func() kmsg.Response {
			seen := map[string]int{}
			for _, t := range req.Topics {
				seen[t.Topic]++
			}
			for _, t := range req.Topics {
				n := seen[t.Topic]
				if n == 0 {
					continue // a name given twice is answered once, as Kafka does
				}
				seen[t.Topic] = 0
				resp.Topics = append(resp.Topics, s.createTopic(ctx, req, t, n > 1))
			}
			return resp
		}))
	})
}

func (s *Server) createTopic(ctx context.Context, req *kmsg.CreateTopicsRequest, t kmsg.CreateTopicsRequestTopic, dup bool) kmsg.CreateTopicsResponseTopic {
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = t.Topic
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	fail := func(code *kerr.Error, msg string) kmsg.CreateTopicsResponseTopic {
		rt.ErrorCode = code.Code
		rt.ErrorMessage = &msg
		return rt
	}
	if dup {
		return fail(kerr.InvalidRequest, "topic named more than once in the request")
	}
	if !validTopicName(t.Topic) {
		return fail(kerr.InvalidTopicException, "topic names are 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'")
	}
	parts := t.NumPartitions
	if parts == -1 {
		parts = s.cfg.DefaultPartitions
	}
	if len(t.ReplicaAssignment) > 0 {
		return fail(kerr.InvalidRequest, "manual replica assignment is not supported")
	}
	if parts <= 0 || parts > 100000 {
		return fail(kerr.InvalidPartitions, "number of partitions must be between 1 and 100000")
	}
	// Every partition's replicas are the Raft voters, live or not (what
	// Metadata reports), so the bound is their number. Kafka's is the same
	// in kind: the registered brokers, fenced ones included (its replica
	// placer refuses only more replicas than registered brokers, or no
	// unfenced broker at all), so an RF of 3 on three nodes is not refused
	// while one of them is down.
	replicas := replicationFactor(s.cluster)
	if rf := t.ReplicationFactor; rf != -1 && (rf < 1 || int(rf) > replicas) {
		return fail(kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor must be -1 or between 1 and %d (the voters of the cluster)", replicas))
	}
	cfg := map[string]string{}
	for _, c := range t.Configs {
		if c.Value != nil {
			cfg[c.Name] = *c.Value
		}
	}
	if err := s.checkTopicConfigs(cfg); err != nil {
		return fail(kerr.InvalidConfig, err.Error())
	}
	if _, exists := s.backend.Topic(t.Topic); exists {
		return fail(kerr.TopicAlreadyExists, "topic '"+t.Topic+"' already exists")
	}
	if !req.ValidateOnly {
		if err := s.backend.CreateTopic(ctx, TopicSpec{Name: t.Topic, Partitions: parts, Configs: cfg}); err != nil {
			rt.ErrorCode = ErrorCode(err)
			msg := err.Error()
			rt.ErrorMessage = &msg
			return rt
		}
		if info, ok := s.backend.Topic(t.Topic); ok {
			rt.TopicID = info.ID
		}
	}
	rt.NumPartitions = parts
	rt.ReplicationFactor = int16(replicas)
	for _, name := range topicConfigNames() {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = name
		v, set := cfg[name]
		if !set && topicConfigs[name].internal() {
			continue
		}
		if !set {
			v = topicConfigs[name].def
			c.Source = 5 // DEFAULT_CONFIG
		} else {
			c.Source = 1 // DYNAMIC_TOPIC_CONFIG
		}
		c.Value = &v
		rt.Configs = append(rt.Configs, c)
	}
	return rt
}

// replicationFactor is the number of replicas every partition has: the
// Raft voters (at least 1).
func replicationFactor(c Cluster) int {
	replicas, _ := c.Replicas()
	return max(1, len(replicas))
}
