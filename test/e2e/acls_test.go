package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestACLsKafkaAclsThroughFollower: on a three-node cluster with
// --authorizer, Kafka's own kafka-acls.sh, bootstrapped through a
// follower, adds, lists and removes ACLs; a franz-go client authenticated
// with SCRAM-SHA-512 is refused, then allowed, then refused again; every
// node lists the same bindings (they are replicated).
func TestACLsKafkaAclsThroughFollower(t *testing.T) {
	tools := newKafkaTools(t)
	tools.subst = map[string]string{}
	work := t.TempDir()
	users := writeFile(t, filepath.Join(work, "users"), "admin:admin-secret\n")
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			n.args = append(n.args, "--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-512", "--sasl-plain-users-file", users,
				"--authorizer", "--super-users", "User:admin")
		}
	})
	leader := c.leader()
	var follower *clusterNode
	for _, id := range c.ids() {
		if id != leader {
			follower = c.node(id)
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adminOpt := kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(follower.kafka()), adminOpt)
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}}); err != nil {
		t.Fatalf("adding alice: %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "payments"); err != nil {
		t.Fatalf("creating payments: %v", err)
	}

	adminProps := writeFile(t, filepath.Join(tools.tmp, "admin.properties"), "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="+
		jaas("plain.PlainLoginModule", "admin", "admin-secret")+"\n")
	acls := func(args ...string) string {
		t.Helper()
		return tools.run(follower.kafka(), "kafka-acls.sh", append([]string{"--bootstrap-server", docBootstrap, "--command-config", adminProps}, args...)...)
	}

	alice := func(opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(follower.kafka()),
			kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
			kgo.RecordRetries(2), kgo.RequestRetries(2), kgo.DefaultProduceTopic("payments")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	produce := func(cl *kgo.Client, v string) error {
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr()
	}

	if err := produce(alice(), "before"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice before any ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	acls("--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Read", "--topic", "payments")
	acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "payments-", "--resource-pattern-type", "prefixed")
	out := acls("--list", "--topic", "payments")
	for _, want := range []string{"principal=User:alice", "operation=WRITE", "operation=READ", "permissionType=ALLOW", "patternType=LITERAL"} {
		if !strings.Contains(out, want) {
			t.Errorf("kafka-acls --list lacks %q:\n%s", want, out)
		}
	}
	// MATCH: the bindings that apply to group payments-app.
	if out := acls("--list", "--group", "payments-app", "--resource-pattern-type", "match"); !strings.Contains(out, "name=payments-, patternType=PREFIXED") {
		t.Errorf("kafka-acls --list --resource-pattern-type match lacks the prefixed binding:\n%s", out)
	}
	// Replicated: every node lists the same bindings.
	for _, id := range c.ids() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.node(id).kafka()), adminOpt)
		if err != nil {
			t.Fatal(err)
		}
		var described kadm.DescribeACLsResults
		for deadline := time.Now().Add(10 * time.Second); ; {
			described, err = kadm.NewClient(cl).DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
			if err == nil && len(described) == 1 && len(described[0].Described) == 3 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond) // poll interval while node id applies the change
		}
		cl.Close()
		if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 3 {
			t.Fatalf("node %d lists: %v %+v", id, err, described)
		}
	}

	producer := alice()
	if err := produce(producer, "allowed"); err != nil {
		t.Fatalf("alice with WRITE: %v", err)
	}
	consumer := alice(kgo.ConsumeTopics("payments"), kgo.ConsumerGroup("payments-app"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := false; !got; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("alice consuming in group payments-app: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = got || string(r.Value) == "allowed" })
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice committing: %v", err)
	}

	acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "payments")
	if out := acls("--list", "--topic", "payments"); strings.Contains(out, "operation=WRITE") || !strings.Contains(out, "operation=READ") {
		t.Errorf("after --remove of WRITE:\n%s", out)
	}
	if err := produce(producer, "after"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice after WRITE was removed: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
