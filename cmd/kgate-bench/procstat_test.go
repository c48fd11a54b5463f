package main

import (
	"testing"
	"time"
)

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
