package procstat

import (
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
