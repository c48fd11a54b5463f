package gateway

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/records"
	"github.com/kgate/kgate/internal/worktime"
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
	mergeRepeatedPartitions(req, n)
	// No fetch sessions: every fetch is a full one (session id 0). A client
	// continuing a session it thinks it has gets FETCH_SESSION_ID_NOT_FOUND.
	if req.SessionID != 0 && req.SessionEpoch > 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return now(resp)
	}
	// Decided here, on the connection's reader, which owns its session.
	var denied map[string]bool
	if s.checks(r) {
		denied = map[string]bool{}
		for _, rt := range req.Topics {
			name := rt.Topic
			if req.Version >= 13 {
				name, _ = s.backend.TopicName(rt.TopicID)
			}
			if name != "" && !s.allowedTopic(r, kmsg.ACLOperationRead, name) {
				denied[name] = true
			}
		}
	}
	arena := s.readArena()
	rep := later(func() kmsg.Response {
		s.awaitFetchLeaders(ctx, req)
		// A long poll parked on a leader that gets cut off would hold
		// its client for the rest of its wait (franz-go: 5 s) before the
		// next fetch finds the partitions leaderless: it ends when the
		// node becomes cut off, and the partitions are read again, which
		// answers NOT_LEADER_OR_FOLLOWER for those without a leader. (A
		// node already cut off that still leads the partitions, as with
		// Iggy, polls as usual.)
		poll, stop := ctx, context.CancelFunc(func() {})
		if !s.cutOffNow() {
			poll, stop = s.untilCutOff(context.WithCancel(ctx))
		}
		resp := s.fetch(poll, arena, req, denied)
		ended := poll.Err() != nil && ctx.Err() == nil // before stop, which ends it too
		stop()
		if ended && s.fetchLeaderless(req) {
			var watches []partitionWatch
			resp, _ = s.fetchOnce(ctx, arena, req, denied, &watches)
		}
		s.addFetchLeaderHints(req, resp)
		return resp
	})
	if arena != nil {
		rep.release = arena.release
	}
	return rep
}

// mergeRepeatedPartitions answers a partition named more than once in one
// fetch once, as Kafka does: at the place it was first named, with the
// last naming's offsets and limits; partitions that then follow each other
// under the same topic share one topic entry. n is the request's partition
// count.
func mergeRepeatedPartitions(req *kmsg.FetchRequest, n int) {
	if n < 2 || !namesRepeated(req, n) {
		return
	}
	type entry struct {
		key fetchKey
		p   kmsg.FetchRequestTopicPartition
	}
	seen := make(map[fetchKey]int, n)
	entries := make([]entry, 0, n)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := fetchKey{t.Topic, t.TopicID, p.Partition}
			if i, ok := seen[k]; ok {
				entries[i].p = p
				continue
			}
			seen[k] = len(entries)
			entries = append(entries, entry{k, p})
		}
	}
	topics := make([]kmsg.FetchRequestTopic, 0, len(req.Topics))
	for i, e := range entries {
		if i == 0 || e.key.topic != entries[i-1].key.topic || e.key.id != entries[i-1].key.id {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = e.key.topic, e.key.id
			topics = append(topics, t)
		}
		last := &topics[len(topics)-1]
		last.Partitions = append(last.Partitions, e.p)
	}
	req.Topics = topics
}

// fetchKey names a partition as a fetch does: by topic name before v13,
// by topic id from it (the other field is then empty).
type fetchKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// namesRepeated reports whether req names a partition twice or a topic in
// two entries in a row; without allocating for the usual small fetch.
func namesRepeated(req *kmsg.FetchRequest, n int) bool {
	for i := 1; i < len(req.Topics); i++ {
		if req.Topics[i].Topic == req.Topics[i-1].Topic && req.Topics[i].TopicID == req.Topics[i-1].TopicID {
			return true
		}
	}
	var small [16]fetchKey // on the stack: most fetches name a few partitions
	seen, many := small[:0], map[fetchKey]bool(nil)
	if n > len(small) {
		many = make(map[fetchKey]bool, n)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := fetchKey{t.Topic, t.TopicID, p.Partition}
			if many != nil {
				if many[k] {
					return true
				}
				many[k] = true
				continue
			}
			if slices.Contains(seen, k) {
				return true
			}
			seen = append(seen, k)
		}
	}
	return false
}

