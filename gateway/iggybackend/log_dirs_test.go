package iggybackend

import (
	"testing"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

// TestLogDirsReportIggySizes: DescribeLogDirs with Iggy shows the sizes the
// Iggy server reports, per Kafka partition, under iggy:<stream>.
func TestLogDirsReportIggySizes(t *testing.T) {
	forDialects(t, func(t *testing.T, d iggy.Dialect) {
		h := newHarness(t, d)
		h.create("sized", 2, nil)
		if res := h.produce("sized", 1, batch(t, plain, records.Record{Value: make([]byte, 500)})); res.Err != nil {
			t.Fatal(res.Err)
		}
		dirs, err := h.b.LogDirs(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(dirs) != 1 || dirs[0].Path != "iggy:kafka" || len(dirs[0].Partitions) != 2 {
			t.Fatalf("dirs %+v", dirs)
		}
		p0, p1 := dirs[0].Partitions[0], dirs[0].Partitions[1]
		if p0.Topic != "sized" || p0.Partition != 0 || p0.Bytes != 0 || p1.Partition != 1 || p1.Bytes < 500 {
			t.Fatalf("partitions %+v, want sized/0 empty and sized/1 at least 500 bytes", dirs[0].Partitions)
		}
	})
}
