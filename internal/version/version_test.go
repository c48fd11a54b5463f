package version

import (
	"runtime"
	"testing"
)

// TestGet: the stamped version and commit win; the Go version is the
// toolchain's.
func TestGet(t *testing.T) {
	if v := Get(); v.Version == "" || v.GoVersion != runtime.Version() {
		t.Fatalf("unstamped: %+v", v)
	}
	Version, Commit = "v9.9.9", "abc123"
	defer func() { Version, Commit = "", "" }()
	if v := Get(); v.Version != "v9.9.9" || v.Commit != "abc123" {
		t.Fatalf("stamped: %+v", v)
	}
}
