package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketRoundTrip(t *testing.T) {
	for _, us := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 12345, 1 << 20, 1<<40 + 12345, 1<<63 + 5} {
		i := bucketOf(us)
		if i < 0 || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d out of range", us, i)
		}
		mid := bucketMid(i)
		if bucketOf(mid) != i {
			t.Errorf("bucketMid(%d) = %d maps to bucket %d", i, mid, bucketOf(mid))
		}
		diff := float64(mid) - float64(us)
		if diff < 0 {
			diff = -diff
		}
		if us > 0 && diff/float64(us) > 1.0/subCount {
			t.Errorf("value %d: bucket midpoint %d off by more than 1/%d", us, mid, subCount)
		}
	}
	for i := 1; i < numBuckets; i++ {
		if bucketMid(i) <= bucketMid(i-1) {
			t.Fatalf("bucket midpoints not increasing at %d", i)
		}
	}
}

func TestQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h histogram
	vals := make([]time.Duration, 100000)
	for i := range vals {
		vals[i] = time.Duration(r.ExpFloat64() * float64(3*time.Millisecond))
		h.record(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := vals[int(q*float64(len(vals)))-1]
		got := h.quantile(q)
		if d := float64(got-want) / float64(want); d > 0.02 || d < -0.02 {
			t.Errorf("q%.3f = %v, want ~%v", q, got, want)
		}
	}
	var merged histogram
	merged.merge(&h)
	merged.merge(&h)
	if merged.total != 2*h.total || merged.quantile(0.5) != h.quantile(0.5) || merged.maxValue() != h.maxValue() {
		t.Errorf("merge changed the distribution")
	}
	var empty histogram
	if empty.quantile(0.99) != 0 {
		t.Errorf("empty quantile not 0")
	}
}
