package gateway_test

import (
	"encoding/binary"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkHeartbeatIdleConnections measures what the groups benchmark's
// load costs the node per connection and per heartbeat, the two things
// that set how often its GC runs and how long it takes: 2,000 connections
// that each sent one ApiVersions and then idle (as a member's connection
// does between heartbeats), then Heartbeats of one member. It reports the
// heap and goroutine stack held per idle connection and the node's
// allocations and CPU per Heartbeat (the client side sends prebuilt frames
// and reads into a fixed buffer, so it allocates nothing).
//
//	go test -run '^$' -bench HeartbeatIdleConnections -benchtime 20000x ./gateway/
func BenchmarkHeartbeatIdleConnections(b *testing.B) {
	const idle = 2000
	n := startNodeWith(b, nil, true)
	heap0, stack0 := heldBytes()
	for range idle {
		c := dialRaw(b, n.addr)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "bench", "1"
		c.do(req)
	}
	heap1, stack1 := heldBytes()

	c := dialRaw(b, n.addr)
	group := "hb-bench"
	jr := c.do(joinReq(7, group, "", "", "consumer", consumerMetadata("t"))).(*kmsg.JoinGroupResponse)
	jr = c.do(joinReq(7, group, jr.MemberID, "", "consumer", consumerMetadata("t"))).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		b.Fatalf("join: code %d", jr.ErrorCode)
	}
	sr := syncReq(group, jr.MemberID, "", jr.Generation, map[string][]byte{jr.MemberID: nil})
	if code := c.do(sr).(*kmsg.SyncGroupResponse).ErrorCode; code != 0 {
		b.Fatalf("sync: code %d", code)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group, hb.MemberID, hb.Generation = group, jr.MemberID, jr.Generation
	id := testClientID
	frame := sizePrefixed(requestFrame(hb, 1, &id))
	answer := make([]byte, 64)
	beat := func() {
		if _, err := c.nc.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c.nc, answer[:4]); err != nil {
			b.Fatal(err)
		}
		size := int(binary.BigEndian.Uint32(answer[:4]))
		if size > len(answer) {
			b.Fatalf("heartbeat answer of %d bytes", size)
		}
		if _, err := io.ReadFull(c.nc, answer[:size]); err != nil {
			b.Fatal(err)
		}
		// v4 is flexible: correlation id, header tags, throttle, error code.
		if code := binary.BigEndian.Uint16(answer[9:11]); code != 0 {
			b.Fatalf("heartbeat: code %d", code)
		}
	}
	beat()
	c.nc.SetDeadline(time.Now().Add(time.Minute))
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		beat()
	}
	b.StopTimer()
	cpu1 := cpuTime()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(heap1-heap0)/idle, "heap-B/idle-conn")
	b.ReportMetric(float64(stack1-stack0)/idle, "stack-B/idle-conn")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "node-allocs/heartbeat")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N), "node-B/heartbeat")
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/heartbeat")
}

// heldBytes is the heap and goroutine stacks in use after a GC.
func heldBytes() (heap, stacks int64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc), int64(m.StackInuse)
}
