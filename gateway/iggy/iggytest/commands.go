package iggytest

import (
	"encoding/binary"
	"math"

	"github.com/kgate/kgate/gateway/iggy"
)

// outcome is what a command produced. status is the reply-status channel
// (pre-commit denials, decoding failures, every legacy error); result is
// the Current result-section channel of result-framed commands (the
// legacy handler turns it into a status, as do Current non-RF commands).
type outcome struct {
	status uint32
	result uint32
	body   []byte
}

func okBody(b []byte) outcome    { return outcome{body: b} }
func denied(code uint32) outcome { return outcome{status: code} }
func failed(code uint32) outcome { return outcome{result: code} }

// exec runs one data command (everything but login, logout and ping) for
// the server's dialect. It never panics on malformed input.
func (s *Server) exec(code uint32, body []byte) outcome {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	switch code {
	case cGetStream:
		return s.getStream(body)
	case cGetStreams:
		return s.getStreams(body)
	case cCreateStream:
		return s.createStream(body)
	case cDeleteStream:
		return s.deleteStream(body)
	case cGetTopic:
		return s.getTopic(body)
	case cGetTopics:
		return s.getTopics(body)
	case cCreateTopic:
		return s.createTopic(body)
	case cUpdateTopic:
		return s.updateTopic(body)
	case cDeleteTopic:
		return s.deleteTopic(body)
	case cCreatePartitions, cDeletePartitions:
		return s.changePartitions(code, body)
	case cSendMessages:
		if s.dialect == iggy.Legacy {
			return s.sendLegacy(body)
		}
		return s.sendCurrent(body)
	case cPollMessages:
		return s.pollMessages(body)
	case cGetConsumerOffset:
		return s.getOffset(body)
	case cStoreConsumerOffset, cDeleteConsumerOffset:
		return s.changeOffset(code, body)
	case cFlushUnsavedBuffer:
		if s.dialect == iggy.Legacy {
			return s.flushLegacy(body)
		}
		return denied(codeFeatureUnavailable)
	}
	return denied(codeInvalidCommand)
}

// flushLegacy handles FlushUnsavedBuffer 102 (§13.4): stream + topic +
// [partition u32][fsync u8]. Nothing is buffered in the double.
func (s *Server) flushLegacy(body []byte) outcome {
	r := breader{b: body}
	sid, tid := r.ident(), r.ident()
	pid := r.u32()
	r.u8()
	if r.code != 0 {
		return denied(r.code)
	}
	if _, c := s.offsetTarget(sid, tid, pid, true); c != 0 {
		return denied(c)
	}
	return okBody(nil)
}

func (s *Server) strict() bool { return s.dialect == iggy.Current }

func (s *Server) getStream(body []byte) outcome {
	r := breader{b: body}
	id := r.ident()
	if c := r.end(s.strict()); c != 0 {
		return denied(c)
	}
	st := s.data.stream(id)
	if st == nil {
		return okBody(nil) // not found: empty body (§3, §13.4)
	}
	w := &bwriter{}
	ts := st.sortedTopics()
	now := s.data.peek()
	for _, t := range ts {
		t.expire(now)
	}
	writeStream(w, s.dialect, st)
	for _, t := range ts {
		writeTopic(w, s.dialect, t)
	}
	return okBody(w.b)
}

func (s *Server) getStreams(body []byte) outcome {
	if s.strict() && len(body) != 0 {
		return denied(codeInvalidCommand)
	}
	w := &bwriter{}
	now := s.data.peek()
	for _, st := range s.data.sortedStreams() {
		for _, t := range st.topics {
			t.expire(now)
		}
		writeStream(w, s.dialect, st)
	}
	return okBody(w.b)
}

func (s *Server) createStream(body []byte) outcome {
	r := breader{b: body}
	name := r.wireName()
	var opts []option
	if s.dialect == iggy.Current {
		var c uint32
		if opts, c = parseOptions(r.rest()); c != 0 && r.code == 0 {
			return failed(c)
		}
	}
	if r.code != 0 {
		return denied(r.code)
	}
	if len(opts) > 0 {
		return failed(codeUnsupportedOptionKey) // streams take no options here
	}
	st, c := s.data.createStream(name)
	if c != 0 {
		return failed(c)
	}
	w := &bwriter{}
	writeStream(w, s.dialect, st)
	return okBody(w.b)
}

