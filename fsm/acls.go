package fsm

import (
	"sort"
	"strings"
)

// Access control lists (Kafka's ACLs, KIP-290 prefixed patterns included),
// replicated so every node authorizes every request the same way. The
// state is a set of bindings: creating one twice keeps one, as in Kafka.
// The leader resolves DeleteAcls filters to the exact bindings it removes,
// so Apply only adds and removes set members.

// The ACL command kinds, set apart from the next free kinds so concurrent
// branches do not collide.
const (
	KindCreateACLs Kind = 33
	KindDeleteACLs Kind = 34
)

// ACL is one binding. The numeric fields carry Kafka's wire codes
// (ResourceType, PatternType, AclOperation, AclPermissionType), which the
// gateway's authorizer names.
type ACL struct {
	ResourceType int8
	ResourceName string
	PatternType  int8 // LITERAL (3) or PREFIXED (4)
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

// Kafka's codes that Apply checks a binding against.
const (
	aclResourceTopic           = 2
	aclResourceDelegationToken = 6
	aclResourceUser            = 7
	aclPatternLiteral          = 3
	aclPatternPrefixed         = 4
	aclOperationAll            = 2
	aclOperationDescribeTokens = 14
	aclPermissionDeny          = 2
	aclPermissionAllow         = 3
)

// ValidACL reports whether a is a binding that may be stored: a concrete
// resource type, a literal or prefixed pattern with a name, a concrete
// operation and permission, and a principal of the form Type:name.
func ValidACL(a ACL) bool {
	typ, name, ok := strings.Cut(a.Principal, ":")
	return a.ResourceType >= aclResourceTopic && a.ResourceType <= aclResourceUser &&
		(a.PatternType == aclPatternLiteral || a.PatternType == aclPatternPrefixed) && a.ResourceName != "" &&
		a.Operation >= aclOperationAll && a.Operation <= aclOperationDescribeTokens &&
		(a.Permission == aclPermissionDeny || a.Permission == aclPermissionAllow) &&
		ok && typ != "" && name != "" && a.Host != ""
}

// aclLess is the canonical order of bindings (snapshots, listings).
func aclLess(a, b ACL) bool {
	switch {
	case a.ResourceType != b.ResourceType:
		return a.ResourceType < b.ResourceType
	case a.ResourceName != b.ResourceName:
		return a.ResourceName < b.ResourceName
	case a.PatternType != b.PatternType:
		return a.PatternType < b.PatternType
	case a.Principal != b.Principal:
		return a.Principal < b.Principal
	case a.Host != b.Host:
		return a.Host < b.Host
	case a.Operation != b.Operation:
		return a.Operation < b.Operation
	}
	return a.Permission < b.Permission
}

func sortACLs(acls []ACL) { sort.Slice(acls, func(i, j int) bool { return aclLess(acls[i], acls[j]) }) }

func encodeACLs(e *enc, acls []ACL) {
	e.uvar(uint64(len(acls)))
	for _, a := range acls {
		e.u8(uint8(a.ResourceType))
		e.str(a.ResourceName)
		e.u8(uint8(a.PatternType))
		e.str(a.Principal)
		e.str(a.Host)
		e.u8(uint8(a.Operation))
		e.u8(uint8(a.Permission))
	}
}

func decodeACLs(d *dec) []ACL {
	n := d.count(7)
	out := make([]ACL, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, ACL{ResourceType: int8(d.u8()), ResourceName: d.str(), PatternType: int8(d.u8()),
			Principal: d.str(), Host: d.str(), Operation: int8(d.u8()), Permission: int8(d.u8())})
	}
	return out
}

// CreateACLs adds bindings. The leader has validated them; Apply checks
// again and answers per binding.
type CreateACLs struct{ ACLs []ACL }

func (*CreateACLs) Kind() Kind      { return KindCreateACLs }
func (c *CreateACLs) encode(e *enc) { encodeACLs(e, c.ACLs) }

// DeleteACLs removes exactly these bindings; absent ones are no-ops, so a
// retried entry changes nothing more.
type DeleteACLs struct{ ACLs []ACL }

func (*DeleteACLs) Kind() Kind      { return KindDeleteACLs }
func (c *DeleteACLs) encode(e *enc) { encodeACLs(e, c.ACLs) }

// ACLResult has one code per binding of the command, in order.
type ACLResult struct{ Codes []int16 }

func (f *FSM) applyCreateACLs(c *CreateACLs) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &ACLResult{Codes: make([]int16, len(c.ACLs))}
	for i, a := range c.ACLs {
		if !ValidACL(a) {
			res.Codes[i] = ErrInvalidRequest
			continue
		}
		if _, ok := f.acls[a]; !ok {
			f.acls[a] = struct{}{}
			f.aclVersion.Add(1)
		}
	}
	return res
}

func (f *FSM) applyDeleteACLs(c *DeleteACLs) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &ACLResult{Codes: make([]int16, len(c.ACLs))}
	for _, a := range c.ACLs {
		if _, ok := f.acls[a]; ok {
			delete(f.acls, a)
			f.aclVersion.Add(1)
		}
	}
	return res
}

// ACLs returns every binding in canonical order and the version of the set
// they are (it changes with every change of the set, so readers can cache
// what they derive from it).
func (f *FSM) ACLs() (version uint64, acls []ACL) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	acls = make([]ACL, 0, len(f.acls))
	for a := range f.acls {
		acls = append(acls, a)
	}
	sortACLs(acls)
	return f.aclVersion.Load(), acls
}

// ACLVersion is the version ACLs would return, without the copy.
func (f *FSM) ACLVersion() uint64 { return f.aclVersion.Load() }

// encodeACLsLocked writes the ACL section of the snapshot metadata.
func (f *FSM) encodeACLsLocked(e *enc) {
	acls := make([]ACL, 0, len(f.acls))
	for a := range f.acls {
		acls = append(acls, a)
	}
	sortACLs(acls)
	encodeACLs(e, acls)
}

func decodeACLSet(d *dec) map[ACL]struct{} {
	out := map[ACL]struct{}{}
	for _, a := range decodeACLs(d) {
		out[a] = struct{}{}
	}
	return out
}
