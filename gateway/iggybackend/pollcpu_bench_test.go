package iggybackend

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/iggy/iggytest"
	"github.com/kgate/kgate/gateway/records"
)

// BenchmarkReadOthersBatches reads, through a fresh backend (another
// node: it sent none of the batches, so knows none of their starts), a
// partition another backend wrote in stored batches of 500 to 1,500
// records of 1 KiB, in answers of 1 MiB as a Kafka consumer asks; and, for
// comparison, a second time through that backend and through the backend
// that wrote it. It reports the real
// iggy-server's CPU per GB read (server-s/GB): iggy-server 0.9 pays for
// polls that start or end inside a stored batch. IGGY_SERVER_BIN names the
// server; KGATE_BENCH_RECORDS the records written (default 200,000).
func BenchmarkReadOthersBatches(b *testing.B) {
	bin := os.Getenv(iggytest.EnvServerBin)
	if bin == "" {
		b.Skipf("set %s to an iggy-server binary", iggytest.EnvServerBin)
	}
	total := 200_000
	if n, err := strconv.Atoi(os.Getenv("KGATE_BENCH_RECORDS")); err == nil && n > 0 {
		total = n
	}
	srv, err := iggytest.StartReal(bin, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	w := newHarnessAt(b, srv.Addr(), srv.Username, srv.Password)
	w.create("others", 1, nil)
	value := bytes.Repeat([]byte("x"), 1024)
	sizes := []int{700, 1300, 900, 1500, 500, 1100}
	for n, i := 0, 0; n < total; i++ {
		size := min(sizes[i%len(sizes)], total-n)
		recs := make([]records.Record, size)
		for j := range recs {
			recs[j] = records.Record{Value: value, Timestamp: 1}
		}
		res := w.produce("others", 0, batch(b, plain, recs...))
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		n += size
	}
	readAll := func(b *testing.B, h *harness) {
		// Not h.ctx, which ends 30 s after the harness started.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cpu0, err := srv.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		read := 0
		for off := int64(0); off < int64(total); {
			res, err := h.b.Read(ctx, "others", 0, off, 1<<20)
			if err != nil {
				b.Fatalf("read at %d: %v", off, err)
			}
			n := 0
			for data := res.Records; len(data) > 0; {
				hdr, err := records.ParseHeader(data)
				if err != nil {
					b.Fatal(err)
				}
				n += int(hdr.LastOffsetDelta) + 1
				data = data[hdr.Size():]
			}
			if n == 0 {
				b.Fatalf("nothing read at %d of %d (high watermark %d, %d bytes)", off, total, res.HighWatermark, len(res.Records))
			}
			off += int64(n)
			read += n
		}
		cpu1, err := srv.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		gb := float64(read) * 1024 / 1e9
		b.ReportMetric((cpu1-cpu0).Seconds()/gb, "server-s/GB")
	}
	other := func() *harness {
		return newHarnessAt(b, srv.Addr(), srv.Username, srv.Password, func(c *Config) {
			c.Nodes = &fakeNodes{self: 2, ids: []int32{2}}
		})
	}
	b.Run("other-node", func(b *testing.B) {
		for range b.N {
			r := other()
			readAll(b, r)
			r.b.Close()
		}
	})
	// The same node reading the partition again (another consumer group,
	// or a consumer that seeked back): it has seen the batches once.
	b.Run("other-node-again", func(b *testing.B) {
		r := other()
		readAll(b, r)
		for range b.N {
			readAll(b, r)
		}
		r.b.Close()
	})
	b.Run("own", func(b *testing.B) {
		for range b.N {
			readAll(b, w)
		}
	})
}
