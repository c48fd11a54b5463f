package main

import (
	"os"
	"strings"
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

// TestPhaseCPU: with a server pid (here this process's own), a phase's
// CPU time per GB is reported for both, and the report prints it.
func TestPhaseCPU(t *testing.T) {
	if startPhaseCPU(0) != nil {
		t.Fatal("CPU measured without -server-pid")
	}
	p := startPhaseCPU(os.Getpid())
	if p == nil {
		t.Fatal("this process's CPU time cannot be read from /proc")
	}
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	server, self, ok := p.perGB(5e8) // half a GB
	if !ok || server <= 0 || self <= 0 {
		t.Fatalf("server %v s/GB, self %v s/GB, ok %v", server, self, ok)
	}
	var out strings.Builder
	r := result{Label: "kgate", Partitions: 8, OK: true, CPUMeasured: true, ServerCPUPerGBProduce: 1.5, ClientCPUPerGBProduce: 0.5,
		ServerCPUPerGBConsume: 1.25, ClientCPUPerGBConsume: 1}
	if err := writeTable(&out, []result{r}); err != nil {
		t.Fatal(err)
	}
	if want := "kgate, 8 partitions: CPU s per GB of records: produce server 1.500, client 0.500; consume server 1.250, client 1.000\n"; !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant the line %q", out.String(), want)
	}
}
