package main

import (
	"math/bits"
	"time"
)

// histogram records durations in a log-linear layout (like HdrHistogram):
// exact below 2^subBits microseconds, then 2^subBits buckets per power of
// two, so any quantile is within 1/2^subBits (<1%) of the true value while
// memory stays fixed however many values are recorded. Not safe for
// concurrent use; merge per-goroutine histograms instead.
type histogram struct {
	counts [numBuckets]uint64
	total  uint64
	max    uint64 // microseconds
}

const (
	subBits    = 7
	subCount   = 1 << subBits
	numBuckets = subCount + (64-subBits)*subCount
)

func bucketOf(us uint64) int {
	if us < subCount {
		return int(us)
	}
	shift := bits.Len64(us) - subBits - 1 // us>>shift is in [subCount, 2*subCount)
	return subCount + shift*subCount + int(us>>shift) - subCount
}

// bucketMid returns the midpoint of bucket i's value range, in microseconds.
func bucketMid(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	shift := (i - subCount) / subCount
	lo := uint64(i-subCount*(shift+1)+subCount) << shift
	return lo + (uint64(1)<<shift)/2
}

func (h *histogram) record(d time.Duration) {
	us := uint64(0)
	if d > 0 {
		us = uint64(d / time.Microsecond)
	}
	h.counts[bucketOf(us)]++
	h.total++
	h.max = max(h.max, us)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// quantile returns the value at quantile q in [0, 1], or 0 if empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.5)
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(bucketMid(i), h.max)) * time.Microsecond
		}
	}
	return time.Duration(h.max) * time.Microsecond
}

func (h *histogram) maxValue() time.Duration { return time.Duration(h.max) * time.Microsecond }
