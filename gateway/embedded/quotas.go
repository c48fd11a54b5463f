package embedded

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
)

var _ gateway.QuotaStore = (*Backend)(nil)

// ClientQuotas lists the replicated client quotas.
func (b *Backend) ClientQuotas() []fsm.ClientQuota { return b.fsm.ClientQuotas() }

// QuotaFor resolves the quota that applies to a connection.
func (b *Backend) QuotaFor(user, clientID, key string) (float64, string, string, bool) {
	return b.fsm.QuotaFor(user, clientID, key)
}

// AlterClientQuotas proposes the alterations; only the leader can.
func (b *Backend) AlterClientQuotas(ctx context.Context, alts []fsm.QuotaAlteration) ([]int16, error) {
	res, err := b.propose(ctx, &fsm.AlterClientQuotas{Alterations: alts}, kerr.NotController)
	if err != nil {
		return nil, err
	}
	return res.(*fsm.QuotaResults).Codes, nil
}
