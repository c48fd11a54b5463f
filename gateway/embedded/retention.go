package embedded

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/fsm/partlog"
)

// RunRetention enforces retention.ms and retention.bytes until ctx ends, every
// interval and right after a topic's configs change. It is a leader service
// (cluster.Node.RunWhileLeader): only the leader decides, from segment
// facts, the topic configs as now applied and its own clock; the decision is
// a TrimLog command, so every node deletes the same segments.
func (b *Backend) RunRetention(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.retentionKick:
		}
		b.enforceRetention(ctx)
	}
}

func (b *Backend) enforceRetention(ctx context.Context) {
	nowMs := b.now().UnixMilli()
	for _, t := range b.fsm.Topics() {
		if !deletes(t.Configs) {
			continue
		}
		retMs := configInt(t.Configs, "retention.ms", 7*24*3600*1000)
		retBytes := configInt(t.Configs, "retention.bytes", -1)
		for p := int32(0); p < t.Partitions; p++ {
			part := b.fsm.Partition(t.Name, p)
			if part == nil {
				continue
			}
			segs := part.Log.Segments()
			start := retentionStart(segs, part.Log.Start(), nowMs, retMs, retBytes)
			if start <= part.Log.Start() {
				continue
			}
			if _, err := b.propose(ctx, &fsm.TrimLog{Topic: t.Name, Partition: p, Start: start}, kerr.NotController); err != nil {
				b.log.Warn("retention trim", "topic", t.Name, "partition", p, "err", err)
				continue
			}
			for _, s := range segs {
				if s.End <= start { // holds nothing at or after the new start: deleted
					b.metrics.retentionSegments.Inc()
					b.metrics.retentionBytes.Add(float64(s.Bytes))
				}
			}
		}
	}
}

// retentionStart returns the log start offset retention allows: whole
// segments go when all their records are older than retention.ms or while
// the rest still exceeds retention.bytes. The newest segment always stays.
func retentionStart(segs []partlog.SegmentInfo, start, nowMs, retMs, retBytes int64) int64 {
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	for i := 0; i+1 < len(segs); i++ {
		s := segs[i]
		expired := retMs >= 0 && s.MaxTs >= 0 && nowMs-s.MaxTs > retMs
		oversize := retBytes >= 0 && total-s.Bytes >= retBytes
		if !expired && !oversize {
			break
		}
		total -= s.Bytes
		start = max(start, s.End)
	}
	return start
}

// deletes reports whether the topic's cleanup.policy includes "delete"
// (the default). A compact-only topic is never trimmed by retention: Kafka
// applies retention.ms and retention.bytes with "delete" only, and kgate
// does not compact, so such a topic keeps every record.
func deletes(cfg map[string]string) bool {
	v, ok := cfg["cleanup.policy"]
	if !ok {
		return true
	}
	for _, it := range strings.Split(v, ",") {
		if strings.TrimSpace(it) == "delete" {
			return true
		}
	}
	return false
}

func configInt(cfg map[string]string, key string, def int64) int64 {
	if v, ok := cfg[key]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}