func (s *Server) deleteStream(body []byte) outcome {
	r := breader{b: body}
	id := r.ident()
	if c := r.end(s.strict()); c != 0 {
		return denied(c)
	}
	st := s.data.stream(id)
	if st == nil {
		return failed(codeStreamIDNotFound)
	}
	delete(s.data.streams, st.id)
	return okBody(nil)
}

func (s *Server) getTopic(body []byte) outcome {
	r := breader{b: body}
	sid, tid := r.ident(), r.ident()
	if c := r.end(s.strict()); c != 0 {
		return denied(c)
	}
	_, t, c := s.data.lookup(sid, tid)
	if c != 0 {
		return okBody(nil) // not found: empty body
	}
	w := &bwriter{}
	writeTopicDetails(w, s.dialect, t)
	return okBody(w.b)
}

func (s *Server) getTopics(body []byte) outcome {
	r := breader{b: body}
	sid := r.ident()
	if c := r.end(s.strict()); c != 0 {
		return denied(c)
	}
	st := s.data.stream(sid)
	if st == nil {
		if s.dialect == iggy.Legacy {
			return okBody(nil) // §13.4: empty if the stream is missing
		}
		return denied(codeStreamIDNotFound)
	}
	w := &bwriter{}
	ts := st.sortedTopics()
	if s.dialect == iggy.Current {
		w.u32(uint32(len(ts)))
	}
	now := s.data.peek()
	for _, t := range ts {
		t.expire(now)
		writeTopic(w, s.dialect, t)
	}
	return okBody(w.b)
}

// legacyTopicFields reads §13.6 [compression u8][expiry u64][max_size u64][replication u8][name].
func legacyTopicFields(r *breader) (ts topicSettings, replication uint8, name string) {
	ts.compression = uint64(r.u8())
	ts.expiry = r.u64()
	ts.maxSize = r.u64()
	replication = r.u8()
	name = r.wireName()
	ts.hasCompression, ts.hasExpiry, ts.hasSize = true, true, true
	ts.segmentSize = defaultSegment
	if r.code == 0 && ts.compression != 1 && ts.compression != 2 {
		r.fail(codeInvalidCommand)
	}
	return
}

// resolve applies the defaults: expiry / size 0 mean the server default
// (never / unlimited); a finite size must hold at least one segment.
func (ts *topicSettings) resolve() uint32 {
	if ts.hasExpiry && ts.expiry == 0 {
		ts.expiry = never
	}
	if ts.hasSize && ts.maxSize == 0 {
		ts.maxSize = never
	}
	if ts.hasSize && ts.maxSize != never && ts.maxSize < ts.segmentSize {
		return codeInvalidTopicSize
	}
	return 0
}

func (s *Server) createTopic(body []byte) outcome {
	r := breader{b: body}
	sid := r.ident()
	partitions := r.u32()
	var (
		ts          topicSettings
		replication uint8
		name        string
		opts        []option
	)
	if s.dialect == iggy.Current {
		name = r.wireName()
		rest := r.rest()
		if r.code != 0 {
			return denied(r.code)
		}
		var c uint32
		if opts, c = parseOptions(rest); c != 0 {
			return failed(c)
		}
		if ts, c = topicOptions(opts, false); c != 0 {
			return failed(c)
		}
	} else {
		ts, replication, name = legacyTopicFields(&r)
		if r.code != 0 {
			return denied(r.code)
		}
		replication = max(replication, 1)
	}
	st := s.data.stream(sid)
	if st == nil {
		return failed(codeStreamIDNotFound)
	}
	if partitions > maxPartitions {
		return failed(codeTooManyPartitions)
	}
	if c := ts.resolve(); c != 0 {
		return failed(c)
	}
	t := &topic{name: name, compression: 1, expiry: never, maxSize: never, replication: replication, options: opts}
	if ts.hasCompression {
		t.compression = uint8(ts.compression)
	}
	if ts.hasExpiry {
		t.expiry = ts.expiry
	}
	if ts.hasSize {
		t.maxSize = ts.maxSize
	}
	t, c := s.data.createTopic(st, t, partitions)
	if c != 0 {
		return failed(c)
	}
	w := &bwriter{}
	writeTopicDetails(w, s.dialect, t)
	return okBody(w.b)
}

