package authz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

type store struct {
	version uint64
	acls    []fsm.ACL
}

func (s *store) ACLs() (uint64, []fsm.ACL) { return s.version, s.acls }
func (s *store) ACLVersion() uint64        { return s.version }

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	read    = kmsg.ACLOperationRead
	write   = kmsg.ACLOperationWrite
	desc    = kmsg.ACLOperationDescribe
	literal = kmsg.ACLResourcePatternTypeLiteral
	prefix  = kmsg.ACLResourcePatternTypePrefixed
	allow   = kmsg.ACLPermissionTypeAllow
	deny    = kmsg.ACLPermissionTypeDeny
)

func binding(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) fsm.ACL {
	return fsm.ACL{ResourceType: int8(rt), ResourceName: name, PatternType: int8(pt), Principal: principal, Host: host,
		Operation: int8(op), Permission: int8(perm)}
}

func TestAuthorizeKafkaRules(t *testing.T) {
	st := &store{version: 1, acls: []fsm.ACL{
		binding(topic, "orders", literal, "User:alice", "*", read, allow),
		binding(topic, "pay", prefix, "User:alice", "*", write, allow),
		binding(topic, "pay-secret", literal, "User:alice", "*", write, deny),
		binding(topic, "*", literal, "User:*", "*", desc, allow),
		binding(topic, "audit", literal, "User:bob", "10.0.0.7", kmsg.ACLOperationAll, allow),
		binding(group, "billing", literal, "User:alice", "*", read, allow),
		binding(group, "billing", literal, "User:alice", "*", desc, deny),
	}}
	a := New(st, Config{SuperUsers: []string{"User:root"}})
	cases := []struct {
		name      string
		principal string
		host      string
		op        kmsg.ACLOperation
		rt        kmsg.ACLResourceType
		resource  string
		want      bool
	}{
		{"literal allow", "User:alice", "127.0.0.1", read, topic, "orders", true},
		{"other operation", "User:alice", "127.0.0.1", write, topic, "orders", false},
		{"other principal", "User:carol", "127.0.0.1", read, topic, "orders", false},
		{"prefixed allow", "User:alice", "127.0.0.1", write, topic, "payments", true},
		{"deny wins over prefixed allow", "User:alice", "127.0.0.1", write, topic, "pay-secret", false},
		{"literal is not a prefix", "User:alice", "127.0.0.1", read, topic, "orders-eu", false},
		{"wildcard resource and principal", "User:carol", "127.0.0.1", desc, topic, "anything", true},
		{"READ implies DESCRIBE", "User:alice", "127.0.0.1", desc, topic, "orders", true},
		{"ALL on the right host", "User:bob", "10.0.0.7", kmsg.ACLOperationDelete, topic, "audit", true},
		{"ALL on another host", "User:bob", "10.0.0.8", kmsg.ACLOperationDelete, topic, "audit", false},
		{"group read", "User:alice", "127.0.0.1", read, group, "billing", true},
		{"deny of DESCRIBE is not implied away", "User:alice", "127.0.0.1", desc, group, "billing", false},
		{"no ACL names it: denied by default", "User:alice", "127.0.0.1", read, group, "other", false},
		{"cluster without ACLs", "User:alice", "127.0.0.1", kmsg.ACLOperationCreate, cluster, ClusterName, false},
		{"super user", "User:root", "127.0.0.1", kmsg.ACLOperationAlter, cluster, ClusterName, true},
		{"super user past a deny", "User:root", "127.0.0.1", write, topic, "pay-secret", true},
	}
	for _, c := range cases {
		if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.resource); got != c.want {
			t.Errorf("%s: %s %v on %v %q from %s = %v, want %v", c.name, c.principal, c.op, c.rt, c.resource, c.host, got, c.want)
		}
	}
	// allow.everyone.if.no.acl.found applies only to resources no binding names.
	open := New(st, Config{AllowIfNoACL: true})
	if !open.Authorize("User:carol", "h", read, group, "other") {
		t.Error("AllowIfNoACL: a group without ACLs is denied")
	}
	if open.Authorize("User:carol", "h", read, topic, "orders") {
		t.Error("AllowIfNoACL: a topic with ACLs for someone else is allowed")
	}

	// The cache follows the store's version.
	st.acls = append(st.acls, binding(topic, "orders", literal, "User:alice", "*", read, deny))
	if !a.Authorize("User:alice", "h", read, topic, "orders") {
		t.Error("the old set no longer applies before the version changes")
	}
	st.version++
	if a.Authorize("User:alice", "h", read, topic, "orders") {
		t.Error("a new DENY is not seen after the version changed")
	}
}