// fetch answers req, its reads in buffers of arena; partitions of denied
// topics get TOPIC_AUTHORIZATION_FAILED.
func (s *Server) fetch(ctx context.Context, arena *readArena, req *kmsg.FetchRequest, denied map[string]bool) *kmsg.FetchResponse {
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	var watches []partitionWatch
	resp, size := s.fetchOnce(ctx, arena, req, denied, &watches)
	if size >= int(req.MinBytes) || size > 0 && req.MinBytes <= 0 || wait <= 0 || len(watches) == 0 {
		return resp
	}
	s.metrics.parkedFetches.Add(1)
	changed := s.awaitMinBytes(ctx, watches, size, int(req.MinBytes), deadline)
	s.metrics.parkedFetches.Add(-1)
	if !changed || ctx.Err() != nil {
		return resp // nothing arrived: the first read is the answer
	}
	watches = watches[:0]
	resp, _ = s.fetchOnce(ctx, arena, req, denied, &watches)
	return resp
}

// partitionWatch is one partition a long poll waits on: a wake-up channel
// closed by its next append, the bytes it had to offer, and the offset
// from which bytes are new.
type partitionWatch struct {
	topic     string
	partition int32
	next      int64
	maxBytes  int
	ch        <-chan struct{}
	size      int
}

// awaitMinBytes waits until the partitions have at least minBytes to
// offer, or the deadline. A wake-up reads only what was appended to the
// partition that changed and counts those bytes toward minBytes, so a
// waiting long poll costs one small read per append, not a whole fetch. It
// reports whether any partition changed.
func (s *Server) awaitMinBytes(ctx context.Context, watches []partitionWatch, total, minBytes int, deadline time.Time) bool {
	changed := false
	chans := make([]<-chan struct{}, len(watches))
	for total < minBytes {
		for i := range watches {
			chans[i] = watches[i].ch
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return changed
		}
		i := waitAny(ctx, chans, remaining)
		if i < 0 {
			return changed
		}
		changed = true
		w := &watches[i]
		ch, err := s.backend.Watch(w.topic, w.partition) // before the read, so an append in between wakes us
		if err != nil {
			return true
		}
		w.ch = ch
		if w.size >= w.maxBytes {
			continue // this partition already gives all it may
		}
		// Counted and dropped, so not from the fetch's arena, which
		// would hold a pooled buffer for each wake-up until the answer.
		res, err := s.backend.Read(ctx, w.topic, w.partition, w.next, w.maxBytes-w.size)
		if err != nil {
			return true // the answer's full read reports it
		}
		total += len(res.Records)
		w.size += len(res.Records)
		w.next = max(w.next, res.HighWatermark)
	}
	return true
}

// waitAny blocks until one channel closes and returns its index, or -1
// when the time runs out or ctx ends.
func waitAny(ctx context.Context, chans []<-chan struct{}, d time.Duration) int {
	defer worktime.Wait(ctx)()
	timer := time.NewTimer(d)
	defer timer.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return 0
		case <-timer.C:
			return -1
		case <-ctx.Done():
			return -1
		}
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	i, _, _ := reflect.Select(cases)
	return i - 2
}

// fetchReadParallelism bounds the partition reads one fetch runs at once.
// With the Iggy backend each read is a round trip to Iggy; in parallel, a
// fetch of many partitions costs about one instead of one per partition.
const fetchReadParallelism = 8

// partitionRead is one partition of a fetch that is served.
type partitionRead struct {
	topic string
	rp    *kmsg.FetchRequestTopicPartition
	sp    *kmsg.FetchResponseTopicPartition
	watch <-chan struct{} // nil when the partition cannot be watched
	res   ReadResult
	err   error
}

