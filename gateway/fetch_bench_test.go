package gateway_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetchIdleLongPolls measures what appends cost while 1,000 long
// polls wait: each poll covers 8 partitions and asks for more bytes
// (min_bytes 1 MiB) than the appends, to partition 0, bring. It reports
// the process CPU time per append (user+system), which includes the
// polls' wake-ups.
//
//	go test -run '^$' -bench FetchIdleLongPolls -benchtime 2000x ./gateway/
func BenchmarkFetchIdleLongPolls(b *testing.B) {
	const polls, partitions = 1000, 8
	n := startNode(b, nil)
	createTopic(b, n.addr, "idle", partitions, nil)
	stop := make(chan struct{})
	defer close(stop)
	for range polls {
		c := dialRaw(b, n.addr)
		go func() {
			for {
				req := fetchReq("idle", 0, 0, 30000, 1<<20, 1<<20)
				for p := int32(1); p < partitions; p++ {
					fp := kmsg.NewFetchRequestTopicPartition()
					fp.Partition, fp.PartitionMaxBytes = p, 1<<20
					req.Topics[0].Partitions = append(req.Topics[0].Partitions, fp)
				}
				if err := c.exchange(req); err != nil {
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	pc := dialRaw(b, n.addr)
	batch := build(b, plainBuilder(), valueRecords("idle", 1))
	produce := func() {
		if err := pc.exchange(produceReq(9, -1, "idle", 0, batch)); err != nil {
			b.Fatal(err)
		}
	}
	for range 50 { // every poll parked and warmed up
		produce()
	}
	time.Sleep(time.Second) // let the connections settle before measuring (a benchmark, not a test)
	before := cpuTime()
	b.ResetTimer()
	for range b.N {
		produce()
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/append")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprint(err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// exchange sends req and reads one answer frame, reporting errors instead
// of failing (it runs on goroutines that outlive the benchmark).
func (c *rawConn) exchange(req kmsg.Request) error {
	c.corr++
	id := testClientID
	if err := c.write(sizePrefixed(requestFrame(req, c.corr, &id))); err != nil {
		return err
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Minute))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, c.nc, int64(binary.BigEndian.Uint32(size[:])))
	return err
}
