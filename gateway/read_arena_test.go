package gateway

import "testing"

// The arena's buffers go back to their pool at release and come out again
// for the next fetch; reads smaller than the smallest class or larger than
// the largest get their own.
func TestReadArenaReusesBuffersAfterRelease(t *testing.T) {
	var pools readPools
	a := newReadArena(&pools)
	b := a.alloc(100 << 10)
	if len(b) != 100<<10 || cap(b) != 128<<10 {
		t.Fatalf("alloc(100 KiB): len %d cap %d, want 100 KiB in a 128 KiB buffer", len(b), cap(b))
	}
	small := a.alloc(10)
	if len(small) != 10 || cap(small) != 10 {
		t.Fatalf("alloc(10): len %d cap %d, want a buffer of its own", len(small), cap(small))
	}
	if c := a.alloc(64 << 10); cap(c) != 64<<10 {
		t.Fatalf("alloc(64 KiB): cap %d, want the 64 KiB class", cap(c))
	}
	huge := a.alloc(17 << 20)
	if len(huge) != 17<<20 {
		t.Fatalf("alloc(17 MiB): len %d", len(huge))
	}
	a.release()
	// sync.Pool may drop any buffer put into it (at a GC, and at random
	// under the race detector), so a dropped buffer is gone for good: each
	// try releases a buffer of its own and looks for it in the next read.
	reused := false
	for try := 0; try < 32 && !reused; try++ {
		first := newReadArena(&pools)
		b := first.alloc(100 << 10)
		first.release()
		next := newReadArena(&pools)
		c := next.alloc(120 << 10)
		reused = &c[:1][0] == &b[:1][0]
		next.release()
	}
	if !reused {
		t.Fatal("a released 128 KiB buffer never came back for the next read of its class")
	}
}
