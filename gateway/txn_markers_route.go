package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/coordinator/txn"
	"github.com/kgate/kgate/fsm"
)

// On the Iggy backend every node writes to Iggy, and a partition's
// batches go through the send queue of the node that leads it. The
// coordinator's markers go through that same queue, as Kafka's
// coordinator sends WriteTxnMarkers to each partition's leader: the queue
// checks each transactional batch right before its send, and the marker is
// queued once that node's FSM has the transaction ending, so no batch of
// the transaction can land in Iggy after its marker (a zombie's batch that
// passed its check a moment before the fence is refused in the queue).
//
// The coordinator sends WriteTxnMarkers (v1) to the partition's leader
// over the cluster's link, with its time in a tag of the marker
// (markerTimeTag); the leader answers each partition with the marker's
// offset in a tag (markerOffsetTag). An older kgate answers without it and
// the coordinator then writes the marker itself, as it did before.

// Tags of kgate's own WriteTxnMarkers between nodes (never sent to, nor
// taken from, a client: only requests that arrive over the cluster's link
// are read for them).
const (
	markerTimeTag   uint32 = 0x6b670001 // the coordinator's time in ms, int64 big-endian
	markerOffsetTag uint32 = 0x6b670002 // the marker's offset, int64 big-endian
	// markerAdminTag (empty) marks an administrator's marker, written
	// whatever the transaction's state (WriteAdminMarker).
	markerAdminTag uint32 = 0x6b670003
)

// MarkerWriter is a backend that keeps partitions outside the FSM and
// writes transaction markers into them itself (the Iggy backend).
type MarkerWriter interface {
	txn.Markers
}

// MarkerRouter is the transaction coordinator's txn.Markers on the Iggy
// backend: it writes each partition's marker through the node that leads
// the partition. It is made before the server (the coordinator needs it)
// and routes once the server is made with it (Config.MarkerRouter).
type MarkerRouter struct {
	local MarkerWriter
	srv   atomic.Pointer[Server]
}

// NewMarkerRouter routes the markers of local's partitions.
func NewMarkerRouter(local MarkerWriter) *MarkerRouter { return &MarkerRouter{local: local} }

// NextOffsets reads the partitions' next offsets from the backend.
func (m *MarkerRouter) NextOffsets(ctx context.Context, parts []fsm.TopicPartition) ([]int64, []int16) {
	return m.local.NextOffsets(ctx, parts)
}

// LogStarts reads the partitions' log start offsets from the backend.
func (m *MarkerRouter) LogStarts(ctx context.Context, parts []fsm.TopicPartition) ([]int64, []int16) {
	return m.local.LogStarts(ctx, parts)
}

// WriteMarker writes the marker into each partition through its leader and
// returns the markers' offsets (-1 for a partition gone).
func (m *MarkerRouter) WriteMarker(ctx context.Context, producerID int64, epoch int16, commit bool, nowMs int64, parts []fsm.TopicPartition) ([]int64, error) {
	local := func(sub []fsm.TopicPartition) ([]int64, error) {
		return m.local.WriteMarker(ctx, producerID, epoch, commit, nowMs, sub)
	}
	return m.route(ctx, markerRequest{producerID: producerID, epoch: epoch, commit: commit, nowMs: nowMs}, parts, local)
}

// WriteAdminMarker is WriteMarker for an administrator's marker.
func (m *MarkerRouter) WriteAdminMarker(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64,
	parts []fsm.TopicPartition) ([]int64, error) {
	local := func(sub []fsm.TopicPartition) ([]int64, error) {
		return m.local.WriteAdminMarker(ctx, producerID, epoch, commit, coordinatorEpoch, nowMs, sub)
	}
	return m.route(ctx, markerRequest{producerID: producerID, epoch: epoch, commit: commit, coordinatorEpoch: coordinatorEpoch,
		nowMs: nowMs, admin: true}, parts, local)
}

// markerRequest is one marker the router writes.
type markerRequest struct {
	producerID       int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
	nowMs            int64
	admin            bool
}

// route writes the marker into each partition through the node leading it:
// here with local, elsewhere over the cluster's link.
func (m *MarkerRouter) route(ctx context.Context, mr markerRequest, parts []fsm.TopicPartition,
	local func([]fsm.TopicPartition) ([]int64, error)) ([]int64, error) {
	s := m.srv.Load()
	if s == nil {
		return local(parts)
	}
	self := s.cluster.Self().ID
	byNode := map[int32][]int{} // leader → indexes into parts
	var order []int32
	for i, tp := range parts {
		leader, ok := s.backend.PartitionLeader(tp.Topic, tp.Partition)
		if !ok {
			leader = self // gone or unknown here: the local write tells
		}
		if _, seen := byNode[leader]; !seen {
			order = append(order, leader)
		}
		byNode[leader] = append(byNode[leader], i)
	}
	offsets := make([]int64, len(parts))
	for _, node := range order {
		idx := byNode[node]
		sub := make([]fsm.TopicPartition, len(idx))
		for j, i := range idx {
			sub[j] = parts[i]
		}
		var offs []int64
		var err error
		if node == self {
			offs, err = local(sub)
		} else {
			offs, err = m.remote(ctx, s, node, mr, sub)
			if errors.Is(err, errOldPeer) {
				// During a rolling upgrade: written here, as before.
				offs, err = local(sub)
			}
		}
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			offsets[i] = offs[j]
		}
	}
	return offsets, nil
}

