package gateway

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeUserScramCredentials lists users' SCRAM mechanisms and
// iteration counts (never key material): all users, or those asked for.
func (s *Server) handleDescribeUserScramCredentials(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	if len(req.Users) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.allowedCluster(r, kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	all := s.cfg.Credentials.ScramUsers()
	names := make([]string, 0, len(req.Users))
	if req.Users == nil {
		for u := range all {
			names = append(names, u)
		}
		sort.Strings(names)
	} else {
		for _, u := range req.Users {
			names = append(names, u.Name)
		}
	}
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	for _, n := range names {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = n
		creds, ok := all[n]
		switch {
		case seen[n] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + n)
		case !ok:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + n)
		default:
			for _, c := range creds {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = int8(c.Mechanism), c.Iterations
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return now(resp)
}
