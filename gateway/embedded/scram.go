package embedded

import (
	"context"
	"fmt"

	"github.com/kgate/kgate/fsm"
)

// The SCRAM credential store (gateway.Credentials) lives in the replicated
// state whatever the record backend is.

// ScramCredential returns a user's credential for a mechanism.
func (b *Backend) ScramCredential(user string, m fsm.ScramMechanism) (fsm.ScramCredential, bool) {
	return b.fsm.ScramCredentialFor(user, m)
}

// ScramUsers lists users with their mechanisms and iteration counts.
func (b *Backend) ScramUsers() map[string][]fsm.ScramCredential { return b.fsm.ScramUsers() }

// AlterScramCredentials applies a credential change through Raft. A
// follower gets cluster.ErrNotLeader.
func (b *Backend) AlterScramCredentials(ctx context.Context, cmd *fsm.AlterScramCredentials) ([]int16, error) {
	res, err := b.node.Propose(ctx, fsm.Encode(cmd), false)
	if err != nil {
		return nil, err
	}
	r, ok := res.(*fsm.ScramResult)
	if !ok {
		return nil, fmt.Errorf("unexpected result %T", res)
	}
	return r.Codes, nil
}