func (s *Server) updateTopic(body []byte) outcome {
	r := breader{b: body}
	sid, tid := r.ident(), r.ident()
	var (
		ts          topicSettings
		replication uint8
		name        string
		opts        []option
	)
	if s.dialect == iggy.Current {
		name = r.wireName()
		rest := r.rest()
		if r.code != 0 {
			return denied(r.code)
		}
		var c uint32
		if opts, c = parseOptions(rest); c != 0 {
			return failed(c)
		}
		if ts, c = topicOptions(opts, true); c != 0 {
			return failed(c)
		}
	} else {
		ts, replication, name = legacyTopicFields(&r)
		if r.code != 0 {
			return denied(r.code)
		}
		replication = max(replication, 1)
	}
	st, t, c := s.data.lookup(sid, tid)
	if c != 0 {
		return failed(c)
	}
	if other := st.topicByName(name); other != nil && other != t {
		return failed(codeTopicNameExists)
	}
	if c := ts.resolve(); c != 0 {
		return failed(c)
	}
	t.name = name
	if ts.hasCompression {
		t.compression = uint8(ts.compression)
	}
	if ts.hasExpiry {
		t.expiry = ts.expiry
	}
	if ts.hasSize {
		t.maxSize = ts.maxSize
	}
	if s.dialect == iggy.Legacy {
		t.replication = replication
	} else {
		t.options = mergeOptions(t.options, opts)
	}
	return okBody(nil)
}

func (s *Server) deleteTopic(body []byte) outcome {
	r := breader{b: body}
	sid, tid := r.ident(), r.ident()
	if c := r.end(s.strict()); c != 0 {
		return denied(c)
	}
	st, t, c := s.data.lookup(sid, tid)
	if c != 0 {
		return failed(c)
	}
	delete(st.topics, t.id)
	return okBody(nil)
}

func (s *Server) changePartitions(code uint32, body []byte) outcome {
	r := breader{b: body}
	sid, tid := r.ident(), r.ident()
	n := r.u32()
	if c := r.end(s.strict()); c != 0 {
		return denied(c)
	}
	_, t, c := s.data.lookup(sid, tid)
	if c != 0 {
		return failed(c)
	}
	if n == 0 || n > maxPartitions {
		return failed(codeTooManyPartitions)
	}
	if code == cCreatePartitions {
		s.data.addPartitions(t, n)
		return okBody(nil)
	}
	if int(n) > len(t.partitions) {
		return failed(codeInvalidPartitionsCount)
	}
	t.partitions = t.partitions[:len(t.partitions)-int(n)] // the highest ids go
	return okBody(nil)
}

// ---- PollMessages (§7, §13.8) ----

