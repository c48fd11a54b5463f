package gateway_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/embedded"
)

// markerCall is one WriteMarker a markerLog took.
type markerCall struct {
	producerID int64
	epoch      int16
	commit     bool
	nowMs      int64
	parts      []fsm.TopicPartition
}

// markerLog is a backend's marker writer that records its calls and
// answers offset 100 + partition.
type markerLog struct {
	mu    sync.Mutex
	calls []markerCall
}

func (m *markerLog) NextOffsets(_ context.Context, parts []fsm.TopicPartition) ([]int64, []int16) {
	return make([]int64, len(parts)), make([]int16, len(parts))
}

func (m *markerLog) LogStarts(_ context.Context, parts []fsm.TopicPartition) ([]int64, []int16) {
	return make([]int64, len(parts)), make([]int16, len(parts))
}

func (m *markerLog) WriteMarker(_ context.Context, producerID int64, epoch int16, commit bool, nowMs int64, parts []fsm.TopicPartition) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, markerCall{producerID, epoch, commit, nowMs, parts})
	out := make([]int64, len(parts))
	for i, tp := range parts {
		out[i] = 100 + int64(tp.Partition)
	}
	return out, nil
}

func (m *markerLog) WriteAdminMarker(ctx context.Context, producerID int64, epoch int16, commit bool, _ int32, nowMs int64, parts []fsm.TopicPartition) ([]int64, error) {
	return m.WriteMarker(ctx, producerID, epoch, commit, nowMs, parts)
}

func (m *markerLog) taken() []markerCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]markerCall(nil), m.calls...)
}

// markerBackend is a backend that writes markers itself, as the Iggy one.
type markerBackend struct {
	gateway.Backend
	*markerLog
}

// The coordinator's markers go through the node that leads each partition
// (over the cluster's link), which writes them through its own queues and
// answers each marker's offset; a client cannot make a node write markers
// that way, even with the same request.
func TestMarkersThroughThePartitionLeader(t *testing.T) {
	atLeader := &markerLog{}
	leader := startNodeOpts(t, nil, true, nodeOpts{wrap: func(b *embedded.Backend) gateway.Backend {
		return markerBackend{Backend: b, markerLog: atLeader}
	}})
	createTopic(t, leader.addr, "mk", 2, nil)

	// Node 2 runs the coordinator; node 1 leads every partition.
	here := &markerLog{}
	router := gateway.NewMarkerRouter(here)
	serveWith(t, gateway.Config{MarkerRouter: router}, followerBackend{leader.backend}, followerOf(t, leader))

	parts := []fsm.TopicPartition{{Topic: "mk", Partition: 1}, {Topic: "mk", Partition: 0}}
	offsets, err := router.WriteMarker(context.Background(), 7, 3, true, 1_750_000_000_123, parts)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(offsets) != "[101 100]" {
		t.Fatalf("marker offsets %v, want [101 100]", offsets)
	}
	if got := here.taken(); len(got) != 0 {
		t.Fatalf("the coordinator's node wrote markers itself: %+v", got)
	}
	want := fmt.Sprint([]markerCall{{7, 3, true, 1_750_000_000_123, parts}})
	if got := fmt.Sprint(atLeader.taken()); got != want {
		t.Fatalf("the partitions' leader wrote %s, want %s", got, want)
	}

	// The same request from a client is an administrator's
	// WriteTxnMarkers (here into the embedded log), never a marker written
	// for the coordinator.
	c := dialRaw(t, leader.addr)
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 7, 3, true
	m.UnknownTags.Set(0x6b670001, binary.BigEndian.AppendUint64(nil, 1_750_000_000_123))
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = "mk", []int32{0}
	m.Topics = append(m.Topics, rt)
	req.Markers = append(req.Markers, m)
	if resp := c.do(req).(*kmsg.WriteTxnMarkersResponse); len(resp.Markers) != 1 {
		t.Fatalf("a client's WriteTxnMarkers: %+v", resp)
	}
	if got := atLeader.taken(); len(got) != 1 {
		t.Fatalf("a client's request wrote markers: %+v", got[1:])
	}
}
