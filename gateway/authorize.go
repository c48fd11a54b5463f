package gateway

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway/authz"
)

// ACLStore keeps the ACL bindings in the replicated state.
type ACLStore interface {
	authz.Store
	// CreateACLs proposes new bindings on the leader and returns one code
	// per binding; DeleteACLs removes exactly the given ones.
	CreateACLs(ctx context.Context, acls []fsm.ACL) ([]int16, error)
	DeleteACLs(ctx context.Context, acls []fsm.ACL) error
}

// Authorization runs where the client connected: a follower authorizes a
// request before it forwards it (and forwards only what was allowed), so a
// request that arrives over the cluster's own link (Request.Forwarded) was
// authorized already and is not checked again. The peer connection carries
// no principal of its own.

// principal is the Kafka principal of the request's connection.
func (r *Request) principal() string {
	if r.sess == nil {
		return authz.Anonymous
	}
	return authz.Principal(r.sess.user)
}

// host is the client's IP address, as ACL hosts name it.
func (r *Request) host() string {
	host, _, err := net.SplitHostPort(r.Remote)
	if err != nil {
		return r.Remote
	}
	return host
}

// checks reports whether this request is subject to authorization.
func (s *Server) checks(r *Request) bool { return s.cfg.Authorizer != nil && !r.Forwarded }

// access is who a request comes from, captured on the connection's reader
// (which owns the session) so that answers computed later can use it.
type access struct {
	az              *authz.Authorizer // nil: everything is allowed
	principal, host string
}

func (s *Server) access(r *Request) access {
	if !s.checks(r) {
		return access{}
	}
	return access{az: s.cfg.Authorizer, principal: r.principal(), host: r.host()}
}

// allows decides one action on one resource.
func (a access) allows(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return a.az == nil || a.az.Authorize(a.principal, a.host, op, rt, name)
}

func (a access) topic(op kmsg.ACLOperation, topic string) bool {
	return a.allows(op, kmsg.ACLResourceTypeTopic, topic)
}

func (a access) cluster(op kmsg.ACLOperation) bool {
	return a.allows(op, kmsg.ACLResourceTypeCluster, authz.ClusterName)
}

// ops is the authorized-operations bit field of a resource when the client
// asked for it (KIP-430), unset otherwise: what the authorizer allows, or
// without one every operation of the type, as Kafka answers.
func (a access) ops(include bool, rt kmsg.ACLResourceType, name string) int32 {
	switch {
	case !include:
		return authorizedOpsUnset
	case a.az == nil:
		return authz.Operations(rt)
	}
	return a.az.AuthorizedOperations(a.principal, a.host, rt, name)
}

// allowed decides one action on one resource for r.
func (s *Server) allowed(r *Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return s.access(r).allows(op, rt, name)
}

func (s *Server) allowedTopic(r *Request, op kmsg.ACLOperation, topic string) bool {
	return s.allowed(r, op, kmsg.ACLResourceTypeTopic, topic)
}

func (s *Server) allowedGroup(r *Request, op kmsg.ACLOperation, group string) bool {
	return s.allowed(r, op, kmsg.ACLResourceTypeGroup, group)
}

func (s *Server) allowedCluster(r *Request, op kmsg.ACLOperation) bool {
	return s.allowed(r, op, kmsg.ACLResourceTypeCluster, authz.ClusterName)
}

// partitionAllowed splits items into those allowed and those not, keeping
// their order. A follower forwards only the allowed ones and answers the
// others itself.
func partitionAllowed[T any](items []T, allowed func(T) bool) (ok, denied []T) {
	for _, it := range items {
		if allowed(it) {
			ok = append(ok, it)
		} else {
			denied = append(denied, it)
		}
	}
	return ok, denied
}

// configResourceAllowed decides op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a
// config resource, and the code Kafka answers when it is not allowed.
func (s *Server) configResourceAllowed(r *Request, op kmsg.ACLOperation, typ kmsg.ConfigResourceType, name string) (bool, int16) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return s.allowedTopic(r, op, name), kerr.TopicAuthorizationFailed.Code
	case kmsg.ConfigResourceTypeGroupConfig:
		return s.allowedGroup(r, op, name), kerr.GroupAuthorizationFailed.Code
	}
	return s.allowedCluster(r, op), kerr.ClusterAuthorizationFailed.Code
}