func (s *Server) pollMessages(body []byte) outcome {
	r := breader{b: body}
	cons := r.consumer()
	sid, tid := r.ident(), r.ident()
	pid, pset := r.optPartition()
	kind := r.u8()
	value := r.u64()
	count := r.u32()
	auto := r.u8()
	if r.code == 0 {
		s.mu.Lock()
		s.polls = append(s.polls, PollRequest{Kind: kind, Value: value, Count: count})
		s.mu.Unlock()
	}
	if r.code == 0 && (kind < pollOffset || kind > pollNext || auto > 1) {
		r.fail(codeInvalidCommand)
	}
	if c := r.end(s.strict()); c != 0 {
		if s.dialect == iggy.Current {
			return okBody(emptyPoll(0)) // §7: a malformed request gets an empty poll
		}
		return denied(c)
	}
	_, t, c := s.data.lookup(sid, tid)
	if c != 0 {
		return denied(c)
	}
	if cons.kind == 2 {
		// No consumer groups in the double: the consumer is never a member.
		if s.dialect == iggy.Current {
			return okBody(emptyPoll(math.MaxUint32))
		}
		return denied(codeConsumerGroupMember)
	}
	if !pset {
		pid = 0
	}
	if int64(pid) >= int64(len(t.partitions)) {
		return denied(codePartitionNotFound)
	}
	p := t.partitions[pid]
	stored, has := p.offsets[cons.key()]
	msgs := poll(p, kind, value, count, stored, has)
	var out []byte
	if s.dialect == iggy.Current {
		out, msgs = encodePollCurrent(p, msgs)
	} else {
		out, msgs = encodePollLegacy(p, msgs)
	}
	if auto == 1 && len(msgs) > 0 {
		p.offsets[cons.key()] = msgs[len(msgs)-1].Offset
	}
	return okBody(out)
}

func emptyPoll(partition uint32) []byte {
	w := &bwriter{}
	w.u32(partition)
	w.u64(0)
	w.u32(0)
	return w.b
}

// maxReplyBody keeps a poll reply inside the 64 MiB frame bound.
const maxReplyBody = iggy.MaxFrameSize - iggy.HeaderSize

// encodePollCurrent writes the §7 reply: one batch record per run of
// messages that were appended together (they share base_timestamp) and
// whose origin timestamps fit the u32 delta. It returns the messages
// actually included (a reply is cut to fit the frame bound).
func encodePollCurrent(p *partition, msgs []storedMsg) ([]byte, []storedMsg) {
	w := &bwriter{}
	w.u32(p.id)
	w.u64(p.currentOffset())
	countAt := len(w.b)
	w.u32(0)
	n := 0
	for n < len(msgs) {
		// Take the run msgs[n:j].
		j := n
		minTS, maxTS := msgs[n].OriginTimestamp, msgs[n].OriginTimestamp
		size := 256
		for j < len(msgs) && msgs[j].batch == msgs[n].batch {
			lo, hi := min(minTS, msgs[j].OriginTimestamp), max(maxTS, msgs[j].OriginTimestamp)
			fs := 48 + len(msgs[j].Payload) + len(msgs[j].UserHeaders)
			if hi-lo > math.MaxUint32 || len(w.b)+size+fs > maxReplyBody {
				break
			}
			minTS, maxTS, size = lo, hi, size+fs
			j++
		}
		if j == n {
			break // the next message does not fit the frame
		}
		writeRecord(w, p.id, msgs[n:j], minTS, uint64(size))
		n = j
	}
	binary.LittleEndian.PutUint32(w.b[countAt:], uint32(n))
	return w.b, msgs[:n]
}

// writeRecord writes one §6.2 batch record with recomputed checksums.
func writeRecord(w *bwriter, pid uint32, msgs []storedMsg, originTS, batchLen uint64) {
	h := len(w.b)
	w.u64(uint64(pid))
	w.u64(msgs[0].Offset)
	w.u64(msgs[0].Timestamp)
	w.u64(originTS)
	w.u64(batchLen)
	w.u64(0) // batch checksum, patched below
	w.u32(uint32(len(msgs)))
	w.zeros(204)
	sums := make([]byte, 0, 44+8*len(msgs))
	sums = append(sums, w.b[h:h+40]...)
	sums = append(sums, w.b[h+48:h+52]...)
	for _, m := range msgs {
		start := len(w.b)
		w.u64(0)
		w.bytes(m.ID[:])
		w.u32(uint32(m.Offset - msgs[0].Offset))
		w.u32(uint32(m.OriginTimestamp - originTS))
		w.u32(uint32(len(m.UserHeaders)))
		w.u32(uint32(len(m.Payload)))
		w.u64(0)
		w.bytes(m.Payload)
		w.bytes(m.UserHeaders)
		sum := xxh3Hash(w.b[start+8:])
		binary.LittleEndian.PutUint64(w.b[start:], sum)
		sums = binary.LittleEndian.AppendUint64(sums, sum)
	}
	binary.LittleEndian.PutUint64(w.b[h+40:], xxh3Hash(sums))
}

