package gateway

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway/sasl"
)

// handleAlterUserScramCredentials deletes and sets users' SCRAM
// credentials. The client sends the salt and the salted password (KIP-554);
// the leader keeps only the derived StoredKey and ServerKey. Followers
// forward the request to the leader.
func (s *Server) handleAlterUserScramCredentials(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if len(req.Deletions)+len(req.Upsertions) > s.cfg.MaxElements {
		return Reply{close: true}
	}
	if !s.allowedCluster(r, kmsg.ACLOperationAlter) {
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		users := make([]string, 0, len(req.Deletions)+len(req.Upsertions))
		for _, d := range req.Deletions {
			users = append(users, d.Name)
		}
		for _, u := range req.Upsertions {
			users = append(users, u.Name)
		}
		for _, u := range users {
			if !seen[u] {
				seen[u] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode = u, kerr.ClusterAuthorizationFailed.Code
				resp.Results = append(resp.Results, res)
			}
		}
		return now(resp)
	}
	return later(func() kmsg.Response {
		return s.viaLeader(ctx, r, func() kmsg.Response { return s.alterScram(ctx, req) })
	})
}

type scramKey struct {
	user string
	mech int8
}

func (s *Server) alterScram(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string // in order of first appearance
	failed := map[string]*kerr.Error{}
	messages := map[string]string{}
	fail := func(user string, err *kerr.Error, msg string) {
		if failed[user] == nil {
			failed[user], messages[user] = err, msg
		}
	}
	count := map[scramKey]int{}
	seen := map[string]bool{}
	note := func(user string, mech int8) {
		if !seen[user] {
			seen[user] = true
			users = append(users, user)
		}
		count[scramKey{user, mech}]++
	}
	for _, d := range req.Deletions {
		note(d.Name, d.Mechanism)
	}
	for _, u := range req.Upsertions {
		note(u.Name, u.Mechanism)
	}
	check := func(user string, mech int8) bool {
		switch {
		case user == "":
			fail(user, kerr.UnacceptableCredential, "Username must not be empty")
		case mech != int8(fsm.ScramSHA256) && mech != int8(fsm.ScramSHA512):
			fail(user, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case count[scramKey{user, mech}] > 1:
			fail(user, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		default:
			return true
		}
		return false
	}
	cmd := &fsm.AlterScramCredentials{}
	for _, d := range req.Deletions {
		if check(d.Name, d.Mechanism) {
			cmd.Deletions = append(cmd.Deletions, fsm.ScramDeletion{User: d.Name, Mechanism: fsm.ScramMechanism(d.Mechanism)})
		}
	}
	for _, u := range req.Upsertions {
		if !check(u.Name, u.Mechanism) {
			continue
		}
		switch {
		case u.Iterations < sasl.MinIterations:
			fail(u.Name, kerr.UnacceptableCredential, "Too few iterations")
			continue
		case u.Iterations > sasl.MaxIterations:
			fail(u.Name, kerr.UnacceptableCredential, "Too many iterations")
			continue
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			fail(u.Name, kerr.UnacceptableCredential, "Salt and salted password must not be empty")
			continue
		}
		name := sasl.ScramSHA256
		if u.Mechanism == int8(fsm.ScramSHA512) {
			name = sasl.ScramSHA512
		}
		stored, server := sasl.KeysFromSalted(sasl.ScramHash(name), u.SaltedPassword)
		cmd.Upserts = append(cmd.Upserts, fsm.ScramUpsert{User: u.Name, Credential: fsm.ScramCredential{
			Mechanism: fsm.ScramMechanism(u.Mechanism), Iterations: u.Iterations,
			Salt: append([]byte(nil), u.Salt...), StoredKey: stored, ServerKey: server,
		}})
	}
	// A user with any invalid entry has none of its entries applied.
	cmd.Deletions = keepUnfailed(cmd.Deletions, func(d fsm.ScramDeletion) string { return d.User }, failed)
	cmd.Upserts = keepUnfailed(cmd.Upserts, func(u fsm.ScramUpsert) string { return u.User }, failed)
	var owners []string // the user of each command entry, deletions then upserts
	for _, d := range cmd.Deletions {
		owners = append(owners, d.User)
	}
	for _, u := range cmd.Upserts {
		owners = append(owners, u.User)
	}
	if len(owners) > 0 {
		codes, err := s.cfg.Credentials.AlterScramCredentials(ctx, cmd)
		for i, user := range owners {
			switch {
			case errors.Is(err, cluster.ErrNotLeader):
				fail(user, kerr.NotController, "")
			case errors.Is(err, fsm.ErrFeatureDisabled):
				// A voter still runs a kgate without SCRAM credentials (as
				// Kafka below the metadata.version that has them).
				fail(user, kerr.UnsupportedVersion, err.Error())
			case err != nil:
				fail(user, kerr.RequestTimedOut, "")
			case i < len(codes) && codes[i] == fsm.ErrResourceNotFound:
				fail(user, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			case i < len(codes) && codes[i] != 0:
				ke, ok := kerr.ErrorForCode(codes[i]).(*kerr.Error)
				if !ok {
					ke = kerr.UnknownServerError
				}
				fail(user, ke, "")
			}
		}
	}
	for _, user := range users {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		if e := failed[user]; e != nil {
			res.ErrorCode = e.Code
			if messages[user] != "" {
				res.ErrorMessage = kmsg.StringPtr(messages[user])
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

func keepUnfailed[T any](in []T, user func(T) string, failed map[string]*kerr.Error) []T {
	out := in[:0]
	for _, v := range in {
		if failed[user(v)] == nil {
			out = append(out, v)
		}
	}
	return out
}
