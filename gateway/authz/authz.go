// Package authz is kgate's authorizer: Kafka's ACL semantics (as its
// StandardAuthorizer has them) over the ACL bindings in the replicated
// state. Deny wins over allow; ALLOW of READ, WRITE, DELETE or ALTER
// implies DESCRIBE, ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS; a
// resource no binding names is allowed only with AllowIfNoACL; super users
// may do anything.
package authz

import (
	"strings"
	"sync"

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

	mu      sync.Mutex
	version uint64
	loaded  bool
	byType  map[kmsg.ACLResourceType][]fsm.ACL
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
// set changed.
func (a *Authorizer) bindings(rt kmsg.ACLResourceType) []fsm.ACL {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.loaded || a.store.ACLVersion() != a.version {
		v, acls := a.store.ACLs()
		a.byType = map[kmsg.ACLResourceType][]fsm.ACL{}
		for _, acl := range acls {
			t := kmsg.ACLResourceType(acl.ResourceType)
			a.byType[t] = append(a.byType[t], acl)
		}
		a.version, a.loaded = v, true
	}
	return a.byType[rt]
}

// SuperUser reports whether principal is one of the super users.
func (a *Authorizer) SuperUser(principal string) bool { return a.super[principal] }

// Authorize decides one action on a resource named exactly name.
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	named, allowed := false, false
	for _, acl := range a.bindings(rt) {
		if !resourceMatches(acl, name) {
			continue
		}
		named = true
		switch result(acl, principal, host, op) {
		case kmsg.ACLPermissionTypeDeny:
			return false
		case kmsg.ACLPermissionTypeAllow:
			allowed = true
		}
	}
	if !named {
		return a.allowIfNone
	}
	return allowed
}

// resourceMatches: a literal binding names the resource or is the
// wildcard; a prefixed one is a prefix of its name.
func resourceMatches(acl fsm.ACL, name string) bool {
	switch kmsg.ACLResourcePatternType(acl.PatternType) {
	case kmsg.ACLResourcePatternTypeLiteral:
		return acl.ResourceName == name || acl.ResourceName == wildcard
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, acl.ResourceName)
	}
	return false
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
// reports them in authorized-operations bit fields.
var operations = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
	kmsg.ACLResourceTypeTransactionalId: {kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite},
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
	acls := a.bindings(rt)
	if len(acls) == 0 {
		return a.allowIfNone
	}
	for _, acl := range acls {
		if result(acl, principal, host, op) == kmsg.ACLPermissionTypeAllow && a.Authorize(principal, host, op, rt, acl.ResourceName) {
			return true
		}
	}
	return false
}