// encodePollLegacy writes the §13.8 reply with 64-byte message headers.
func encodePollLegacy(p *partition, msgs []storedMsg) ([]byte, []storedMsg) {
	w := &bwriter{}
	w.u32(p.id)
	w.u64(p.currentOffset())
	countAt := len(w.b)
	w.u32(0)
	n := 0
	for _, m := range msgs {
		if len(w.b)+64+len(m.Payload)+len(m.UserHeaders) > maxReplyBody {
			break
		}
		start := len(w.b)
		w.u64(0)
		w.bytes(m.ID[:])
		w.u64(m.Offset)
		w.u64(m.Timestamp)
		w.u64(m.OriginTimestamp)
		w.u32(uint32(len(m.UserHeaders)))
		w.u32(uint32(len(m.Payload)))
		w.u64(0)
		w.bytes(m.Payload)
		w.bytes(m.UserHeaders)
		binary.LittleEndian.PutUint64(w.b[start:], xxh3Hash(w.b[start+8:]))
		n++
	}
	binary.LittleEndian.PutUint32(w.b[countAt:], uint32(n))
	return w.b, msgs[:n]
}

// ---- consumer offsets (§5 codes 120–122, §13.9) ----

// offsetTarget resolves the partition of an offset request. A kind-1
// consumer without a partition id uses partition 0.
func (s *Server) offsetTarget(sid, tid ident, pid uint32, pset bool) (*partition, uint32) {
	_, t, c := s.data.lookup(sid, tid)
	if c != 0 {
		return nil, c
	}
	if !pset {
		pid = 0
	}
	if int64(pid) >= int64(len(t.partitions)) {
		return nil, codePartitionNotFound
	}
	return t.partitions[pid], 0
}

func (s *Server) getOffset(body []byte) outcome {
	r := breader{b: body}
	cons := r.consumer()
	sid, tid := r.ident(), r.ident()
	pid, pset := r.optPartition()
	if c := r.end(s.strict()); c != 0 {
		return denied(c)
	}
	p, c := s.offsetTarget(sid, tid, pid, pset)
	if c != 0 {
		if s.dialect == iggy.Legacy {
			return okBody(nil) // §13.9: empty when any lookup fails
		}
		return denied(c)
	}
	if cons.kind == 2 {
		return okBody(nil) // no group offsets are ever stored
	}
	stored, ok := p.offsets[cons.key()]
	if !ok {
		return okBody(nil)
	}
	w := &bwriter{}
	w.u32(p.id)
	w.u64(p.currentOffset())
	w.u64(stored)
	return okBody(w.b)
}

func (s *Server) changeOffset(code uint32, body []byte) outcome {
	r := breader{b: body}
	cons := r.consumer()
	sid, tid := r.ident(), r.ident()
	pid, pset := r.optPartition()
	var offset uint64
	if code == cStoreConsumerOffset {
		offset = r.u64()
	}
	if s.dialect == iggy.Current {
		if ack := r.u8(); r.code == 0 && ack > 1 {
			r.fail(codeInvalidCommand)
		}
	}
	if c := r.end(s.strict()); c != 0 {
		return denied(c)
	}
	p, c := s.offsetTarget(sid, tid, pid, pset)
	if c != 0 {
		return denied(c)
	}
	if cons.kind == 2 {
		// Offset writes of groups are fenced to members; the double has no groups.
		if s.dialect == iggy.Current {
			return denied(codeConsumerGroupNotFound)
		}
		return denied(codeConsumerGroupMember)
	}
	key := cons.key()
	if code == cDeleteConsumerOffset {
		if _, ok := p.offsets[key]; !ok {
			return failed(codeConsumerOffsetNotFound)
		}
		delete(p.offsets, key)
		return okBody(nil)
	}
	if p.next == 0 || offset > p.currentOffset() {
		return denied(codeInvalidOffset)
	}
	p.offsets[key] = offset
	return okBody(nil)
}
