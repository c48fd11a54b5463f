package worktime

import (
	"context"
	"testing"
	"time"
)

// TestWaitsCountOnce: nested and overlapping waits count as the time during
// which any of them ran; a context without a Meter is fine.
func TestWaitsCountOnce(t *testing.T) {
	var m Meter
	ctx := With(context.Background(), &m)

	outer := Wait(ctx)
	inner := Wait(ctx)
	time.Sleep(20 * time.Millisecond) // the wait being measured, not a synchronization
	inner()
	inner() // ending twice counts once
	outer()
	first := m.Waited()
	if first < 20*time.Millisecond || first > time.Second {
		t.Fatalf("nested waits of 20 ms counted %v", first)
	}

	// Busy is the rest of the elapsed time, never below zero.
	if b := m.Busy(first + 5*time.Millisecond); b != 5*time.Millisecond {
		t.Errorf("busy %v of %v elapsed with %v waited, want 5ms", b, first+5*time.Millisecond, first)
	}
	if b := m.Busy(first / 2); b != 0 {
		t.Errorf("busy %v when the waits outlasted the elapsed time", b)
	}

	// A wait still running counts up to now.
	end := Wait(ctx)
	if m.Waited() < first {
		t.Error("a running wait lowered the total")
	}
	end()

	Wait(context.Background())() // no Meter: nothing to count
	var none *Meter
	if none.Waited() != 0 || none.Busy(time.Second) != time.Second {
		t.Error("a nil Meter must count no waits")
	}
}
