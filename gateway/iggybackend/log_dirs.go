package iggybackend

import (
	"context"
	"slices"
	"sort"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
)

var _ gateway.LogDirReporter = (*Backend)(nil)

// LogDirs reports the partition sizes Iggy itself reports, one "directory"
// per Iggy stream, named iggy:<stream>. Every node answers the same: they
// all reach the same Iggy server. Its disk space is not known here (-1).
func (b *Backend) LogDirs(ctx context.Context) ([]gateway.LogDir, error) {
	type loc struct{ name, stream, iggy string }
	b.mu.RLock()
	locs := make([]loc, 0, len(b.topics))
	for _, t := range b.topics {
		locs = append(locs, loc{t.name, t.stream, t.iggy})
	}
	b.mu.RUnlock()
	sort.Slice(locs, func(i, j int) bool { return locs[i].name < locs[j].name })
	byStream := map[string]*gateway.LogDir{}
	for _, l := range locs {
		td, found, err := b.client.GetTopic(ctx, iggy.NamedID(l.stream), iggy.NamedID(l.iggy))
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		d := byStream[l.stream]
		if d == nil {
			d = &gateway.LogDir{Path: "iggy:" + l.stream, TotalBytes: -1, UsableBytes: -1}
			byStream[l.stream] = d
		}
		// Kafka partition i is the Iggy partition with the i-th smallest id.
		parts := slices.Clone(td.Partitions)
		sort.Slice(parts, func(i, j int) bool { return parts[i].ID < parts[j].ID })
		for i, p := range parts {
			d.Partitions = append(d.Partitions, gateway.PartitionSize{Topic: l.name, Partition: int32(i), Bytes: int64(p.SizeBytes)})
		}
	}
	out := make([]gateway.LogDir, 0, len(byStream))
	for _, d := range byStream {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
