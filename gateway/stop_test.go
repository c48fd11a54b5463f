package gateway_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// gauge reads one of the server's gauges.
func gauge(t *testing.T, n *testNode, name string) int {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.srv)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func waitGauge(t *testing.T, n *testNode, name string, want int) {
	t.Helper()
	for deadline := time.Now().Add(ioTimeout); gauge(t, n, name) < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %d", name, want)
		}
	}
}

// A stopping node (SIGTERM, as after POST /v1/leave) answers the requests
// its connections sent before closing them: one that arrives on a
// connection opened before the stop, and a long poll parked at the stop
// (answered at once with what it has). A client whose first request on a
// connection gets no answer cannot tell whether it took effect, and
// franz-go fails it ("broker closed the connection immediately after a
// request was issued") rather than retry. Connections that already
// answered and wait for nothing close at once.
func TestStopAnswersWhatConnectionsSent(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "quiet", 1, nil)
	used := dialRaw(t, n.addr)
	used.do(kmsg.NewPtrApiVersionsRequest())
	used.do(kmsg.NewPtrMetadataRequest())
	fresh := dialRaw(t, n.addr) // nothing sent yet
	polling := dialRaw(t, n.addr)
	pollCorr := polling.send(fetchReq("quiet", 0, 0, 30000, 1, 1<<20))
	waitGauge(t, n, "kgate_kafka_connections", 3)
	waitGauge(t, n, "kgate_kafka_parked_fetches", 1)

	n.stop()
	expectClosed(t, used.nc)

	corr := fresh.send(kmsg.NewPtrMetadataRequest())
	fresh.recv(corr, kmsg.NewPtrMetadataRequest())
	expectClosed(t, fresh.nc)

	fetch := polling.recv(pollCorr, fetchReq("quiet", 0, 0, 30000, 1, 1<<20)).(*kmsg.FetchResponse)
	if p := fetchPartition(t, fetch); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("parked fetch answered with error %d and %d bytes, want an empty answer", p.ErrorCode, len(p.RecordBatches))
	}
	expectClosed(t, polling.nc)
}

// A connection whose only answer so far is ApiVersions is a fresh one to
// its client: franz-go reads that answer during the connection's set-up
// and counts no request as answered, so a close before its next request
// is answered fails that request ("broker closed the connection
// immediately after a request was issued") instead of retrying it, and
// that request is usually a produce. A stopping node answers it first (a
// real answer here, where the node still leads; NOT_LEADER_OR_FOLLOWER
// after a leave; KAFKA_STORAGE_ERROR on a full disk).
func TestStopAnswersTheRequestAfterApiVersions(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "drain", 1, nil)
	used := dialRaw(t, n.addr)
	used.do(kmsg.NewPtrApiVersionsRequest())
	used.do(kmsg.NewPtrMetadataRequest())
	fresh := dialRaw(t, n.addr)
	fresh.do(kmsg.NewPtrApiVersionsRequest())
	waitGauge(t, n, "kgate_kafka_connections", 2)

	n.stop()
	// The drain closes every connection it may at once: once the used one
	// is closed, the fresh one would have been too.
	expectClosed(t, used.nc)

	p := produceRaw(t, fresh, "drain", testBatch(t, 3))
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce after the stop: error %d, base offset %d; want 0 at offset 0", p.ErrorCode, p.BaseOffset)
	}
	expectClosed(t, fresh.nc)
	// Acknowledged means stored.
	if _, end, err := n.backend.Offsets(testCtx(t), "drain", 0); err != nil || end != 3 {
		t.Fatalf("log end %d (%v) after the acknowledged produce, want 3", end, err)
	}
}
