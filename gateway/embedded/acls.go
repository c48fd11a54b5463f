package embedded

import (
	"context"
	"fmt"

	"github.com/kgate/kgate/fsm"
)

// The ACL store (gateway.ACLStore) lives in the replicated state whatever
// the record backend is.

// ACLs returns the ACL bindings (gateway.ACLStore).
func (b *Backend) ACLs() (uint64, []fsm.ACL) { return b.fsm.ACLs() }

// ACLVersion is the version of the ACL set.
func (b *Backend) ACLVersion() uint64 { return b.fsm.ACLVersion() }

// CreateACLs adds bindings through Raft; a follower gets cluster.ErrNotLeader.
func (b *Backend) CreateACLs(ctx context.Context, acls []fsm.ACL) ([]int16, error) {
	res, err := b.node.Propose(ctx, fsm.Encode(&fsm.CreateACLs{ACLs: acls}), false)
	if err != nil {
		return nil, err
	}
	r, ok := res.(*fsm.ACLResult)
	if !ok {
		return nil, fmt.Errorf("unexpected result %T", res)
	}
	return r.Codes, nil
}

// DeleteACLs removes exactly these bindings through Raft.
func (b *Backend) DeleteACLs(ctx context.Context, acls []fsm.ACL) error {
	_, err := b.node.Propose(ctx, fsm.Encode(&fsm.DeleteACLs{ACLs: acls}), false)
	return err
}
