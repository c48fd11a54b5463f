package iggytest

import (
	"crypto/rand"
	"math"
	"sort"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
)

const (
	never          = math.MaxUint64 // message_expiry / max_topic_size "never / unlimited"
	defaultSegment = 1 << 30        // 1 GiB
	maxPartitions  = 1000           // per create / add / delete request
	maxStreams     = 1 << 20
	maxTopics      = 4096
)

// StoredMessage is a message as the double stores it.
type StoredMessage struct {
	Offset          uint64
	Timestamp       uint64 // server append time, µs since epoch
	OriginTimestamp uint64 // µs since epoch, as sent by the producer
	ID              [16]byte
	Payload         []byte
	UserHeaders     []byte // raw TLV block (§4), empty for none
}

type storedMsg struct {
	StoredMessage
	batch uint64 // append sequence: messages of one SendMessages share it
	size  uint64 // bytes counted in size_bytes (dialect's message layout)
}

type partition struct {
	id        uint32
	createdAt uint64
	msgs      []storedMsg // contiguous offsets: msgs[i].Offset == first()+i
	next      uint64      // next offset to assign
	sizeBytes uint64
	offsets   map[uint32]uint64 // kind-1 consumer key → stored offset
}

// first is the offset of the oldest retained message (== next when empty).
func (p *partition) first() uint64 { return p.next - uint64(len(p.msgs)) }

// currentOffset is the last assigned offset, 0 for a partition that never
// held a message (§8).
func (p *partition) currentOffset() uint64 {
	if p.next == 0 {
		return 0
	}
	return p.next - 1
}

// option is one explicit topic option (Current), kept to echo it back.
type option struct {
	key  string
	kind uint8
	val  []byte
}

type topic struct {
	id          uint32
	name        string
	createdAt   uint64
	compression uint8  // 1 none, 2 gzip
	expiry      uint64 // µs, never = u64::MAX
	maxSize     uint64 // bytes, never = unlimited
	replication uint8  // Legacy only
	options     []option
	partitions  []*partition
	rr          uint64 // Balanced round-robin counter
}

func (t *topic) stats() (size, count uint64) {
	for _, p := range t.partitions {
		size += p.sizeBytes
		count += uint64(len(p.msgs))
	}
	return
}

// expire drops, in every partition, the oldest messages appended before
// now − expiry. Real Iggy deletes whole sealed segments; the double drops
// single messages, which keeps offsets contiguous all the same.
func (t *topic) expire(now uint64) {
	if t.expiry == 0 || t.expiry == never || t.expiry > now {
		return
	}
	cutoff := now - t.expiry
	for _, p := range t.partitions {
		n := 0
		for n < len(p.msgs) && p.msgs[n].Timestamp < cutoff {
			p.sizeBytes -= p.msgs[n].size
			n++
		}
		if n > 0 {
			p.msgs = append([]storedMsg(nil), p.msgs[n:]...)
		}
	}
}

type stream struct {
	id        uint32
	name      string
	createdAt uint64
	topics    map[uint32]*topic
}

func (s *stream) stats() (size, count uint64) {
	for _, t := range s.topics {
		ts, tc := t.stats()
		size += ts
		count += tc
	}
	return
}

