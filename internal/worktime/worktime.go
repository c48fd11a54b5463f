// Package worktime measures how long a request keeps a node busy: its time
// from start to answer less the time it spent waiting on others — the Raft
// log, another node, Iggy, a long poll, a rebalance. Kafka's request quotas
// (KIP-124) count the time a request spends on the broker's threads, not in
// purgatory; this is kgate's equivalent.
//
// A request carries a Meter in its context; every place that blocks on
// something outside the node marks the wait with Wait. Waits that overlap
// (nested, or on parallel goroutines of one request) count once.
package worktime

import (
	"context"
	"sync"
	"time"
)

// Meter adds up one request's waiting time.
type Meter struct {
	mu     sync.Mutex
	depth  int
	since  time.Time
	waited time.Duration
}

type ctxKey struct{}

// With returns ctx carrying m.
func With(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, ctxKey{}, m)
}

// Wait marks the start of a wait on something outside the node; call the
// function it returns when the wait ends. Without a Meter in ctx it costs
// one context lookup.
func Wait(ctx context.Context) (end func()) {
	m, _ := ctx.Value(ctxKey{}).(*Meter)
	if m == nil {
		return nop
	}
	m.mu.Lock()
	if m.depth == 0 {
		m.since = time.Now()
	}
	m.depth++
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.depth--
			if m.depth == 0 {
				m.waited += time.Since(m.since)
			}
			m.mu.Unlock()
		})
	}
}

func nop() {}

// Waited is the waiting time so far, a wait still running included; none
// for a nil Meter.
func (m *Meter) Waited() time.Duration {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.waited
	if m.depth > 0 {
		d += time.Since(m.since)
	}
	return d
}

// Busy is the time the request kept the node busy over elapsed, the time
// from its start to its answer.
func (m *Meter) Busy(elapsed time.Duration) time.Duration {
	return max(elapsed-m.Waited(), 0)
}
