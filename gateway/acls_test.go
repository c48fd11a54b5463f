package gateway_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/authz"
)

// aclNode starts a node that authenticates PLAIN users admin, alice and
// bob (password <user>-pw) and authorizes with the ACLs; admin is a super
// user.
func aclNode(t *testing.T, mod func(*gateway.Config)) *testNode {
	t.Helper()
	return startNodeWith(t, func(c *gateway.Config) {
		c.SASL = &gateway.SASL{Mechanisms: []string{"PLAIN"}, PlainUsers: func(u string) (string, bool) {
			return u + "-pw", u == "admin" || u == "alice" || u == "bob"
		}}
		c.ACLs = c.Credentials.(gateway.ACLStore)
		c.Authorizer = authz.New(c.ACLs, authz.Config{SuperUsers: []string{"User:admin"}})
		if mod != nil {
			mod(c)
		}
	}, true)
}

func userClient(t *testing.T, addr, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, addr, append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: user + "-pw"}.AsMechanism())}, opts...)...)
}

func grant(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(testCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

func issue(t *testing.T, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := cl.Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func code(t *testing.T, c int16, want *kerr.Error, what string) {
	t.Helper()
	if (want == nil && c != 0) || (want != nil && c != want.Code) {
		t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(c), want)
	}
}

// TestACLAPIs: kadm creates, lists (with literal, prefixed and MATCH
// filters) and deletes ACLs; only a principal with ALTER on the cluster may
// change them, DESCRIBE to list them; without an authorizer the ACL APIs
// answer SECURITY_DISABLED.
func TestACLAPIs(t *testing.T) {
	n := aclNode(t, nil)
	admin := kadm.NewClient(userClient(t, n.addr, "admin"))
	alice := kadm.NewClient(userClient(t, n.addr, "alice"))

	grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite))
	grant(t, admin, kadm.NewACLs().Deny("User:*").DenyHosts("10.9.9.9").Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll))
	grant(t, admin, kadm.NewACLs().Allow("User:bob").Groups("billing").Operations(kadm.OpRead))
	// The same binding again is one binding.
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead))

	count := func(b *kadm.ACLBuilder) int {
		t.Helper()
		res, err := admin.DescribeACLs(testCtx(t), b)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("describe: %v", r.Err)
			}
			n += len(r.Described)
		}
		return n
	}
	if got := count(kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); got != 4 {
		t.Errorf("all bindings: %d, want 4", got)
	}
	if got := count(kadm.NewACLs().Topics("orders").Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch)); got != 3 {
		t.Errorf("bindings that apply to topic orders (MATCH): %d, want 3", got)
	}
	if got := count(kadm.NewACLs().Topics("ord").Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternPrefixed)); got != 1 {
		t.Errorf("prefixed ord: %d, want 1", got)
	}

	// Not a super user and no ALTER/DESCRIBE on the cluster.
	res, err := alice.CreateACLs(testCtx(t), kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpAll))
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creating an ACL: %v %+v", err, res)
	}
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType, dreq.Operation, dreq.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	code(t, issue(t, userClient(t, n.addr, "alice"), dreq).(*kmsg.DescribeACLsResponse).ErrorCode, kerr.ClusterAuthorizationFailed, "alice listing ACLs")

	// Invalid bindings are refused one by one.
	creq := kmsg.NewPtrCreateACLsRequest()
	for _, c := range []struct {
		rt   kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
		p    string
	}{
		{kmsg.ACLResourceTypeCluster, "other", kmsg.ACLResourcePatternTypeLiteral, "User:x"},
		{kmsg.ACLResourceTypeTopic, "", kmsg.ACLResourcePatternTypeLiteral, "User:x"},
		{kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeMatch, "User:x"},
		{kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "nobody"},
	} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType, cr.Principal, cr.Host = c.rt, c.name, c.pt, c.p, "*"
		cr.Operation, cr.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		creq.Creations = append(creq.Creations, cr)
	}
	for i, r := range issue(t, userClient(t, n.addr, "admin"), creq).(*kmsg.CreateACLsResponse).Results {
		code(t, r.ErrorCode, kerr.InvalidRequest, "invalid binding "+string(rune('0'+i)))
	}

	// Delete: each filter names what it removed.
	del, err := admin.DeleteACLs(testCtx(t), kadm.NewACLs().Topics("orders").Allow("User:alice").AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	if len(del) != 1 || len(del[0].Deleted) != 2 || del[0].Err != nil {
		t.Fatalf("deleted: %+v", del)
	}
	if got := count(kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); got != 2 {
		t.Errorf("after delete: %d bindings, want 2", got)
	}

	// Without an authorizer: SECURITY_DISABLED, as Kafka.
	off := startNode(t, func(c *gateway.Config) { c.ACLs = c.Credentials.(gateway.ACLStore) })
	described, err := kadm.NewClient(newClient(t, off.addr)).DescribeACLs(testCtx(t), kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described) == 0 || !errors.Is(described[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("describe without an authorizer: %v %+v, want SECURITY_DISABLED", err, described)
	}
}

// TestAuthorizationPerAPI: every API a client calls is refused with
// Kafka's error code until an ACL allows it, then served; a DENY wins over
// a prefixed ALLOW; topics the client may not describe are hidden from a
// listing; the super user needs no ACL.
func TestAuthorizationPerAPI(t *testing.T) {
	n := aclNode(t, nil)
	adminCl := userClient(t, n.addr, "admin")
	admin := kadm.NewClient(adminCl)
	ctx := testCtx(t)
	for _, topic := range []string{"orders", "orders-locked", "secret"} {
		if _, err := admin.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatalf("super user creating %s: %v", topic, err)
		}
	}
	start := kadm.Offsets{}
	start.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := admin.CommitOffsets(ctx, "billing", start); err != nil {
		t.Fatalf("super user committing: %v", err)
	}

	alice := userClient(t, n.addr, "alice")
	raw := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := alice.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	issue(t, alice, kmsg.NewPtrMetadataRequest()) // learn broker 1

	metadata := func(topics ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		if topics != nil {
			for _, tp := range topics {
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr(tp)
				req.Topics = append(req.Topics, mt)
			}
		}
		req.IncludeTopicAuthorizedOperations = true
		return raw(req).(*kmsg.MetadataResponse)
	}
	listed := func() map[string]bool {
		out := map[string]bool{}
		for _, mt := range metadata().Topics {
			out[*mt.Topic] = true
		}
		return out
	}
	topicIDs := map[string][16]byte{}
	details, err := admin.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range details {
		topicIDs[name] = d.ID
	}
	fetchCode := func(topic string) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicIDs[topic]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return raw(req).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	listOffsetsCode := func(topic string) int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return raw(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	createTopicsCodes := func(topics ...string) map[string]int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		for _, tp := range topics {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tp, 1, -1
			req.Topics = append(req.Topics, rt)
		}
		out := map[string]int16{}
		for _, rt := range raw(req).(*kmsg.CreateTopicsResponse).Topics {
			out[rt.Topic] = rt.ErrorCode
			// Created without DescribeConfigs on it: its configs are hidden.
			if rt.ErrorCode == 0 && (rt.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(rt.Configs) != 0) {
				t.Errorf("created %s: config error %v, %d configs shown", rt.Topic, kerr.ErrorForCode(rt.ConfigErrorCode), len(rt.Configs))
			}
		}
		return out
	}
	deleteTopicCode := func(topic string) int16 {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 5000
		req.TopicNames = []string{topic}
		req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		return raw(req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
	}
	describeConfigsCode := func(typ kmsg.ConfigResourceType, name string) int16 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		req.Resources = append(req.Resources, rr)
		return raw(req).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode
	}
	initProducerIDCode := func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		return raw(req).(*kmsg.InitProducerIDResponse).ErrorCode
	}
	groupCodes := func() map[string]int16 {
		out := map[string]int16{}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "billing"
		fc.CoordinatorKeys = []string{"billing"}
		fr := raw(fc).(*kmsg.FindCoordinatorResponse)
		out["FindCoordinator"] = fr.ErrorCode
		if len(fr.Coordinators) > 0 {
			out["FindCoordinator"] = fr.Coordinators[0].ErrorCode
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = "billing", "nobody", 1
		out["Heartbeat"] = raw(hb).(*kmsg.HeartbeatResponse).ErrorCode
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group = "billing"
		of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "billing"}}
		ofr := raw(of).(*kmsg.OffsetFetchResponse)
		out["OffsetFetch"] = ofr.ErrorCode
		if len(ofr.Groups) > 0 {
			out["OffsetFetch"] = ofr.Groups[0].ErrorCode
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{"billing"}
		out["DescribeGroups"] = raw(dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
		return out
	}
	clusterCodes := func() map[string]int16 {
		out := map[string]int16{}
		out["DescribeLogDirs"] = raw(kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse).ErrorCode
		out["DescribeUserSCRAMCredentials"] = raw(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode
		out["ListPartitionReassignments"] = raw(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse).ErrorCode
		out["DescribeClientQuotas"] = raw(kmsg.NewPtrDescribeClientQuotasRequest()).(*kmsg.DescribeClientQuotasResponse).ErrorCode
		return out
	}

	// Before any ACL names alice.
	if mt := metadata("orders").Topics[0]; mt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("metadata for orders: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(mt.ErrorCode))
	}
	if l := listed(); len(l) != 0 {
		t.Errorf("listing shows topics alice may not describe: %v", l)
	}
	producer := userClient(t, n.addr, "alice", kgo.RecordRetries(1), kgo.RequestRetries(1))
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	code(t, fetchCode("orders"), kerr.TopicAuthorizationFailed, "fetch")
	code(t, listOffsetsCode("orders"), kerr.TopicAuthorizationFailed, "list offsets")
	code(t, createTopicsCodes("alice-new")["alice-new"], kerr.TopicAuthorizationFailed, "create topic")
	code(t, deleteTopicCode("orders"), kerr.TopicAuthorizationFailed, "delete topic")
	code(t, describeConfigsCode(kmsg.ConfigResourceTypeTopic, "orders"), kerr.TopicAuthorizationFailed, "describe topic configs")
	code(t, describeConfigsCode(kmsg.ConfigResourceTypeBroker, "1"), kerr.ClusterAuthorizationFailed, "describe broker configs")
	code(t, initProducerIDCode(), kerr.ClusterAuthorizationFailed, "init producer id")
	for api, c := range groupCodes() {
		code(t, c, kerr.GroupAuthorizationFailed, api)
	}
	for api, c := range clusterCodes() {
		code(t, c, kerr.ClusterAuthorizationFailed, api)
	}
	lg := raw(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if len(lg.Groups) != 0 {
		t.Errorf("list groups shows groups alice may not describe: %+v", lg.Groups)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if ops := raw(dc).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != -2147483648 {
		t.Errorf("cluster operations without DESCRIBE on the cluster: %b", ops)
	}

	// Grants: read and write every topic starting "ord", but never write
	// orders-locked; read the billing group; create alice-new; describe
	// the cluster.
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDelete))
	grant(t, admin, kadm.NewACLs().Deny("User:alice").Topics("orders-locked").Operations(kadm.OpWrite))
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Groups("billing").Operations(kadm.OpRead))
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("alice-new").Operations(kadm.OpCreate))
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribe))

	mt := metadata("orders").Topics[0]
	code(t, mt.ErrorCode, nil, "metadata for orders after the grant")
	if want := int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationWrite | 1<<kmsg.ACLOperationDelete | 1<<kmsg.ACLOperationDescribe); mt.AuthorizedOperations != want {
		t.Errorf("topic operations %b, want %b", mt.AuthorizedOperations, want)
	}
	if l := listed(); !l["orders"] || !l["orders-locked"] || l["secret"] {
		t.Errorf("listing: %v, want orders and orders-locked only", l)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("produce after the grant: %v", err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "orders-locked", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce to orders-locked: %v, want TOPIC_AUTHORIZATION_FAILED (deny wins)", err)
	}
	code(t, fetchCode("orders"), nil, "fetch after the grant")
	code(t, fetchCode("secret"), kerr.TopicAuthorizationFailed, "fetch of secret")
	code(t, listOffsetsCode("orders"), nil, "list offsets after the grant")
	created := createTopicsCodes("alice-new", "alice-other")
	code(t, created["alice-new"], nil, "create the allowed topic")
	code(t, created["alice-other"], kerr.TopicAuthorizationFailed, "create another topic in the same request")
	code(t, deleteTopicCode("secret"), kerr.TopicAuthorizationFailed, "delete secret")
	code(t, initProducerIDCode(), nil, "init producer id with WRITE on a topic")
	for api, c := range groupCodes() {
		if c == kerr.GroupAuthorizationFailed.Code {
			t.Errorf("%s after the grant: %v", api, kerr.ErrorForCode(c))
		}
	}
	code(t, clusterCodes()["DescribeLogDirs"], nil, "describe log dirs with DESCRIBE on the cluster")
	if ops := raw(dc).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != 1<<kmsg.ACLOperationDescribe {
		t.Errorf("cluster operations: %b, want DESCRIBE only", ops)
	}

	// A consumer group member end to end: FindCoordinator, JoinGroup,
	// SyncGroup, OffsetFetch, Fetch, OffsetCommit all allowed.
	consumer := userClient(t, n.addr, "alice", kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got == 0; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming as alice: %v", err)
		}
		got = fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit as alice: %v", err)
	}
}

