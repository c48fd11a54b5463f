package embedded

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	retentionSegments prometheus.Counter
	retentionBytes    prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		retentionSegments: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_retention_deleted_segments_total",
			Help: "Log segments retention deleted (counted by the leader, which decides; every node deletes the same).",
		}),
		retentionBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_retention_deleted_bytes_total",
			Help: "Bytes of the log segments retention deleted (counted by the leader, which decides).",
		}),
	}
}

var (
	descPartBytes = prometheus.NewDesc("kgate_partition_size_bytes",
		"Bytes of a partition's log on this node's disk.", []string{"topic", "partition"}, nil)
	descPartSegments = prometheus.NewDesc("kgate_partition_segments",
		"Segment files of a partition's log on this node.", []string{"topic", "partition"}, nil)
	descPartStart = prometheus.NewDesc("kgate_partition_log_start_offset",
		"First offset still kept in a partition.", []string{"topic", "partition"}, nil)
	descPartEnd = prometheus.NewDesc("kgate_partition_high_watermark",
		"Offset the next record of a partition gets (as this node has applied).", []string{"topic", "partition"}, nil)
)

// Describe implements prometheus.Collector.
func (b *Backend) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPartBytes
	ch <- descPartSegments
	ch <- descPartStart
	ch <- descPartEnd
	b.metrics.retentionSegments.Describe(ch)
	b.metrics.retentionBytes.Describe(ch)
}

// Collect implements prometheus.Collector: every partition's log, read now.
func (b *Backend) Collect(ch chan<- prometheus.Metric) {
	for _, t := range b.fsm.Topics() {
		for p := int32(0); p < t.Partitions; p++ {
			part := b.fsm.Partition(t.Name, p)
			if part == nil {
				continue
			}
			ps := strconv.Itoa(int(p))
			segs := part.Log.Segments()
			var size int64
			for _, s := range segs {
				size += s.Bytes
			}
			start, end := part.Log.Bounds()
			ch <- prometheus.MustNewConstMetric(descPartBytes, prometheus.GaugeValue, float64(size), t.Name, ps)
			ch <- prometheus.MustNewConstMetric(descPartSegments, prometheus.GaugeValue, float64(len(segs)), t.Name, ps)
			ch <- prometheus.MustNewConstMetric(descPartStart, prometheus.GaugeValue, float64(start), t.Name, ps)
			ch <- prometheus.MustNewConstMetric(descPartEnd, prometheus.GaugeValue, float64(end), t.Name, ps)
		}
	}
	b.metrics.retentionSegments.Collect(ch)
	b.metrics.retentionBytes.Collect(ch)
}
