package iggy_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/gateway/iggy"
)

// gathered returns the value of one series (a counter, gauge, or a
// histogram's count) of the client's metrics; -1 when absent.
func gathered(t *testing.T, cl *iggy.Client, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cl)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.Metric {
			for k, v := range labels {
				ok := false
				for _, lp := range m.Label {
					ok = ok || lp.GetName() == k && lp.GetValue() == v
				}
				if !ok {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

// TestClientMetrics: requests, latency, reconnects, errors, pool and
// dialect as an operator scrapes them.
func TestClientMetrics(t *testing.T) {
	srv := startDouble(t, iggy.Current)
	cl := newClient(t, srv.Addr(), 0, 3)
	ctx := ctxT(t)
	if got := gathered(t, cl, "kgate_iggy_dialect", map[string]string{"dialect": "current"}); got != -1 {
		t.Fatalf("dialect reported before any connection: %v", got)
	}
	if _, err := cl.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, _, err := cl.GetStream(ctx, iggy.NamedID("s")); err != nil {
			t.Fatal(err)
		}
	}
	srv.DropConnections()
	if _, _, _, err := cl.GetStream(ctx, iggy.NamedID("s")); err != nil {
		t.Fatalf("read after a dropped connection: %v", err)
	}
	get := map[string]string{"command": "get_stream"}
	for name, want := range map[string]float64{
		"kgate_iggy_requests_total":           3,
		"kgate_iggy_request_duration_seconds": 3,
		"kgate_iggy_reconnects_total":         1,
	} {
		if got := gathered(t, cl, name, get); got != want {
			t.Errorf("%s{command=get_stream} = %v, want %v", name, got, want)
		}
	}
	if got := gathered(t, cl, "kgate_iggy_requests_total", map[string]string{"command": "create_stream"}); got != 1 {
		t.Errorf("create_stream requests = %v, want 1", got)
	}
	if got := gathered(t, cl, "kgate_iggy_dialect", map[string]string{"dialect": "current"}); got != 1 {
		t.Errorf("dialect current = %v, want 1", got)
	}
	if got := gathered(t, cl, "kgate_iggy_pool_max_connections", nil); got != 3 {
		t.Errorf("pool max = %v, want 3", got)
	}
	if got := gathered(t, cl, "kgate_iggy_pool_connections", map[string]string{"state": "in_use"}); got != 0 {
		t.Errorf("in use while idle = %v", got)
	}
	if got := gathered(t, cl, "kgate_iggy_pool_connections", map[string]string{"state": "idle"}); got < 1 {
		t.Errorf("idle = %v, want at least 1", got)
	}
	if got := gathered(t, cl, "kgate_iggy_connects_total", map[string]string{"result": "ok"}); got < 2 {
		t.Errorf("connects ok = %v, want at least 2 (one before and one after the drop)", got)
	}

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("ping answered with the server down")
	}
	if got := gathered(t, cl, "kgate_iggy_request_errors_total", map[string]string{"command": "ping"}); got != 1 {
		t.Errorf("ping errors = %v, want 1", got)
	}
}