// errOldPeer: the partition's leader runs a kgate that answers
// WriteTxnMarkers without the marker's offset.
var errOldPeer = errors.New("the partition's leader writes no markers for the coordinator")

// remote has node write the markers (handleWriteTxnMarkers, forwarded).
func (m *MarkerRouter) remote(ctx context.Context, s *Server, node int32, mr markerRequest, parts []fsm.TopicPartition) ([]int64, error) {
	var to cluster.NodeInfo
	for _, b := range s.cluster.Brokers() {
		if b.ID == node {
			to = b
		}
	}
	if to.ID != node {
		return nil, fmt.Errorf("partition leader %d is not a known node", node)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = mr.producerID, mr.epoch, mr.commit, mr.coordinatorEpoch
	rm.UnknownTags.Set(markerTimeTag, binary.BigEndian.AppendUint64(nil, uint64(mr.nowMs)))
	if mr.admin {
		rm.UnknownTags.Set(markerAdminTag, nil)
	}
	at := map[string]int{}
	for _, tp := range parts {
		i, ok := at[tp.Topic]
		if !ok {
			i = len(rm.Topics)
			at[tp.Topic] = i
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			rm.Topics = append(rm.Topics, rt)
		}
		rm.Topics[i].Partitions = append(rm.Topics[i].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	rctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	resp, _, err := s.fwd.roundTrip(rctx, s.cluster, to, req)
	if err != nil {
		return nil, fmt.Errorf("markers through node %d: %w", node, err)
	}
	r, ok := resp.(*kmsg.WriteTxnMarkersResponse)
	if !ok || len(r.Markers) != 1 {
		return nil, fmt.Errorf("markers through node %d: unexpected answer", node)
	}
	got := map[fsm.TopicPartition]int64{}
	for _, t := range r.Markers[0].Topics {
		for _, p := range t.Partitions {
			tp := fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("marker in %s/%d through node %d: %w", t.Topic, p.Partition, node, kerr.ErrorForCode(p.ErrorCode))
			}
			var off []byte
			p.UnknownTags.Each(func(k uint32, v []byte) {
				if k == markerOffsetTag && len(v) == 8 {
					off = v
				}
			})
			if off == nil {
				return nil, errOldPeer
			}
			got[tp] = int64(binary.BigEndian.Uint64(off))
		}
	}
	offsets := make([]int64, len(parts))
	for i, tp := range parts {
		o, ok := got[tp]
		if !ok {
			return nil, fmt.Errorf("markers through node %d: no answer for %s/%d", node, tp.Topic, tp.Partition)
		}
		offsets[i] = o
	}
	return offsets, nil
}

// coordinatorMarkers is handleWriteTxnMarkers for the coordinator's own
// request from another node (the tag markerTimeTag over the cluster's
// link): the markers are written here, through the partitions' queues, and
// each answer carries the marker's offset.
func (s *Server) coordinatorMarkers(ctx context.Context, w MarkerWriter, req *kmsg.WriteTxnMarkersRequest, nowMs int64, admin bool) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	m := req.Markers[0]
	var parts []fsm.TopicPartition
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, fsm.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	var offsets []int64
	var err error
	if admin {
		offsets, err = w.WriteAdminMarker(ctx, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, nowMs, parts)
	} else {
		offsets, err = w.WriteMarker(ctx, m.ProducerID, m.ProducerEpoch, m.Committed, nowMs, parts)
	}
	code := int16(0)
	if err != nil {
		s.log.Warn("cannot write transaction markers for the coordinator", "producer_id", m.ProducerID, "err", err)
		code = ErrorCode(err)
		if code == 0 || code == kerr.UnknownServerError.Code {
			code = kerr.ConcurrentTransactions.Code // retriable for the coordinator
		}
	}
	resp = writeTxnMarkersAnswer(req, resp, nil, code) // one marker: coordinatorMarkerTime
	if err != nil {
		return resp
	}
	i := 0
	for _, rt := range resp.Markers[0].Topics {
		for j := range rt.Partitions {
			rt.Partitions[j].UnknownTags.Set(markerOffsetTag, binary.BigEndian.AppendUint64(nil, uint64(offsets[i])))
			i++
		}
	}
	return resp
}

// coordinatorMarkerTime is the time tag of a WriteTxnMarkers that another
// node's coordinator sent (one marker), whether it is an administrator's
// marker, or false.
func coordinatorMarkerTime(r *Request, req *kmsg.WriteTxnMarkersRequest) (nowMs int64, admin, ok bool) {
	if !r.Forwarded || len(req.Markers) != 1 {
		return 0, false, false
	}
	req.Markers[0].UnknownTags.Each(func(k uint32, v []byte) {
		switch {
		case k == markerTimeTag && len(v) == 8:
			nowMs, ok = int64(binary.BigEndian.Uint64(v)), true
		case k == markerAdminTag:
			admin = true
		}
	})
	return nowMs, admin, ok
}
