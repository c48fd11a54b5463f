package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseTicks(t *testing.T) {
	line := "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 8 0 100 0 0\n"
	got, err := ParseTicks([]byte(line))
	if err != nil || got != 325 {
		t.Errorf("got %d, %v; want 325", got, err)
	}
	if _, err := ParseTicks([]byte("1234 (x) S 1 2")); err == nil {
		t.Error("short line: no error")
	}
}

func TestCPUSelf(t *testing.T) {
	a, err := CPU("self")
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := CPU("self")
	if err != nil {
		t.Fatal(err)
	}
	if b <= a {
		t.Errorf("CPU time %v then %v after 50 ms of spinning", a, b)
	}
}

func TestField(t *testing.T) {
	io := "rchar: 10\nwchar: 20\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n"
	if n, err := field([]byte(io), "write_bytes:", "", "io"); err != nil || n != 4096 {
		t.Errorf("write_bytes: %d, %v; want 4096", n, err)
	}
	status := "Name:\tkgate\nVmHWM:\t  123456 kB\nVmRSS:\t  100000 kB\n"
	if n, err := field([]byte(status), "VmHWM:", "kB", "status"); err != nil || n != 123456 {
		t.Errorf("VmHWM: %d, %v; want 123456", n, err)
	}
	for _, bad := range []string{"VmHWM:\t12 MB\n", "VmHWM:\t12\n", "VmHWM:\tx kB\n", "VmRSS:\t12 kB\n"} {
		if n, err := field([]byte(bad), "VmHWM:", "kB", "status"); err == nil {
			t.Errorf("%q: %d, no error", bad, n)
		}
	}
}

// TestWriteBytesSelf: a MiB written and synced by this process shows in
// its write_bytes (the temporary directory must be on a disk file system:
// tmpfs pages are never sent to storage), and its peak RSS is there.
func TestWriteBytesSelf(t *testing.T) {
	before, err := WriteBytes("self")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	after, err := WriteBytes("self")
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 1<<20 {
		t.Errorf("write_bytes grew by %d after writing and syncing 1 MiB", after-before)
	}
	// RSS first: the peak read after it is at least as high.
	rss, err := RSS("self")
	if err != nil || rss < 1<<20 {
		t.Errorf("VmRSS %d bytes, %v", rss, err)
	}
	peak, err := PeakRSS("self")
	if err != nil || peak < rss {
		t.Errorf("VmHWM %d bytes below VmRSS %d read before it, %v", peak, rss, err)
	}
}
