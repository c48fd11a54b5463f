package main

import (
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	line := "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 8 0 100 0 0\n"
	got, err := parseStatTicks([]byte(line))
	if err != nil || got != 325 {
		t.Errorf("got %d, %v; want 325", got, err)
	}
	if _, err := parseStatTicks([]byte("1234 (x) S 1 2")); err == nil {
		t.Error("short line: no error")
	}
}

func TestReadProcCPUSelf(t *testing.T) {
	a, err := readProcCPU("self")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := readProcCPU("self")
	if err != nil {
		t.Fatal(err)
	}
	if p := cpuPercent(a, b); p < 0 || p > 100*float64(1024) {
		t.Errorf("cpu %.1f%%", p)
	}
	if _, err := readRSS("self"); err != nil {
		t.Error(err)
	}
}
