package embedded

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
)

var _ gateway.ProducerDescriber = (*Backend)(nil)

// Producers reports a partition's idempotent producers from the replicated
// state; the last timestamp is the leader's time of their last append.
func (b *Backend) Producers(topic string, p int32) ([]gateway.ProducerState, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return nil, err
	}
	var out []gateway.ProducerState
	for _, pi := range part.Producers() {
		out = append(out, gateway.ProducerState{ID: pi.ID, Epoch: pi.Epoch, LastSequence: pi.LastSequence, LastTimestamp: pi.LastAppendMs,
			TxnStart: pi.TxnStart, CoordinatorEpoch: pi.CoordinatorEpoch})
	}
	return out, nil
}

// ProducerExpiry configures RunProducerExpiry.
type ProducerExpiry struct {
	// Expiration is how long a producer's idempotence state is kept after
	// its last append (Kafka's producer.id.expiration.ms).
	Expiration time.Duration
	// Every is how often the leader looks (Kafka's
	// producer.id.expiration.check.interval.ms).
	Every time.Duration
	// Now is the leader's clock; nil is the backend's.
	Now func() time.Time
}

// RunProducerExpiry drops the idempotence state of producers idle longer
// than the expiration, until ctx ends. It is a leader service
// (cluster.Node.RunWhileLeader): the leader stamps its time into an
// ExpireProducers command, and every replica drops the same producers.
// Below fsm.LevelIdleExpiry (a voter runs an older kgate) it does nothing.
func (b *Backend) RunProducerExpiry(ctx context.Context, cfg ProducerExpiry) {
	now := cfg.Now
	if now == nil {
		now = b.now
	}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if b.fsm.FeatureLevel() < fsm.LevelIdleExpiry {
			continue
		}
		cmd := &fsm.ExpireProducers{NowMs: now().UnixMilli(), ExpirationMs: cfg.Expiration.Milliseconds()}
		res, err := b.propose(ctx, cmd, kerr.NotController)
		if err != nil {
			continue // proposed again at the next check
		}
		if r, ok := res.(*fsm.ExpireProducersResult); ok && r.Removed > 0 {
			b.log.Info("dropped the state of idle producers", "count", r.Removed, "expiration", cfg.Expiration.String())
		}
	}
}
