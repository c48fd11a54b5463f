package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/kgate/kgate/fsm"
)

// oneQuota applies one quota to every client id, measured per client id.
type oneQuota float64

func (q oneQuota) QuotaFor(_, clientID, _ string) (float64, string, string, bool) {
	return float64(q), "", clientID, true
}
func (oneQuota) ClientQuotas() []fsm.ClientQuota { return nil }
func (oneQuota) AlterClientQuotas(context.Context, []fsm.QuotaAlteration) ([]int16, error) {
	return nil, nil
}

// TestThrottlerHoldsClientToQuota drives the throttler with a fake clock: a
// client that sends the next request as soon as its throttle (plus a
// request's latency) has passed ends up within 2 % of its quota; the first
// requests pass unthrottled (a fresh window counts as 10 samples long, as
// in Kafka); another client id has its own rate.
func TestThrottlerHoldsClientToQuota(t *testing.T) {
	const quota = 1 << 20
	const size = 16 << 10
	for _, latency := range []time.Duration{0, 5 * time.Millisecond} {
		start := time.Unix(1_700_000_000, 0)
		now := start
		th := throttler{window: 100 * time.Millisecond, now: func() time.Time { return now }}
		if d := th.record(oneQuota(quota), producerByteRate, anonymousUser, "c", size); d != 0 {
			t.Fatalf("first request throttled %v", d)
		}
		var sent float64
		var measureFrom time.Time
		for now.Sub(start) < 30*time.Second {
			if measureFrom.IsZero() && now.Sub(start) >= 5*time.Second {
				measureFrom, sent = now, 0
			}
			d := th.record(oneQuota(quota), producerByteRate, anonymousUser, "c", size)
			if d < 0 || d > quotaSamples*th.window {
				t.Fatalf("throttle %v out of bounds", d)
			}
			sent += size
			now = now.Add(latency + d)
		}
		rate := sent / now.Sub(measureFrom).Seconds()
		if rate < 0.98*quota || rate > 1.02*quota {
			t.Errorf("latency %v: %.0f B/s under a quota of %d", latency, rate, quota)
		}
		if d := th.record(oneQuota(quota), producerByteRate, anonymousUser, "other", size); d != 0 {
			t.Errorf("another client id throttled %v", d)
		}
	}
}

// TestThrottlerForgetsIdleSensors: sensors are bounded; idle ones go first.
func TestThrottlerForgetsIdleSensors(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	th := throttler{window: time.Second, now: func() time.Time { return now }}
	for i := 0; i < maxQuotaSensors; i++ {
		th.record(oneQuota(1e9), producerByteRate, anonymousUser, string(rune(i)), 1)
	}
	now = now.Add(time.Minute)
	th.record(oneQuota(1e9), producerByteRate, anonymousUser, "late", 1)
	if len(th.sensors) != 1 {
		t.Fatalf("%d sensors after all but one went idle, want 1", len(th.sensors))
	}
}
