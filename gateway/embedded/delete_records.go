package embedded

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
)

var _ gateway.RecordDeleter = (*Backend)(nil)

// DeleteRecords moves the log start offset with the TrimLog command that
// retention uses: every node drops the same whole segments below it, and
// Fetch and ListOffsets earliest honour the new start at once.
func (b *Backend) DeleteRecords(ctx context.Context, topic string, p int32, offset int64) (int64, error) {
	part, err := b.partition(topic, p)
	if err != nil {
		return -1, err
	}
	start, next := part.Log.Bounds()
	if offset == -1 {
		offset = next
	}
	if offset < 0 || offset > next {
		return -1, kerr.OffsetOutOfRange
	}
	if offset > start {
		if _, err := b.propose(ctx, &fsm.TrimLog{Topic: topic, Partition: p, Start: offset}, kerr.NotLeaderForPartition); err != nil {
			return -1, err
		}
	}
	return part.Log.Start(), nil
}
