package embedded

import (
	"context"
	"path/filepath"

	"github.com/kgate/kgate/gateway"
)

var _ gateway.LogDirReporter = (*Backend)(nil)

// LogDirs reports this node's partition directory and every partition's
// bytes on disk there.
func (b *Backend) LogDirs(context.Context) ([]gateway.LogDir, error) {
	path, err := filepath.Abs(b.fsm.TopicsDir())
	if err != nil {
		path = b.fsm.TopicsDir()
	}
	d := gateway.LogDir{Path: path}
	d.TotalBytes, d.UsableBytes = diskSpace(path)
	for _, t := range b.fsm.Topics() {
		for p := int32(0); p < t.Partitions; p++ {
			if part := b.fsm.Partition(t.Name, p); part != nil {
				d.Partitions = append(d.Partitions, gateway.PartitionSize{Topic: t.Name, Partition: p, Bytes: part.Log.Size()})
			}
		}
	}
	return []gateway.LogDir{d}, nil
}
