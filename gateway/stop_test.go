package gateway_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// openConns reads the server's kgate_kafka_connections gauge.
func openConns(t *testing.T, n *testNode) int {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.srv)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kgate_kafka_connections" {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	t.Fatal("no kgate_kafka_connections")
	return 0
}

// A stopping node (SIGTERM, as after POST /v1/leave) answers a request
// that arrives on a connection opened before the stop, and only then
// closes it: a client whose first request on a connection gets no answer
// cannot tell whether it took effect, and franz-go fails it ("broker
// closed the connection immediately after a request was issued") rather
// than retry. Connections that already answered and wait for nothing
// close at once.
func TestStopAnswersAConnectionsFirstRequest(t *testing.T) {
	n := startNode(t, nil)
	used := dialRaw(t, n.addr)
	used.do(kmsg.NewPtrApiVersionsRequest())
	fresh := dialRaw(t, n.addr) // nothing sent yet
	deadline := time.Now().Add(ioTimeout)
	for openConns(t, n) < 2 { // both accepted
		if time.Now().After(deadline) {
			t.Fatal("the server never counted both connections")
		}
		time.Sleep(5 * time.Millisecond)
	}

	n.stop()
	expectClosed(t, used.nc)
	corr := fresh.send(kmsg.NewPtrApiVersionsRequest())
	got, body, err := fresh.readFrame()
	if err != nil {
		t.Fatalf("a connection's first request, sent after the stop began, got no answer: %v", err)
	}
	if got != corr {
		t.Fatalf("answer to correlation id %d, want %d", got, corr)
	}
	resp, err := decodeResponse(kmsg.NewPtrApiVersionsRequest(), body)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
		t.Fatalf("ApiVersions error %d", code)
	}
	expectClosed(t, fresh.nc)
}
