package coordinator

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metricValue gathers the coordinator's metrics and returns one series.
func metricValue(t *testing.T, c *Coordinator, name, label, value string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == label && lp.GetValue() == value {
					if m.Counter != nil {
						return m.Counter.GetValue()
					}
					return m.Gauge.GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// TestRebalanceAndParkedMetrics: each rebalance is counted once under its
// reason, and parked joins show while they wait.
func TestRebalanceAndParkedMetrics(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := activeHarness(t, Config{})
		rebalances := func(reason string) float64 {
			return metricValue(t, h.c, "kgate_group_rebalances_total", "reason", reason)
		}

		// Two groups form: one rebalance each, however many members join.
		a, _ := h.stable(jreq("a", "", "a1"), jreq("a", "", "a2"), jreq("a", "", "a3"))
		b, _ := h.stable(jreq("b", "", "b1"), jreq("b", "", "b2"))
		if got := rebalances(reasonJoin); got != 2 {
			t.Fatalf("member_joined = %v after two groups formed, want 2", got)
		}

		// A member leaves group a.
		if _, code := h.c.Leave(h.ctx, "a", []LeaveMember{{MemberID: a[0]}}); code != 0 {
			t.Fatalf("leave: %d", code)
		}
		if got := rebalances(reasonLeave); got != 1 {
			t.Fatalf("member_left = %v, want 1", got)
		}

		// A member of group b stops heartbeating.
		for range 4 {
			h.advance(2 * time.Second)
			if code := h.hb("b", b[0], "", 1); code != codeNone {
				t.Fatalf("heartbeat: %d", code)
			}
		}
		h.advance(testSession)
		if got := rebalances(reasonSession); got != 1 {
			t.Fatalf("session_expired = %v, want 1", got)
		}
		if got := rebalances(reasonJoin); got != 2 {
			t.Fatalf("member_joined = %v after leave and expiry, want still 2", got)
		}

		// A join into a new group waits for the initial rebalance delay.
		ch := h.join(jreq("c", "", "c1"))
		synctest.Wait()
		if got := metricValue(t, h.c, "kgate_group_parked_requests", "api", "JoinGroup"); got != 1 {
			t.Fatalf("parked JoinGroup = %v, want 1", got)
		}
		h.advance(initialDelay)
		ready(t, ch, "JoinGroup of c1")
		if got := metricValue(t, h.c, "kgate_group_parked_requests", "api", "JoinGroup"); got != 0 {
			t.Fatalf("parked JoinGroup = %v after it was answered, want 0", got)
		}
	})
}
