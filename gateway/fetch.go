package gateway

import (
	"context"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFetchWait bounds a long poll whatever the client asks.
const maxFetchWait = 30 * time.Second

func (s *Server) handleFetch(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.FetchRequest)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	// No fetch sessions: every fetch is a full one (session id 0). A client
	// continuing a session it thinks it has gets FETCH_SESSION_ID_NOT_FOUND.
	if req.SessionID != 0 && req.SessionEpoch > 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return now(resp)
	}
	return later(func() kmsg.Response { return s.fetch(ctx, req) })
}

func (s *Server) fetch(ctx context.Context, req *kmsg.FetchRequest) kmsg.Response {
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	for {
		var watches []<-chan struct{}
		resp, size := s.fetchOnce(ctx, req, &watches)
		if size >= int(req.MinBytes) || size > 0 && req.MinBytes <= 0 || wait <= 0 || len(watches) == 0 {
			return resp
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return resp
		}
		if !waitAny(ctx, watches, remaining) {
			return resp
		}
		if ctx.Err() != nil {
			return resp
		}
	}
}

// waitAny blocks until one channel closes (true) or the time runs out (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	i, _, _ := reflect.Select(cases)
	return i >= 2
}

// fetchOnce reads every requested partition once. It collects a wake-up
// channel for each partition that answered without error.
func (s *Server) fetchOnce(ctx context.Context, req *kmsg.FetchRequest, watches *[]<-chan struct{}) (*kmsg.FetchResponse, int) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = int(s.cfg.MaxFrameBytes)
	}
	maxBytes = min(maxBytes, int(s.cfg.MaxFrameBytes)-1024)
	total := 0
	self := s.cluster.Self().ID
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		name := rt.Topic
		topicErr := int16(0)
		if req.Version >= 13 {
			if n, ok := s.backend.TopicName(rt.TopicID); ok {
				name = n
			} else {
				topicErr = kerr.UnknownTopicID.Code
			}
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.PreferredReadReplica = -1
			sp.RecordBatches = []byte{} // librdkafka rejects a null record set
			sp.ErrorCode = topicErr
			if topicErr == 0 {
				switch leader, ok := s.backend.PartitionLeader(name, rp.Partition); {
				case !ok:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case leader != self:
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
				}
			}
			if sp.ErrorCode == 0 {
				// Take the wake-up channel before reading so an append in
				// between still wakes us.
				ch, werr := s.backend.Watch(name, rp.Partition)
				s.fetchPartition(ctx, name, rp, &sp, maxBytes, &total)
				if sp.ErrorCode == 0 && werr == nil {
					*watches = append(*watches, ch)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total
}

func (s *Server) fetchPartition(ctx context.Context, topic string, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, maxBytes int, total *int) {
	limit := min(int(rp.PartitionMaxBytes), maxBytes-*total)
	if *total == 0 {
		limit = max(limit, 1) // KIP-74: the first batch always comes back
	}
	if limit <= 0 {
		start, end, err := s.backend.Offsets(ctx, topic, rp.Partition)
		sp.ErrorCode = ErrorCode(err)
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = end, end, start
		return
	}
	res, err := s.backend.Read(ctx, topic, rp.Partition, rp.FetchOffset, limit)
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.HighWatermark, res.HighWatermark, res.LogStartOffset
	if err != nil {
		sp.ErrorCode = ErrorCode(err)
		return
	}
	if *total > 0 && len(res.Records) > limit {
		return // over the response budget; the next fetch gets it
	}
	if res.Records != nil {
		sp.RecordBatches = res.Records
		*total += len(res.Records)
	}
}
