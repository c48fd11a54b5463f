package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// With WithPprof the admin API serves an execution trace (where a Raft
// round waits), not only CPU profiles; without it, no profile at all.
func TestPprofServesExecutionTrace(t *testing.T) {
	get := func(opts ...Option) (int, string) {
		t.Helper()
		srv := httptest.NewServer(New(Config{}, opts...).srv.Handler)
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/debug/pprof/trace?seconds=0.05")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	code, body := get(WithPprof())
	if code != http.StatusOK || !strings.HasPrefix(body, "go 1.") {
		t.Fatalf("trace with pprof on: %d, %q", code, body[:min(len(body), 40)])
	}
	if code, _ := get(); code != http.StatusNotFound {
		t.Fatalf("trace with pprof off: %d, want 404", code)
	}
}
