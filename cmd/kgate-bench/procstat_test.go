package main

import (
	"encoding/json"
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
}

// TestPhaseCPU: with a server pid (here this process's own), a phase's
// CPU time per GB is reported for both, and the report prints it.
func TestPhaseCPU(t *testing.T) {
	if startPhaseCPU(nil) != nil {
		t.Fatal("CPU measured without -server-pid")
	}
	p := startPhaseCPU([]int{os.Getpid()})
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

// TestPhaseDisk: with a server pid (here this process's own), the bytes
// it writes to disk during the produce phase are reported per byte
// produced, with its peak RSS, and the report prints them.
func TestPhaseDisk(t *testing.T) {
	if startPhaseDisk(nil) != nil {
		t.Fatal("disk writes measured without -server-pid")
	}
	pids := []int{os.Getpid(), os.Getpid()}
	d := startPhaseDisk(pids)
	if d == nil {
		t.Fatal("this process's write_bytes cannot be read from /proc")
	}
	// A MiB written and synced (the temporary directory must be on a disk
	// file system: tmpfs pages never reach storage).
	f, err := os.Create(t.TempDir() + "/segment")
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
	var r result
	r.setDisk(d, 1<<19, pids) // "produced" half of what was written
	if !r.DiskMeasured || len(r.ServerWriteBytesPerByteProduceEach) != 2 || r.ServerWriteBytesPerByteProduce < 2 {
		t.Fatalf("write bytes per byte produced %v (each %v), measured %v; want at least 2 each",
			r.ServerWriteBytesPerByteProduce, r.ServerWriteBytesPerByteProduceEach, r.DiskMeasured)
	}
	if len(r.ServerPeakRSSMiBEach) != 2 || r.ServerPeakRSSMiB < 1 {
		t.Fatalf("peak RSS %v MiB (each %v)", r.ServerPeakRSSMiB, r.ServerPeakRSSMiBEach)
	}

	var out strings.Builder
	r = result{Label: "kgate-3node", Partitions: 8, OK: true, DiskMeasured: true,
		ServerWriteBytesPerByteProduce: 2.03, ServerWriteBytesPerByteProduceEach: []float64{2.01, 2.03, 2.02},
		ServerPeakRSSMiB: 900, ServerPeakRSSMiBEach: []float64{870, 900, 880.4}}
	if err := writeTable(&out, []result{r}); err != nil {
		t.Fatal(err)
	}
	if want := "kgate-3node, 8 partitions: server bytes written to disk per byte produced 2.03 (each: 2.01, 2.03, 2.02); peak RSS (VmHWM) 900 MiB (each: 870, 900, 880)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant the line %q", out.String(), want)
	}
}

// TestWriteJSONFile: -json-file gets the same results as -json prints.
func TestWriteJSONFile(t *testing.T) {
	name := t.TempDir() + "/r.json"
	in := []result{{Label: "kafka", Partitions: 8, ProduceMiBPerS: 150.5, OK: true, DiskMeasured: true, ServerPeakRSSMiB: 700}}
	if err := writeJSONFile(name, in); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var got []result
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Label != "kafka" || got[0].ProduceMiBPerS != 150.5 || got[0].ServerPeakRSSMiB != 700 || !got[0].OK {
		t.Errorf("read back %+v", got)
	}
	if err := writeJSONFile(t.TempDir()+"/no/such/dir/r.json", in); err == nil {
		t.Error("no error writing into a missing directory")
	}
}
