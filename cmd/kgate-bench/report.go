package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one run (one partition count) as reported.
type result struct {
	Label       string `json:"label"`
	Brokers     string `json:"brokers"`
	Topic       string `json:"topic"`
	Partitions  int    `json:"partitions"`
	RecordBytes int    `json:"record_bytes"`
	Producers   int    `json:"producers"`
	Acks        string `json:"acks"`
	Compression string `json:"compression"`

	ProducedRecords      int64   `json:"produced_records"`
	ProduceSeconds       float64 `json:"produce_seconds"`
	ProduceRecordsPerS   float64 `json:"produce_records_per_sec"`
	ProduceMiBPerS       float64 `json:"produce_mib_per_sec"`
	ProduceLatencyP50Ms  float64 `json:"produce_latency_p50_ms"`
	ProduceLatencyP99Ms  float64 `json:"produce_latency_p99_ms"`
	ProduceLatencyP999Ms float64 `json:"produce_latency_p999_ms"`
	ProduceLatencyMaxMs  float64 `json:"produce_latency_max_ms"`

	// Batch modes (-txn-records, -flush-records): records per transaction
	// or flush, transactions committed (or flushes), and the wait at the
	// end of each: Flush plus EndTransaction(commit), or the Flush.
	Transactional      bool    `json:"transactional,omitempty"`
	BatchRecords       int     `json:"batch_records,omitempty"`
	Batches            int64   `json:"batches,omitempty"`
	BatchesPerS        float64 `json:"batches_per_sec,omitempty"`
	CommitLatencyP50Ms float64 `json:"commit_latency_p50_ms,omitempty"`
	CommitLatencyP99Ms float64 `json:"commit_latency_p99_ms,omitempty"`
	CommitLatencyMaxMs float64 `json:"commit_latency_max_ms,omitempty"`

	ConsumedRecords    int64   `json:"consumed_records"`
	ConsumeSeconds     float64 `json:"consume_seconds"`
	ConsumeRecordsPerS float64 `json:"consume_records_per_sec"`
	ConsumeMiBPerS     float64 `json:"consume_mib_per_sec"`

	// CPU seconds per GB (10^9 bytes) of record values, of the server
	// (-server-pid) and of kgate-bench itself, in each phase; only with
	// -server-pid. On one machine the two share its cores.
	CPUMeasured           bool    `json:"cpu_measured,omitempty"`
	ServerCPUPerGBProduce float64 `json:"server_cpu_s_per_gb_produce,omitempty"`
	ClientCPUPerGBProduce float64 `json:"client_cpu_s_per_gb_produce,omitempty"`
	ServerCPUPerGBConsume float64 `json:"server_cpu_s_per_gb_consume,omitempty"`
	ClientCPUPerGBConsume float64 `json:"client_cpu_s_per_gb_consume,omitempty"`

	// Each server's (-server-pid) bytes written to disk (write_bytes of
	// /proc/<pid>/io) over the produce phase per byte of record values
	// produced, and its peak RSS (VmHWM) after the run, in the order of
	// -server-pid; the plain fields are the highest of them.
	DiskMeasured                       bool      `json:"disk_measured,omitempty"`
	ServerWriteBytesPerByteProduce     float64   `json:"server_write_bytes_per_byte_produce,omitempty"`
	ServerWriteBytesPerByteProduceEach []float64 `json:"server_write_bytes_per_byte_produce_each,omitempty"`
	ServerPeakRSSMiB                   float64   `json:"server_peak_rss_mib,omitempty"`
	ServerPeakRSSMiBEach               []float64 `json:"server_peak_rss_mib_each,omitempty"`

	// OK is true when both phases completed and the consumer read back
	// exactly the records the producers had acknowledged.
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func (r *result) setProduce(p *produceResult) {
	r.ProducedRecords = p.records
	r.ProduceSeconds = p.elapsed.Seconds()
	r.ProduceRecordsPerS = perSecond(float64(p.records), p.elapsed)
	r.ProduceMiBPerS = perSecond(float64(p.bytes)/(1<<20), p.elapsed)
	r.ProduceLatencyP50Ms = ms(p.latency.quantile(0.50))
	r.ProduceLatencyP99Ms = ms(p.latency.quantile(0.99))
	r.ProduceLatencyP999Ms = ms(p.latency.quantile(0.999))
	r.ProduceLatencyMaxMs = ms(p.latency.maxValue())
	if r.BatchRecords > 0 {
		r.Batches = p.batches
		r.BatchesPerS = perSecond(float64(p.batches), p.elapsed)
		r.CommitLatencyP50Ms = ms(p.endLatency.quantile(0.50))
		r.CommitLatencyP99Ms = ms(p.endLatency.quantile(0.99))
		r.CommitLatencyMaxMs = ms(p.endLatency.maxValue())
	}
}

// setDisk sets the servers' bytes written per byte produced from the
// produce phase's start (d) and their peak RSS as of now; DiskMeasured
// only when every figure could be read.
func (r *result) setDisk(d *phaseDisk, produced int64, pids []int) {
	each, ok := d.perByte(produced)
	if !ok {
		return
	}
	rss, ok := peakRSSMiB(pids)
	if !ok {
		return
	}
	r.DiskMeasured = true
	r.ServerWriteBytesPerByteProduceEach, r.ServerWriteBytesPerByteProduce = each, slices.Max(each)
	r.ServerPeakRSSMiBEach, r.ServerPeakRSSMiB = rss, slices.Max(rss)
}

// updatePeakRSS reads the servers' peak RSS again (after the consume
// phase), when it was measured.
func (r *result) updatePeakRSS(pids []int) {
	if !r.DiskMeasured {
		return
	}
	if rss, ok := peakRSSMiB(pids); ok {
		r.ServerPeakRSSMiBEach, r.ServerPeakRSSMiB = rss, slices.Max(rss)
	}
}

func (r *result) setConsume(c *consumeResult) {
	r.ConsumedRecords = c.records
	r.ConsumeSeconds = c.elapsed.Seconds()
	r.ConsumeRecordsPerS = perSecond(float64(c.records), c.elapsed)
	r.ConsumeMiBPerS = perSecond(float64(c.bytes)/(1<<20), c.elapsed)
}

func joinFloats(v []float64, format string) string {
	s := make([]string, len(v))
	for i, f := range v {
		s[i] = fmt.Sprintf(format, f)
	}
	return strings.Join(s, ", ")
}

func perSecond(v float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return v / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func writeJSON(w io.Writer, results any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// writeJSONFile writes results as JSON to the file name.
func writeJSONFile(name string, results any) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := writeJSON(f, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeTable prints one aligned row per run, then the error of each failed
// run. Sizes are MiB (2^20 bytes) of record values.
func writeTable(w io.Writer, results []result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tpartitions\trecords\tproduce rec/s\tproduce MiB/s\tp50 ms\tp99 ms\tconsume rec/s\tconsume MiB/s\tresult\t")
	for _, r := range results {
		status := "ok"
		if !r.OK {
			status = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%.2f\t%.2f\t%.0f\t%.1f\t%s\t\n",
			r.Label, r.Partitions, r.ProducedRecords,
			r.ProduceRecordsPerS, r.ProduceMiBPerS, r.ProduceLatencyP50Ms, r.ProduceLatencyP99Ms,
			r.ConsumeRecordsPerS, r.ConsumeMiBPerS, status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.BatchRecords > 0 {
			kind, end := "flushes", "flush"
			if r.Transactional {
				kind, end = "transactions", "commit"
			}
			fmt.Fprintf(w, "%s, %d partitions: %d %s of %d records, %.0f/s, %s p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
				r.Label, r.Partitions, r.Batches, kind, r.BatchRecords, r.BatchesPerS, end, r.CommitLatencyP50Ms, r.CommitLatencyP99Ms, r.CommitLatencyMaxMs)
		}
	}
	for _, r := range results {
		if r.CPUMeasured {
			fmt.Fprintf(w, "%s, %d partitions: CPU s per GB of records: produce server %.3f, client %.3f; consume server %.3f, client %.3f\n",
				r.Label, r.Partitions, r.ServerCPUPerGBProduce, r.ClientCPUPerGBProduce, r.ServerCPUPerGBConsume, r.ClientCPUPerGBConsume)
		}
	}
	for _, r := range results {
		if r.DiskMeasured {
			fmt.Fprintf(w, "%s, %d partitions: server bytes written to disk per byte produced %.2f (each: %s); peak RSS (VmHWM) %.0f MiB (each: %s)\n",
				r.Label, r.Partitions, r.ServerWriteBytesPerByteProduce, joinFloats(r.ServerWriteBytesPerByteProduceEach, "%.2f"),
				r.ServerPeakRSSMiB, joinFloats(r.ServerPeakRSSMiBEach, "%.0f"))
		}
	}
	for _, r := range results {
		if !r.OK {
			fmt.Fprintf(w, "%s, %d partitions: %s\n", r.Label, r.Partitions, r.Error)
		}
	}
	return nil
}
