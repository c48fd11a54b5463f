package main

import (
	"math"
	"runtime/metrics"
)

// runtimeHists are this process's Go runtime histograms of how long
// runnable goroutines waited for a thread (scheduling delay) and of GC
// stop-the-world pauses. Their change over a window tells how much of a
// latency measured here is the load tool's own: an answer that arrived is
// only timed once the goroutine reading it runs.
type runtimeHists struct {
	sched, gc *metrics.Float64Histogram
}

const (
	schedLatencies = "/sched/latencies:seconds"
	gcPauses       = "/sched/pauses/total/gc:seconds"
)

func readRuntimeHists() runtimeHists {
	s := []metrics.Sample{{Name: schedLatencies}, {Name: gcPauses}}
	metrics.Read(s)
	var h runtimeHists
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		h.sched = s[0].Value.Float64Histogram()
	}
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		h.gc = s[1].Value.Float64Histogram()
	}
	return h
}

// histDelta is the histogram of the samples recorded between a and b
// (the same metric read twice); nil if either is missing.
func histDelta(a, b *metrics.Float64Histogram) *metrics.Float64Histogram {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return nil
	}
	d := &metrics.Float64Histogram{Buckets: b.Buckets, Counts: make([]uint64, len(b.Counts))}
	for i := range b.Counts {
		d.Counts[i] = b.Counts[i] - a.Counts[i]
	}
	return d
}

// histQuantile is the upper bound of the bucket holding quantile q (the
// lower bound for the last, unbounded bucket), in seconds; 0 if empty.
func histQuantile(h *metrics.Float64Histogram, q float64) float64 {
	if h == nil {
		return 0
	}
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank && c > 0 {
			if hi := h.Buckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return h.Buckets[i]
		}
	}
	return 0
}