// followerACLs reads the leader's bindings (as a follower's replicated copy
// would) but cannot change them.
type followerACLs struct{ gateway.ACLStore }

func (followerACLs) CreateACLs(context.Context, []fsm.ACL) ([]int16, error) {
	return nil, cluster.ErrNotLeader
}
func (followerACLs) DeleteACLs(context.Context, []fsm.ACL) error { return cluster.ErrNotLeader }

// TestFollowerAuthorizesBeforeForwarding: the node the client connected to
// authorizes; it forwards only what was allowed, over the cluster's link,
// where the leader does not authorize again (the link carries no client
// principal).
func TestFollowerAuthorizesBeforeForwarding(t *testing.T) {
	leader := aclNode(t, nil)
	leaderInfo := leader.node.Self()
	leaderInfo.KafkaAddr = leader.addr
	fc := followerCluster{leader: leaderInfo, dial: leader.node.DialPeer, peers: listenLoopback(t), applied: leader.node.AppliedIndex}
	acls := followerACLs{leader.backend}
	srv := gateway.New(gateway.Config{Addr: freeLoopbackAddr(t), Logger: slog.New(slog.DiscardHandler),
		SASL: &gateway.SASL{Mechanisms: []string{"PLAIN"}, PlainUsers: func(u string) (string, bool) { return u + "-pw", u == "admin" || u == "alice" }},
		ACLs: acls, Authorizer: authz.New(acls, authz.Config{SuperUsers: []string{"User:admin"}}),
	}, followerBackend{leader.backend}, fc)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	follower := srv.Addr().String()

	// The super user's ACL change goes through the follower to the leader.
	grant(t, kadm.NewClient(userClient(t, follower, "admin")), kadm.NewACLs().Allow("User:alice").Topics("fwd-").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpCreate))
	if _, got := leader.fsm.ACLs(); len(got) != 1 || got[0].Principal != "User:alice" {
		t.Fatalf("the leader's bindings: %+v", got)
	}

	// alice may create fwd-* only: one topic is forwarded and created, the
	// other refused on the follower.
	alice := userClient(t, follower, "alice")
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	for _, name := range []string{"fwd-ok", "nope"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, -1
		req.Topics = append(req.Topics, rt)
	}
	resp := issue(t, alice, req).(*kmsg.CreateTopicsResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	code(t, codes["fwd-ok"], nil, "forwarded creation")
	code(t, codes["nope"], kerr.TopicAuthorizationFailed, "refused creation")
	if _, ok := leader.backend.Topic("fwd-ok"); !ok {
		t.Error("fwd-ok was not created on the leader")
	}
	if _, ok := leader.backend.Topic("nope"); ok {
		t.Error("nope was created")
	}
	// alice may not change ACLs, through the follower either.
	res, err := kadm.NewClient(alice).CreateACLs(testCtx(t), kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpAll))
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creating an ACL through the follower: %v %+v", err, res)
	}
	if _, got := leader.fsm.ACLs(); len(got) != 1 {
		t.Fatalf("the leader's bindings changed: %+v", got)
	}
}

