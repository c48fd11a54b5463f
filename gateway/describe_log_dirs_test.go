package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeLogDirs(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "dirs", 2, nil)
	createTopic(t, n.addr, "dirs-other", 1, nil)
	c := dialRaw(t, n.addr)
	produceRaw(t, c, "dirs", build(t, plainBuilder(), valueRecords("d", 5)))

	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(4)
	resp := c.do(req).(*kmsg.DescribeLogDirsResponse)
	if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
		t.Fatalf("error %d, %d dirs, want one dir", resp.ErrorCode, len(resp.Dirs))
	}
	d := resp.Dirs[0]
	want, _ := filepath.Abs(filepath.Join(n.dataDir, "topics"))
	if d.ErrorCode != 0 || d.Dir != want || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
		t.Fatalf("dir %q error %d total %d usable %d, want %q with disk space", d.Dir, d.ErrorCode, d.TotalBytes, d.UsableBytes, want)
	}
	sizes := map[string]int64{}
	for _, tp := range d.Topics {
		for _, p := range tp.Partitions {
			sizes[tp.Topic+"/"+string(rune('0'+p.Partition))] = p.Size
			if p.OffsetLag != 0 || p.IsFuture {
				t.Errorf("%s/%d: lag %d future %v", tp.Topic, p.Partition, p.OffsetLag, p.IsFuture)
			}
		}
	}
	onDisk := dirBytes(t, n.dataDir)
	if len(sizes) != 3 || sizes["dirs/0"] <= 0 || sizes["dirs/1"] != 0 || sizes["dirs-other/0"] != 0 || sizes["dirs/0"] != onDisk {
		t.Fatalf("sizes %v, want dirs/0 = %d bytes on disk and the other two empty", sizes, onDisk)
	}

	// Only the partitions asked for.
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "dirs", Partitions: []int32{1}}}
	d = c.do(req).(*kmsg.DescribeLogDirsResponse).Dirs[0]
	if len(d.Topics) != 1 || d.Topics[0].Topic != "dirs" || len(d.Topics[0].Partitions) != 1 || d.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("filtered answer %+v, want dirs/1 only", d.Topics)
	}
}

// dirBytes sums the segment files under a node's topics directory.

func dirBytes(t *testing.T, dataDir string) int64 {
	t.Helper()
	var total int64
	err := filepath.Walk(filepath.Join(dataDir, "topics"), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(path, ".log") {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}
