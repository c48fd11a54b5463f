// Package mountns runs a test binary in a mount namespace of its own, so
// that the file systems its tests mount (the small disks of the full-disk
// tests) go with it however it ends: a test killed by its timeout, or a
// SIGKILL, runs no cleanup, and a mount made in the shared namespace stays
// in /tmp for good. In a namespace of its own nothing is left: the kernel
// drops the namespace, and its mounts, with its last process.
package mountns

import (
	"os"
	"testing"
)

// envInside marks the re-executed test binary, already in its namespace.
const envInside = "KGATE_TEST_MOUNT_NS"

// Inside reports whether this process runs in the namespace Run made.
func Inside() bool { return os.Getenv(envInside) != "" }

// Main is a TestMain that runs the tests in a namespace of their own (Run)
// and exits with their status.
func Main(m *testing.M) {
	if code, ran := Run(); ran {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
