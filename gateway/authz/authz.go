// Package authz is kgate's authorizer: Kafka's ACL semantics (as its
// StandardAuthorizer has them) over the ACL bindings in the replicated
// state. Deny wins over allow; ALLOW of READ, WRITE, DELETE or ALTER
// implies DESCRIBE, ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS; a
// resource no binding names is allowed only with AllowIfNoACL; super users
// may do anything.
package authz

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// ClusterName is the one name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// Anonymous is the principal of a connection that did not authenticate.
const Anonymous = "User:ANONYMOUS"

// wildcard matches any resource name (in a LITERAL binding), any principal
// name (User:*) or any host.
const wildcard = "*"

// Principal names a user the way Kafka's default principal builder does:
// User:<SASL user> or User:<certificate subject>; "" is anonymous.
func Principal(user string) string {
	if user == "" {
		return Anonymous
	}
	return "User:" + user
}

// Store is where the bindings live (the FSM).
type Store interface {
	// ACLs returns every binding and the version of the set.
	ACLs() (uint64, []fsm.ACL)
	// ACLVersion is the set's current version.
	ACLVersion() uint64
}

// Config is the authorizer's static configuration.
type Config struct {
	// SuperUsers are principals (User:name) allowed everything
	// (super.users).
	SuperUsers []string
	// AllowIfNoACL allows an action on a resource no binding names
	// (allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// Authorizer answers whether a principal from a host may do an operation
// on a resource.
type Authorizer struct {
	store       Store
	super       map[string]bool
	allowIfNone bool

	// index is the bindings by resource type as of a version of the set;
	// readers share it without locking, mu serializes rebuilding it.
	index atomic.Pointer[aclIndex]
	mu    sync.Mutex
}

type aclIndex struct {
	version uint64
	byType  map[kmsg.ACLResourceType]*typeIndex
}

// typeIndex is one resource type's bindings: literal ones by name ("*"
// included), prefixed ones by prefix, so a check looks up the name and each
// of its prefixes instead of scanning every binding.
type typeIndex struct {
	all      []fsm.ACL
	literal  map[string][]fsm.ACL
	prefixed map[string][]fsm.ACL
}

func newTypeIndex() *typeIndex {
	return &typeIndex{literal: map[string][]fsm.ACL{}, prefixed: map[string][]fsm.ACL{}}
}

// matching calls fn with each group of bindings whose pattern matches name
// until fn returns false.
func (ti *typeIndex) matching(name string, fn func([]fsm.ACL) bool) {
	if ti == nil {
		return
	}
	if l := ti.literal[name]; len(l) > 0 && !fn(l) {
		return
	}
	if name != wildcard {
		if l := ti.literal[wildcard]; len(l) > 0 && !fn(l) {
			return
		}
	}
	if len(ti.prefixed) == 0 {
		return
	}
	for i := 1; i <= len(name); i++ {
		if l := ti.prefixed[name[:i]]; len(l) > 0 && !fn(l) {
			return
		}
	}
}

// New makes an authorizer over store.
func New(store Store, cfg Config) *Authorizer {
	a := &Authorizer{store: store, super: map[string]bool{}, allowIfNone: cfg.AllowIfNoACL}
	for _, u := range cfg.SuperUsers {
		a.super[u] = true
	}
	return a
}

// bindings returns the bindings of one resource type, reloaded when the
// set changed; nil when there are none.
func (a *Authorizer) bindings(rt kmsg.ACLResourceType) *typeIndex {
	if ix := a.index.Load(); ix != nil && ix.version == a.store.ACLVersion() {
		return ix.byType[rt]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ix := a.index.Load()
	if ix == nil || ix.version != a.store.ACLVersion() {
		v, acls := a.store.ACLs()
		ix = &aclIndex{version: v, byType: map[kmsg.ACLResourceType]*typeIndex{}}
		for _, acl := range acls {
			t := kmsg.ACLResourceType(acl.ResourceType)
			ti := ix.byType[t]
			if ti == nil {
				ti = newTypeIndex()
				ix.byType[t] = ti
			}
			ti.all = append(ti.all, acl)
			switch kmsg.ACLResourcePatternType(acl.PatternType) {
			case kmsg.ACLResourcePatternTypeLiteral:
				ti.literal[acl.ResourceName] = append(ti.literal[acl.ResourceName], acl)
			case kmsg.ACLResourcePatternTypePrefixed:
				ti.prefixed[acl.ResourceName] = append(ti.prefixed[acl.ResourceName], acl)
			}
		}
		a.index.Store(ix)
	}
	return ix.byType[rt]
}

// SuperUser reports whether principal is one of the super users.
func (a *Authorizer) SuperUser(principal string) bool { return a.super[principal] }

// Authorize decides one action on a resource named exactly name.
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	named, allowed, denied := false, false, false
	a.bindings(rt).matching(name, func(acls []fsm.ACL) bool {
		named = true
		for _, acl := range acls {
			switch result(acl, principal, host, op) {
			case kmsg.ACLPermissionTypeDeny:
				denied = true
				return false
			case kmsg.ACLPermissionTypeAllow:
				allowed = true
			}
		}
		return true
	})
	switch {
	case denied:
		return false
	case !named:
		return a.allowIfNone
	}
	return allowed
}

// result is the binding's permission if it applies to this principal,
// host and operation, else Unknown.
func result(acl fsm.ACL, principal, host string, op kmsg.ACLOperation) kmsg.ACLPermissionType {
	if acl.Principal != principal && acl.Principal != "User:*" {
		return kmsg.ACLPermissionTypeUnknown
	}
	if acl.Host != wildcard && acl.Host != host {
		return kmsg.ACLPermissionTypeUnknown
	}
	perm := kmsg.ACLPermissionType(acl.Permission)
	if aop := kmsg.ACLOperation(acl.Operation); aop != kmsg.ACLOperationAll && aop != op && !(perm == kmsg.ACLPermissionTypeAllow && implies(aop, op)) {
		return kmsg.ACLPermissionTypeUnknown
	}
	return perm
}

// implies: an ALLOW of have also allows want.
func implies(have, want kmsg.ACLOperation) bool {
	switch want {
	case kmsg.ACLOperationDescribe:
		return have == kmsg.ACLOperationRead || have == kmsg.ACLOperationWrite || have == kmsg.ACLOperationDelete || have == kmsg.ACLOperationAlter
	case kmsg.ACLOperationDescribeConfigs:
		return have == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// operations are the operations each resource type supports, as Kafka
// reports them in authorized-operations bit fields
// (AclEntry.supportedOperations).
var operations = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
	kmsg.ACLResourceTypeTransactionalId: {kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite},
}

// Operations is the bit field (bit n: operation code n) of every operation
// Kafka knows for a resource type (AclEntry.supportedOperations): what a
// broker without an authorizer answers a client that asks what it may do.
func Operations(rt kmsg.ACLResourceType) int32 {
	var bits int32
	for _, op := range operations[rt] {
		bits |= 1 << uint(op)
	}
	return bits
}

// AuthorizedOperations is the bit field (bit n: operation code n) of what
// principal may do on the resource.
func (a *Authorizer) AuthorizedOperations(principal, host string, rt kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range operations[rt] {
		if a.Authorize(principal, host, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// AuthorizeAny reports whether principal may do op on at least one
// resource of type rt (Kafka's authorizeByResourceType, KIP-679: an
// idempotent producer needs WRITE on some topic): some ALLOW binding for
// it whose own resource no DENY covers, or no binding of the type at all
// with AllowIfNoACL.
func (a *Authorizer) AuthorizeAny(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if a.super[principal] {
		return true
	}
	ti := a.bindings(rt)
	if ti == nil {
		return a.allowIfNone
	}
	for _, acl := range ti.all {
		if result(acl, principal, host, op) == kmsg.ACLPermissionTypeAllow && a.Authorize(principal, host, op, rt, acl.ResourceName) {
			return true
		}
	}
	return false
}