func TestAuthorizedOperationsAndAny(t *testing.T) {
	st := &store{version: 1, acls: []fsm.ACL{
		binding(topic, "orders", literal, "User:alice", "*", write, allow),
		binding(topic, "orders", literal, "User:alice", "*", kmsg.ACLOperationAlterConfigs, allow),
		binding(topic, "x", prefix, "User:mallory", "*", write, allow),
		binding(topic, "x", prefix, "User:mallory", "*", write, deny),
	}}
	a := New(st, Config{})
	want := int32(1<<write | 1<<desc | 1<<kmsg.ACLOperationAlterConfigs | 1<<kmsg.ACLOperationDescribeConfigs)
	if got := a.AuthorizedOperations("User:alice", "h", topic, "orders"); got != want {
		t.Errorf("operations %b, want %b", got, want)
	}
	if !a.AuthorizeAny("User:alice", "h", write, topic) {
		t.Error("alice may write a topic, AuthorizeAny says no")
	}
	if a.AuthorizeAny("User:mallory", "h", write, topic) {
		t.Error("mallory's only WRITE is denied, AuthorizeAny says yes")
	}
	if a.AuthorizeAny("User:bob", "h", write, topic) {
		t.Error("bob has no ACL, AuthorizeAny says yes")
	}
}

func TestFilterMatches(t *testing.T) {
	lit := binding(topic, "orders", literal, "User:alice", "*", read, allow)
	wild := binding(topic, "*", literal, "User:bob", "*", read, allow)
	pre := binding(topic, "ord", prefix, "User:alice", "*", write, deny)
	grp := binding(group, "orders", literal, "User:alice", "*", read, allow)
	str := func(s string) *string { return &s }
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	with := func(mod func(*Filter)) Filter { f := any; mod(&f); return f }
	cases := []struct {
		name   string
		filter Filter
		want   []bool // lit, wild, pre, grp
	}{
		{"everything", any, []bool{true, true, true, true}},
		{"topics", with(func(f *Filter) { f.ResourceType = topic }), []bool{true, true, true, false}},
		{"ANY pattern, exact name", with(func(f *Filter) { f.ResourceName = str("orders") }), []bool{true, false, false, true}},
		{"MATCH what applies to orders", with(func(f *Filter) {
			f.ResourceType, f.ResourceName, f.PatternType = topic, str("orders"), kmsg.ACLResourcePatternTypeMatch
		}), []bool{true, true, true, false}},
		{"LITERAL only", with(func(f *Filter) { f.PatternType = literal }), []bool{true, true, false, true}},
		{"PREFIXED ord", with(func(f *Filter) { f.PatternType, f.ResourceName = prefix, str("ord") }), []bool{false, false, true, false}},
		{"principal", with(func(f *Filter) { f.Principal = str("User:bob") }), []bool{false, true, false, false}},
		{"deny", with(func(f *Filter) { f.Permission = deny }), []bool{false, false, true, false}},
		{"operation", with(func(f *Filter) { f.Operation = write }), []bool{false, false, true, false}},
		{"host", with(func(f *Filter) { f.Host = str("10.0.0.1") }), []bool{false, false, false, false}},
	}
	for _, c := range cases {
		for i, acl := range []fsm.ACL{lit, wild, pre, grp} {
			if got := c.filter.Matches(acl); got != c.want[i] {
				t.Errorf("%s: binding %d matched %v, want %v", c.name, i, got, c.want[i])
			}
		}
	}
	if (Filter{}).Valid() || !any.Valid() {
		t.Error("Valid: UNKNOWN fields must be refused, ANY accepted")
	}
}

// BenchmarkAuthorize: one check against 1,000 topic bindings (a DENY on a
// prefix among allows of other users), as every produced partition costs.
func BenchmarkAuthorize(b *testing.B) {
	st := &store{version: 1}
	for i := range 1000 {
		st.acls = append(st.acls, binding(topic, "t"+string(rune('a'+i%26))+"-"+string(rune('0'+i%10)), literal, "User:u"+string(rune('a'+i%26)), "*", write, allow))
	}
	st.acls = append(st.acls, binding(topic, "orders", prefix, "User:alice", "*", write, allow))
	a := New(st, Config{})
	b.ReportAllocs()
	for b.Loop() {
		if !a.Authorize("User:alice", "10.0.0.1", write, topic, "orders-eu") {
			b.Fatal("denied")
		}
	}
}