// TestMutualTLSPrincipal: on a listener that authenticates by client
// certificate, the principal is User:<certificate subject>, as Kafka's
// default principal builder names it.
func TestMutualTLSPrincipal(t *testing.T) {
	pki := newPKI(t)
	rl := pki.serverTLS(t, true)
	n := startNode(t, func(c *gateway.Config) {
		c.TLS = rl.ServerConfig()
		c.ACLs = c.Credentials.(gateway.ACLStore)
		c.Authorizer = authz.New(c.ACLs, authz.Config{SuperUsers: []string{"User:CN=ops"}})
	})
	opsCert, opsKey := pki.issue(t, "ops")
	opsTLS := pki.clientTLS(t, false)
	cert, err := tls.LoadX509KeyPair(opsCert, opsKey)
	if err != nil {
		t.Fatal(err)
	}
	opsTLS.Certificates = []tls.Certificate{cert}
	ops := kadm.NewClient(newClient(t, n.addr, kgo.DialTLSConfig(opsTLS)))
	if _, err := ops.CreateTopic(testCtx(t), 1, 1, nil, "tls-topic"); err != nil {
		t.Fatalf("super user by certificate: %v", err)
	}
	client := newClient(t, n.addr, kgo.DialTLSConfig(pki.clientTLS(t, true)), kgo.RecordRetries(1), kgo.RequestRetries(1))
	if err := client.ProduceSync(testCtx(t), &kgo.Record{Topic: "tls-topic", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce as CN=client without an ACL: %v", err)
	}
	grant(t, ops, kadm.NewACLs().Allow("User:CN=client").Topics("tls-topic").Operations(kadm.OpWrite))
	if err := client.ProduceSync(testCtx(t), &kgo.Record{Topic: "tls-topic", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce as CN=client with an ACL: %v", err)
	}
}

// TestAuthorizationTransactions: the transaction APIs as Kafka authorizes
// them: WRITE on the transactional id for each, READ on the group for
// offsets, WRITE on each topic added (the others OPERATION_NOT_ATTEMPTED),
// READ on each topic whose offsets are staged, and CLUSTER_ACTION for the
// brokers' batched AddPartitionsToTxn; then a transactional producer with
// those grants commits.
func TestAuthorizationTransactions(t *testing.T) {
	n := aclNode(t, nil)
	admin := kadm.NewClient(userClient(t, n.addr, "admin"))
	ctx := testCtx(t)
	for _, topic := range []string{"orders", "secret"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	alice := userClient(t, n.addr, "alice")
	issue(t, alice, kmsg.NewPtrMetadataRequest()) // learn broker 1
	raw := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := alice.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	endTxn := kmsg.NewPtrEndTxnRequest()
	endTxn.TransactionalID, endTxn.ProducerID = "t1", 1
	addOffsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffsets.TransactionalID, addOffsets.Group = "t1", "billing"
	// A client's AddPartitionsToTxn is v3 at most (Kafka 3.5's); v4 on is
	// the brokers' batched form.
	alice35 := userClient(t, n.addr, "alice", kgo.MaxVersions(kversion.V3_5_0()))
	issue(t, alice35, kmsg.NewPtrMetadataRequest())
	addParts := func(version int16, topics ...string) *kmsg.AddPartitionsToTxnResponse {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID = "t1"
		for _, tp := range topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = tp, []int32{0}
			req.Topics = append(req.Topics, rt)
		}
		cl := alice35
		if version >= 4 {
			tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tx.TransactionalID, tx.VerifyOnly = "t1", true
			req.Transactions = append(req.Transactions, tx)
			cl = alice
		}
		resp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatalf("AddPartitionsToTxn: %v", err)
		}
		return resp.(*kmsg.AddPartitionsToTxnResponse)
	}
	txnCommit := func(topic string) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group = "t1", "billing"
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return raw(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}

	code(t, raw(endTxn).(*kmsg.EndTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed, "EndTxn without WRITE on t1")
	code(t, raw(addOffsets).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed, "AddOffsetsToTxn without WRITE on t1")
	code(t, addParts(3, "orders").Topics[0].Partitions[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed, "AddPartitionsToTxn without WRITE on t1")
	code(t, txnCommit("orders"), kerr.TransactionalIDAuthorizationFailed, "TxnOffsetCommit without WRITE on t1")
	code(t, addParts(4).ErrorCode, kerr.ClusterAuthorizationFailed, "the brokers' AddPartitionsToTxn v4 from a client")

	grant(t, admin, kadm.NewACLs().Allow("User:alice").TransactionalIDs("t1").Operations(kadm.OpWrite, kadm.OpDescribe))
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe))
	code(t, raw(addOffsets).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.GroupAuthorizationFailed, "AddOffsetsToTxn without READ on the group")
	code(t, txnCommit("orders"), kerr.GroupAuthorizationFailed, "TxnOffsetCommit without READ on the group")
	ap := addParts(3, "orders", "secret")
	for _, rt := range ap.Topics {
		want := kerr.OperationNotAttempted
		if rt.Topic == "secret" {
			want = kerr.TopicAuthorizationFailed
		}
		code(t, rt.Partitions[0].ErrorCode, want, "AddPartitionsToTxn of "+rt.Topic+" beside a topic without WRITE")
	}
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Groups("billing").Operations(kadm.OpRead))
	code(t, txnCommit("secret"), kerr.TopicAuthorizationFailed, "TxnOffsetCommit of a topic without READ")

	producer := userClient(t, n.addr, "alice", kgo.TransactionalID("t1"), kgo.DefaultProduceTopic("orders"))
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("paid")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce with the grants: %v", err)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit with the grants: %v", err)
	}
}
