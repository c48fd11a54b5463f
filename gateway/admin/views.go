package admin

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// offsetsTimeout bounds the backend reads one admin request makes (the Iggy
// backend asks its server).
const offsetsTimeout = 5 * time.Second

// PartitionStorage is implemented by backends that know a partition's bytes
// on disk (the embedded log); others report sizes as null.
type PartitionStorage interface {
	PartitionStorage(topic string, partition int32) (bytes int64, segments int, ok bool)
}

// topicView is one entry of GET /v1/topics.
type topicView struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions []partitionView   `json:"partitions"`
	SizeBytes  *int64            `json:"size_bytes"` // null when the backend does not know
	Configs    map[string]string `json:"configs"`
}

type partitionView struct {
	Partition      int32  `json:"partition"`
	Leader         int32  `json:"leader"`
	LogStartOffset int64  `json:"log_start_offset"`
	HighWatermark  int64  `json:"high_watermark"`
	SizeBytes      *int64 `json:"size_bytes"`
	Segments       *int   `json:"segments"`
	Error          string `json:"error,omitempty"`
}

func uuidString(id [16]byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[b>>4], hex[b&15])
	}
	return string(out)
}

func (s *Server) topics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), offsetsTimeout)
	defer cancel()
	out := []topicView{}
	storage, _ := s.backend.(PartitionStorage)
	for _, t := range s.backend.Topics() {
		v := topicView{Name: t.Name, ID: uuidString(t.ID), Partitions: make([]partitionView, 0, t.Partitions), Configs: t.Configs}
		if v.Configs == nil {
			v.Configs = map[string]string{}
		}
		var total int64
		known := storage != nil
		for p := int32(0); p < t.Partitions; p++ {
			pv := partitionView{Partition: p, Leader: -1, LogStartOffset: -1, HighWatermark: -1}
			if leader, ok := s.backend.PartitionLeader(t.Name, p); ok {
				pv.Leader = leader
			}
			start, end, err := s.backend.Offsets(ctx, t.Name, p)
			if err != nil {
				pv.Error = err.Error()
			} else {
				pv.LogStartOffset, pv.HighWatermark = start, end
			}
			if storage != nil {
				if n, segs, ok := storage.PartitionStorage(t.Name, p); ok {
					pv.SizeBytes, pv.Segments = &n, &segs
					total += n
				} else {
					known = false
				}
			}
			v.Partitions = append(v.Partitions, pv)
		}
		if known {
			v.SizeBytes = &total
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": out})
}

// groupDetail is GET /v1/groups/{id}.
type groupDetail struct {
	Group        string        `json:"group"`
	State        string        `json:"state"`
	ProtocolType string        `json:"protocol_type"`
	Protocol     string        `json:"protocol"`
	Generation   int32         `json:"generation"`
	Leader       string        `json:"leader"`
	Members      []memberView  `json:"members"`
	Offsets      []groupOffset `json:"offsets"`
	TotalLag     int64         `json:"total_lag"`
}

type memberView struct {
	MemberID   string          `json:"member_id"`
	InstanceID string          `json:"instance_id,omitempty"`
	ClientID   string          `json:"client_id"`
	ClientHost string          `json:"client_host"`
	Assignment []assignedTopic `json:"assignment"`
}

type assignedTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// groupOffset is one partition the group has committed or is assigned.
// Committed and Lag are null for an assigned partition with no commit yet.
type groupOffset struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     *int64 `json:"committed"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           *int64 `json:"lag"`
	Member        string `json:"member,omitempty"` // the member it is assigned to
	Metadata      string `json:"metadata,omitempty"`
	Error         string `json:"error,omitempty"`
}

// decodeAssignment reads a consumer-protocol assignment; other protocol
// types (connect, custom) have opaque assignments and show none.
func decodeAssignment(protocolType string, b []byte) []assignedTopic {
	out := []assignedTopic{}
	if protocolType != "consumer" || len(b) == 0 {
		return out
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return out
	}
	for _, t := range a.Topics {
		ps := append([]int32{}, t.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, assignedTopic{Topic: t.Topic, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// groupDetail reads a group's members, committed offsets and lag per
// partition as this node has applied them; nil for an unknown group.
func (s *Server) groupDetail(ctx context.Context, id string) *groupDetail {
	g := s.state.Group(id)
	if g == nil {
		return nil
	}
	d := &groupDetail{Group: g.ID, State: g.State.String(), ProtocolType: g.ProtocolType, Protocol: g.Protocol,
		Generation: g.Generation, Leader: g.Leader, Members: []memberView{}, Offsets: []groupOffset{}}
	owner := map[fsm.TopicPartition]string{}
	for _, m := range g.Members {
		mv := memberView{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Assignment: decodeAssignment(g.ProtocolType, m.Assignment)}
		for _, at := range mv.Assignment {
			for _, p := range at.Partitions {
				owner[fsm.TopicPartition{Topic: at.Topic, Partition: p}] = m.ID
			}
		}
		d.Members = append(d.Members, mv)
	}
	committed, _ := s.state.CommittedOffsets(id)
	parts := make([]fsm.TopicPartition, 0, len(committed)+len(owner))
	for tp := range committed {
		parts = append(parts, tp)
	}
	for tp := range owner {
		if _, ok := committed[tp]; !ok {
			parts = append(parts, tp)
		}
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Topic != parts[j].Topic {
			return parts[i].Topic < parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
	for _, tp := range parts {
		o := groupOffset{Topic: tp.Topic, Partition: tp.Partition, HighWatermark: -1, Member: owner[tp]}
		_, hw, err := s.backend.Offsets(ctx, tp.Topic, tp.Partition)
		if err != nil {
			o.Error = err.Error()
		} else {
			o.HighWatermark = hw
		}
		if c, ok := committed[tp]; ok {
			off := c.Offset
			o.Committed, o.Metadata = &off, c.Metadata
			if err == nil {
				lag := max(hw-off, 0)
				o.Lag = &lag
				d.TotalLag += lag
			}
		}
		d.Offsets = append(d.Offsets, o)
	}
	return d
}

func (s *Server) group(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), offsetsTimeout)
	defer cancel()
	d := s.groupDetail(ctx, r.PathValue("id"))
	if d == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such group"})
		return
	}
	writeJSON(w, http.StatusOK, d)
}
