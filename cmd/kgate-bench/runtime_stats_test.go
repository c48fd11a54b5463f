package main

import (
	"math"
	"runtime/metrics"
	"testing"
)

func TestHistQuantileOfDelta(t *testing.T) {
	buckets := []float64{0, 0.001, 0.01, 0.1, math.Inf(1)}
	a := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{5, 0, 0, 0}}
	b := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{203, 1, 0, 0}}
	d := histDelta(a, b) // 198 under 1 ms, 1 under 10 ms
	if got := histQuantile(d, 0.5); got != 0.001 {
		t.Errorf("p50 %v, want 0.001", got)
	}
	if got := histQuantile(d, 0.99); got != 0.001 {
		t.Errorf("p99 %v, want 0.001 (of 199 samples the 198th is under 1 ms)", got)
	}
	if got := histQuantile(d, 1); got != 0.01 {
		t.Errorf("max %v, want 0.01", got)
	}
	b.Counts[3] = 2 // two in the unbounded bucket: its lower bound
	if got := histQuantile(histDelta(a, b), 1); got != 0.1 {
		t.Errorf("max %v, want 0.1", got)
	}
	if got := histQuantile(histDelta(a, a), 0.99); got != 0 {
		t.Errorf("empty: %v, want 0", got)
	}
	if histDelta(nil, b) != nil || histDelta(a, &metrics.Float64Histogram{Buckets: buckets[:3], Counts: []uint64{0, 0}}) != nil {
		t.Error("missing or mismatched histograms give a delta")
	}
	if h := readRuntimeHists(); h.sched == nil || h.gc == nil {
		t.Errorf("runtime histograms not read: %+v", h)
	}
}