// fetchOnce reads every requested partition once. It collects a wake-up
// channel for each partition that answered without error.
func (s *Server) fetchOnce(ctx context.Context, arena *readArena, req *kmsg.FetchRequest, denied map[string]bool, watches *[]partitionWatch) (*kmsg.FetchResponse, int) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	maxBytes := max(int(req.MaxBytes), 1) // 0 still gets the first batch (KIP-74), as from Kafka
	maxBytes = min(maxBytes, int(s.cfg.MaxFrameBytes)-1024)
	self := s.cluster.Self().ID
	var reads []partitionRead
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for i, rt := range req.Topics {
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
		if denied[name] {
			topicErr = kerr.TopicAuthorizationFailed.Code
		}
		// Sized up front: reads point into this array.
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		for j, rp := range rt.Partitions {
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
			st.Partitions = append(st.Partitions, sp)
			if sp.ErrorCode != 0 {
				continue
			}
			r := partitionRead{topic: name, rp: &req.Topics[i].Partitions[j], sp: &st.Partitions[j]}
			// Take the wake-up channel before reading so an append in
			// between still wakes us.
			if ch, err := s.backend.Watch(name, rp.Partition); err == nil {
				r.watch = ch
			}
			reads = append(reads, r)
		}
		resp.Topics = append(resp.Topics, st)
	}
	s.readPartitions(ctx, arena, reads, maxBytes)

	// The response budget is applied in request order, as if the reads had
	// run one after another (KIP-74: the first non-empty partition always
	// gets its data).
	total := 0
	for i := range reads {
		r := &reads[i]
		if r.err != nil {
			r.sp.ErrorCode = ErrorCode(r.err) // offsets stay -1, as Kafka answers an error
			continue
		}
		r.sp.HighWatermark, r.sp.LastStableOffset, r.sp.LogStartOffset = r.res.HighWatermark, r.res.HighWatermark, r.res.LogStartOffset
		if s.txnBackend != nil {
			s.stabilize(r, req.IsolationLevel == readCommitted)
		}
		if r.watch != nil {
			*watches = append(*watches, partitionWatch{topic: r.topic, partition: r.rp.Partition,
				next: max(r.rp.FetchOffset, r.res.HighWatermark), maxBytes: max(min(int(r.rp.PartitionMaxBytes), maxBytes), 1),
				ch: r.watch, size: len(r.res.Records)})
		}
		data := r.res.Records
		if total > 0 {
			data = batchesWithin(data, min(int(r.rp.PartitionMaxBytes), maxBytes-total))
		}
		if len(data) > 0 {
			r.sp.RecordBatches = data
			total += len(data)
		}
	}
	return resp, total
}

// readCommitted is the isolation level that hides open and aborted
// transactions' records.
const readCommitted = 1

// stabilize reports the partition's last stable offset and, for a
// read_committed fetch, keeps only the batches below it and lists the
// aborted transactions among them, which the client drops. The offset is
// read after the records, so every batch kept is decided: committed, or
// aborted and listed.
func (s *Server) stabilize(r *partitionRead, committed bool) {
	lso, err := s.txnBackend.LastStableOffset(r.topic, r.rp.Partition)
	if err != nil {
		return
	}
	r.sp.LastStableOffset = lso
	if !committed {
		return
	}
	n, end := 0, r.rp.FetchOffset
	for data := r.res.Records; n < len(data); {
		h, err := records.ParseHeader(data[n:])
		if err != nil || h.BaseOffset >= lso || n+h.Size() > len(data) {
			break
		}
		n += h.Size()
		end = h.LastOffset() + 1
	}
	r.res.Records = r.res.Records[:n]
	// As Kafka: the aborted transactions among the records returned.
	aborted := s.txnBackend.AbortedTransactions(r.topic, r.rp.Partition, r.rp.FetchOffset, end)
	r.sp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(aborted))
	for _, a := range aborted {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		r.sp.AbortedTransactions = append(r.sp.AbortedTransactions, at)
	}
}

// readPartitions reads every partition, up to fetchReadParallelism at once.
func (s *Server) readPartitions(ctx context.Context, arena *readArena, reads []partitionRead, maxBytes int) {
	read := func(r *partitionRead) {
		limit := max(min(int(r.rp.PartitionMaxBytes), maxBytes), 1)
		r.res, r.err = s.read(ctx, arena, r.topic, r.rp.Partition, r.rp.FetchOffset, limit)
	}
	if len(reads) == 1 {
		read(&reads[0])
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, fetchReadParallelism)
	for i := range reads {
		sem <- struct{}{}
		wg.Add(1)
		go func(r *partitionRead) {
			defer func() { <-sem; wg.Done() }()
			read(r)
		}(&reads[i])
	}
	wg.Wait()
}

// batchesWithin returns the longest run of whole batches at the start of
// data that fits in limit bytes.
func batchesWithin(data []byte, limit int) []byte {
	n := 0
	for n < len(data) {
		h, err := records.ParseHeader(data[n:])
		if err != nil || n+h.Size() > limit || n+h.Size() > len(data) {
			break
		}
		n += h.Size()
	}
	return data[:n]
}
