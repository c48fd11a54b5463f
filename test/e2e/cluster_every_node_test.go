package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterEveryNodeAnswers: a client may send any request to any node
// (ARCHITECTURE rule 10). Through each node of a three-node cluster, leader
// and followers alike: the README's first command (kcat producing to a new
// topic, librdkafka's default Metadata auto-creation) succeeds, and
// CreateTopics, CreatePartitions, IncrementalAlterConfigs and DeleteTopics
// give the leader's answer, their effect visible to the next request on the
// same connection.
func TestClusterEveryNodeAnswers(t *testing.T) {
	requireCommand(t, "kcat", repoRoot(t), "kcat", "-V")
	c := startCluster(t)
	leader := c.leader()
	for _, n := range c.nodes {
		role := "follower"
		if n.id == leader {
			role = "leader"
		}
		t.Run(fmt.Sprintf("node%d-%s", n.id, role), func(t *testing.T) {
			topic := fmt.Sprintf("demo-%d", n.id)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// Exactly the README's command, pointed at this node.
			cmd := exec.CommandContext(ctx, "bash", "-c", fmt.Sprintf("echo hello | kcat -b %s -t %s -P", n.kafka(), topic))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kcat -P through node %d: %v\n%s", n.id, err, out)
			}
			out, err := exec.CommandContext(ctx, "kcat", "-b", n.kafka(), "-t", topic, "-C", "-o", "beginning", "-c", "1", "-e", "-q").Output()
			if err != nil || strings.TrimSpace(string(out)) != "hello" {
				t.Fatalf("kcat -C through node %d: %q, %v", n.id, out, err)
			}
			adminThroughNode(t, ctx, n)
		})
	}
}

// adminThroughNode sends topic administration to node n only (not to the
// controller Metadata names, where Kafka clients send it) and checks each
// answer and its effect through the same node.
func adminThroughNode(t *testing.T, ctx context.Context, n *clusterNode) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafka()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	b := cl.Broker(int(n.id))
	topic := fmt.Sprintf("admin-%d", n.id)
	partitions := func() int {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		req.AllowAutoTopicCreation = false
		resp, err := req.RequestWith(ctx, b)
		if err != nil {
			t.Fatalf("metadata through node %d: %v", n.id, err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			return -1
		}
		return len(resp.Topics[0].Partitions)
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 2, -1
	create.Topics = append(create.Topics, ct)
	cresp, err := create.RequestWith(ctx, b)
	if err != nil || len(cresp.Topics) != 1 || cresp.Topics[0].ErrorCode != 0 || cresp.Topics[0].NumPartitions != 2 {
		t.Fatalf("CreateTopics through node %d: %+v, %v", n.id, cresp, err)
	}
	if got := partitions(); got != 2 {
		t.Fatalf("after CreateTopics through node %d it reports %d partitions, want 2", n.id, got)
	}
	if cresp, err = create.RequestWith(ctx, b); err != nil || cresp.Topics[0].ErrorCode != 36 { // TOPIC_ALREADY_EXISTS
		t.Fatalf("second CreateTopics through node %d: %+v, %v", n.id, cresp, err)
	}

	grow := kmsg.NewPtrCreatePartitionsRequest()
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = topic, 3
	grow.Topics = append(grow.Topics, gt)
	if gresp, err := grow.RequestWith(ctx, b); err != nil || gresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions through node %d: %+v, %v", n.id, gresp, err)
	}
	if got := partitions(); got != 3 {
		t.Fatalf("after CreatePartitions through node %d it reports %d partitions, want 3", n.id, got)
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "retention.ms", kmsg.StringPtr("4242000")
	res.Configs = append(res.Configs, rc)
	alter.Resources = append(alter.Resources, res)
	if aresp, err := alter.RequestWith(ctx, b); err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs through node %d: %+v, %v", n.id, aresp, err)
	}
	describe := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{"retention.ms"}
	describe.Resources = append(describe.Resources, dr)
	dresp, err := describe.RequestWith(ctx, b)
	if err != nil || len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 1 ||
		dresp.Resources[0].Configs[0].Value == nil || *dresp.Resources[0].Configs[0].Value != "4242000" {
		t.Fatalf("DescribeConfigs through node %d right after the change: %+v, %v", n.id, dresp, err)
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics = append(del.Topics, dt)
	del.TopicNames = []string{topic}
	if dresp, err := del.RequestWith(ctx, b); err != nil || dresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics through node %d: %+v, %v", n.id, dresp, err)
	}
	if got := partitions(); got != -1 {
		t.Fatalf("after DeleteTopics through node %d it still reports the topic (%d partitions)", n.id, got)
	}
}
