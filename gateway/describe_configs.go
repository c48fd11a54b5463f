package gateway

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs resource types and config sources.
const (
	resourceTopic  = 2
	resourceBroker = 4

	sourceDynamicTopic = 1
	sourceStaticBroker = 4
	sourceDefault      = 5
)

func (s *Server) handleDescribeConfigs(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	if len(req.Resources) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		want := func(name string) bool {
			if res.ConfigNames == nil {
				return true
			}
			for _, n := range res.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		add := func(name, value string, typ int8, source int8, readOnly bool) {
			if !want(name) {
				return
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = name
			v := value
			c.Value = &v
			c.ReadOnly = readOnly
			c.Source = kmsg.ConfigSource(source)
			c.IsDefault = source == sourceDefault
			c.ConfigType = kmsg.ConfigType(typ)
			rr.Configs = append(rr.Configs, c)
		}
		if ok, code := s.configResourceAllowed(r, kmsg.ACLOperationDescribeConfigs, res.ResourceType, res.ResourceName); !ok {
			rr.ErrorCode = code
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		switch res.ResourceType {
		case resourceTopic:
			if !validTopicName(res.ResourceName) {
				rr.ErrorCode = kerr.InvalidTopicException.Code // "" included, as Kafka answers
				break
			}
			info, ok := s.backend.Topic(res.ResourceName)
			if !ok {
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			for _, name := range topicConfigNames() {
				tc := topicConfigs[name]
				if v, set := info.Configs[name]; set {
					add(name, v, tc.typ, sourceDynamicTopic, false)
				} else if !tc.internal() {
					add(name, tc.def, tc.typ, sourceDefault, false)
				}
			}
		case resourceBroker:
			id, err := strconv.Atoi(res.ResourceName)
			if res.ResourceName != "" && (err != nil || int32(id) != s.cluster.Self().ID) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				break
			}
			if res.ResourceName == "" {
				// The cluster-wide dynamic defaults, of which kgate has
				// none: an empty list, as Kafka answers before any is set.
				break
			}
			add("auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), 1, sourceStaticBroker, true)
			add("num.partitions", strconv.Itoa(int(s.cfg.DefaultPartitions)), 3, sourceStaticBroker, true)
			add("message.max.bytes", strconv.Itoa(s.cfg.MaxMessageBytes), 3, sourceStaticBroker, true)
			add("socket.request.max.bytes", strconv.Itoa(int(s.cfg.MaxFrameBytes)), 3, sourceStaticBroker, true)
			// A topic's replicas, group offsets' too, are the Raft voters:
			// what a replication factor of -1 gives.
			rf := strconv.Itoa(replicationFactor(s.cluster))
			add("default.replication.factor", rf, 3, sourceDefault, true)
			add("offsets.topic.replication.factor", rf, 4, sourceDefault, true)
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			msg := "kgate describes topic and broker configs only"
			rr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return now(resp)
}
