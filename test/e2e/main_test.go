package e2e

import (
	"testing"

	"github.com/kgate/kgate/internal/mountns"
)

// TestMain runs the tests in a mount namespace of their own (as root, on
// Linux): the small disks the full-disk tests mount then go with the test
// binary even when its timeout or a kill ends it before their cleanups.
func TestMain(m *testing.M) { mountns.Main(m) }