func (s *stream) sortedTopics() []*topic {
	out := make([]*topic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (s *stream) topicByName(name string) *topic {
	for _, t := range s.topics {
		if t.name == name {
			return t
		}
	}
	return nil
}

// store holds every stream; the Server guards it with its data mutex.
type store struct {
	dialect iggy.Dialect
	streams map[uint32]*stream
	lastTS  uint64
	batches uint64
}

func newStore(d iggy.Dialect) *store {
	return &store{dialect: d, streams: map[uint32]*stream{}}
}

// now returns the current time in µs, strictly increasing across calls so
// append timestamps order batches (Timestamp polling relies on it).
func (st *store) now() uint64 {
	ts := uint64(time.Now().UnixMicro())
	if ts <= st.lastTS {
		ts = st.lastTS + 1
	}
	st.lastTS = ts
	return ts
}

// peek returns the current time without advancing the clock.
func (st *store) peek() uint64 { return max(uint64(time.Now().UnixMicro()), st.lastTS) }

func (st *store) sortedStreams() []*stream {
	out := make([]*stream, 0, len(st.streams))
	for _, s := range st.streams {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (st *store) streamByName(name string) *stream {
	for _, s := range st.streams {
		if s.name == name {
			return s
		}
	}
	return nil
}

func (st *store) stream(id ident) *stream {
	if id.isName {
		return st.streamByName(id.name)
	}
	return st.streams[id.id]
}

// lookup resolves stream and topic; code is 1009 / 2010 (for numeric and
// string ids alike) when one is missing. Expired messages of the topic
// are dropped first.
func (st *store) lookup(sid, tid ident) (*stream, *topic, uint32) {
	s := st.stream(sid)
	if s == nil {
		return nil, nil, codeStreamIDNotFound
	}
	var t *topic
	if tid.isName {
		t = s.topicByName(tid.name)
	} else {
		t = s.topics[tid.id]
	}
	if t == nil {
		return s, nil, codeTopicIDNotFound
	}
	t.expire(st.peek())
	return s, t, 0
}

// lowestFree returns the lowest id not used in m (freed ids are reused, §8).
func lowestFree[T any](m map[uint32]T) uint32 {
	for i := uint32(0); ; i++ {
		if _, ok := m[i]; !ok {
			return i
		}
	}
}

func (st *store) createStream(name string) (*stream, uint32) {
	if st.streamByName(name) != nil {
		return nil, codeStreamNameExists
	}
	if len(st.streams) >= maxStreams {
		return nil, codeTooManyStreams
	}
	s := &stream{id: lowestFree(st.streams), name: name, createdAt: st.now(), topics: map[uint32]*topic{}}
	st.streams[s.id] = s
	return s, 0
}

// createTopic adds a topic with resolved settings; the caller validated them.
func (st *store) createTopic(s *stream, t *topic, partitions uint32) (*topic, uint32) {
	if s.topicByName(t.name) != nil {
		return nil, codeTopicNameExists
	}
	if len(s.topics) >= maxTopics {
		return nil, codeTooManyTopics
	}
	t.id = lowestFree(s.topics)
	t.createdAt = st.now()
	s.topics[t.id] = t
	st.addPartitions(t, partitions)
	return t, 0
}

func (st *store) addPartitions(t *topic, n uint32) {
	ts := st.now()
	for range n {
		t.partitions = append(t.partitions, &partition{
			id: uint32(len(t.partitions)), createdAt: ts, offsets: map[uint32]uint64{},
		})
	}
}

// msgSize is what one message adds to size_bytes: the dialect's on-wire
// message layout (48-byte Current frame header, 64-byte legacy header).
func (st *store) msgSize(payload, headers int) uint64 {
	if st.dialect == iggy.Legacy {
		return uint64(64 + payload + headers)
	}
	return uint64(48 + payload + headers)
}

// appendMsgs stores msgs (ID, OriginTimestamp, Payload, UserHeaders set)
// at the end of p with one append timestamp and returns the base offset.
func (st *store) appendMsgs(p *partition, msgs []StoredMessage) uint64 {
	ts := st.now()
	st.batches++
	base := p.next
	for _, m := range msgs {
		m.Offset = p.next
		m.Timestamp = ts
		if st.dialect == iggy.Legacy && m.ID == ([16]byte{}) {
			m.ID = newUUID()
		}
		sm := storedMsg{StoredMessage: m, batch: st.batches, size: st.msgSize(len(m.Payload), len(m.UserHeaders))}
		p.msgs = append(p.msgs, sm)
		p.sizeBytes += sm.size
		p.next++
	}
	return base
}

// pick selects the partition for SendMessages; ok is false when the
// partition does not exist or the topic has none.
func (st *store) pick(t *topic, p partitioning) (*partition, bool) {
	n := uint64(len(t.partitions))
	if n == 0 {
		return nil, false
	}
	switch p.kind {
	case 1:
		i := t.rr % n
		t.rr++
		return t.partitions[i], true
	case 2:
		if uint64(p.id) >= n {
			return nil, false
		}
		return t.partitions[p.id], true
	case 3:
		return t.partitions[uint64(xxh32(p.key, 0))%n], true
	}
	return nil, false
}

// polling strategies (§4).
const (
	pollOffset    = 1
	pollTimestamp = 2
	pollFirst     = 3
	pollLast      = 4
	pollNext      = 5
)

// poll returns up to count messages of p for the strategy (§8, §13.8).
// stored is the consumer's stored offset, if any.
func poll(p *partition, kind uint8, value uint64, count uint32, stored uint64, hasStored bool) []storedMsg {
	if count == 0 || len(p.msgs) == 0 {
		return nil
	}
	first, last := p.first(), p.next-1
	var start uint64
	switch kind {
	case pollOffset:
		start = value
	case pollTimestamp:
		i := sort.Search(len(p.msgs), func(i int) bool { return p.msgs[i].Timestamp >= value })
		if i == len(p.msgs) {
			return nil
		}
		start = p.msgs[i].Offset
	case pollFirst:
		start = first
	case pollLast:
		if uint64(count) > last {
			start = 0
		} else {
			start = last - (uint64(count) - 1)
		}
	case pollNext:
		if hasStored {
			if stored == math.MaxUint64 {
				return nil
			}
			start = stored + 1
		}
	default:
		return nil
	}
	start = max(start, first)
	if start > last {
		return nil
	}
	i := start - first
	j := min(uint64(len(p.msgs)), i+uint64(count))
	return p.msgs[i:j]
}

// newUUID returns a random (version 4) UUID, the id a legacy server gives
// a message sent with id 0.
func newUUID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}
