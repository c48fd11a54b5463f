package authz

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// Filter selects bindings, as DescribeAcls and DeleteAcls send it (Kafka's
// AclBindingFilter): ANY matches every value of a field, a nil string
// every name; pattern type MATCH selects the bindings that would apply to
// the named resource (literal of that name or "*", prefixed of a prefix of
// it), ANY those of that exact name whatever their pattern type.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Valid reports whether every field is a known value (UNKNOWN is not).
func (f Filter) Valid() bool {
	return f.ResourceType >= kmsg.ACLResourceTypeAny && f.ResourceType <= kmsg.ACLResourceTypeUser &&
		f.PatternType >= kmsg.ACLResourcePatternTypeAny && f.PatternType <= kmsg.ACLResourcePatternTypePrefixed &&
		f.Operation >= kmsg.ACLOperationAny && f.Operation <= kmsg.ACLOperationDescribeTokens &&
		f.Permission >= kmsg.ACLPermissionTypeAny && f.Permission <= kmsg.ACLPermissionTypeAllow
}

// Matches reports whether the filter selects acl.
func (f Filter) Matches(acl fsm.ACL) bool {
	return f.matchesPattern(acl) &&
		(f.Principal == nil || *f.Principal == acl.Principal) &&
		(f.Host == nil || *f.Host == acl.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == kmsg.ACLOperation(acl.Operation)) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == kmsg.ACLPermissionType(acl.Permission))
}

func (f Filter) matchesPattern(acl fsm.ACL) bool {
	pt := kmsg.ACLResourcePatternType(acl.PatternType)
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != kmsg.ACLResourceType(acl.ResourceType) {
		return false
	}
	if f.PatternType != kmsg.ACLResourcePatternTypeAny && f.PatternType != kmsg.ACLResourcePatternTypeMatch && f.PatternType != pt {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType != kmsg.ACLResourcePatternTypeMatch {
		return name == acl.ResourceName
	}
	if pt == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, acl.ResourceName)
	}
	return name == acl.ResourceName || acl.ResourceName == wildcard
}
