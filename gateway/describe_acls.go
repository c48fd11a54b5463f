package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway/authz"
)

// handleDescribeAcls lists the bindings a filter selects, grouped by
// resource pattern, from this node's replicated copy. It needs DESCRIBE on
// the cluster; without an authorizer it answers SECURITY_DISABLED, as a
// Kafka broker does.
func (s *Server) handleDescribeAcls(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(e *kerr.Error, msg string) Reply {
		resp.ErrorCode, resp.ErrorMessage = e.Code, kmsg.StringPtr(msg)
		return now(resp)
	}
	if s.cfg.Authorizer == nil {
		return fail(kerr.SecurityDisabled, "No Authorizer is configured on the broker")
	}
	if !s.allowedCluster(r, kmsg.ACLOperationDescribe) {
		return fail(kerr.ClusterAuthorizationFailed, "")
	}
	f := authz.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if req.Version == 0 {
		f.PatternType = kmsg.ACLResourcePatternTypeLiteral // v0 knows literal bindings only
	}
	if !f.Valid() {
		return fail(kerr.InvalidRequest, "The filter has an unknown field value")
	}
	_, acls := s.cfg.ACLs.ACLs()
	var matched []fsm.ACL
	for _, a := range acls {
		if f.Matches(a) && (req.Version > 0 || a.PatternType == int8(kmsg.ACLResourcePatternTypeLiteral)) {
			matched = append(matched, a)
		}
	}
	resp.Resources = describeACLResources(matched)
	return now(resp)
}

// describeACLResources groups bindings (in canonical order, so those of
// one pattern are adjacent) by resource pattern.
func describeACLResources(acls []fsm.ACL) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	for _, a := range acls {
		n := len(out)
		if n == 0 || int8(out[n-1].ResourceType) != a.ResourceType || out[n-1].ResourceName != a.ResourceName ||
			int8(out[n-1].ResourcePatternType) != a.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			out = append(out, res)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		out[n-1].ACLs = append(out[n-1].ACLs, e)
	}
	return out
}
