package iggy

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zeebo/xxh3"
)

// ---- User headers (§4) ----

// HeaderValue is one side of a user-header TLV: a kind (1 Raw, 2 String,
// 3 Bool, 4..13 ints, 14/15 floats) and 1..255 value bytes.
type HeaderValue struct {
	Kind  uint8
	Value []byte
}

// UserHeader is a key/value pair of a message's user headers.
type UserHeader struct {
	Key   HeaderValue
	Value HeaderValue
}

// MaxUserHeadersSize is the SDK limit on a message's header block.
const MaxUserHeadersSize = 100_000

func (h HeaderValue) check() error {
	if h.Kind < 1 || h.Kind > 15 {
		return fmt.Errorf("%w: header kind %d", ErrInvalidArgument, h.Kind)
	}
	if len(h.Value) < 1 || len(h.Value) > 255 {
		return fmt.Errorf("%w: header value of %d bytes (must be 1..255)", ErrInvalidArgument, len(h.Value))
	}
	return nil
}

// EncodeUserHeaders encodes headers as the TLV block (empty for none).
func EncodeUserHeaders(hs []UserHeader) ([]byte, error) {
	w := &writer{}
	for _, h := range hs {
		for _, v := range [2]HeaderValue{h.Key, h.Value} {
			if err := v.check(); err != nil {
				return nil, err
			}
			w.u8(v.Kind)
			w.u32(uint32(len(v.Value)))
			w.bytes(v.Value)
		}
	}
	if len(w.b) > MaxUserHeadersSize {
		return nil, fmt.Errorf("%w: user headers of %d bytes", ErrInvalidArgument, len(w.b))
	}
	return w.b, nil
}

// DecodeUserHeaders parses a TLV block; values alias b.
func DecodeUserHeaders(b []byte) ([]UserHeader, error) {
	r := reader{b: b}
	var out []UserHeader
	next := func() HeaderValue {
		var v HeaderValue
		v.Kind = r.u8()
		n := r.u32()
		if r.err == nil && (v.Kind < 1 || v.Kind > 15 || n < 1 || n > 255) {
			r.fail(fmt.Errorf("%w: header kind %d length %d", ErrMalformed, v.Kind, n))
		}
		v.Value = r.take(int(min(n, 256)))
		return v
	}
	for r.err == nil && r.remaining() > 0 {
		k := next()
		if r.err == nil && r.remaining() == 0 {
			r.fail(fmt.Errorf("%w: odd number of header TLVs", ErrMalformed))
		}
		v := next()
		if r.err == nil {
			out = append(out, UserHeader{Key: k, Value: v})
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// ---- Partitioning (§4) ----

// PartitioningKind selects how SendMessages picks the partition.
type PartitioningKind uint8

const (
	PartitionBalanced      PartitioningKind = 1
	PartitionByID          PartitioningKind = 2
	PartitionByMessagesKey PartitioningKind = 3
)

// Partitioning for SendMessages. Partition ids are 0-based in both
// dialects (§8, §13.3).
type Partitioning struct {
	Kind        PartitioningKind
	PartitionID uint32 // PartitionByID
	Key         []byte // PartitionByMessagesKey, 1..255 bytes
}

// Balanced lets the server pick round-robin.
func Balanced() Partitioning { return Partitioning{Kind: PartitionBalanced} }

// ToPartition sends to a 0-based partition id.
func ToPartition(id uint32) Partitioning { return Partitioning{Kind: PartitionByID, PartitionID: id} }

// ByKey lets the server pick XXH32(key) % partitions.
func ByKey(key []byte) Partitioning { return Partitioning{Kind: PartitionByMessagesKey, Key: key} }

func (p Partitioning) encode(w *writer) error {
	switch p.Kind {
	case PartitionBalanced:
		w.u8(1)
		w.u8(0)
	case PartitionByID:
		w.u8(2)
		w.u8(4)
		w.u32(p.PartitionID)
	case PartitionByMessagesKey:
		if len(p.Key) < 1 || len(p.Key) > 255 {
			return fmt.Errorf("%w: messages key of %d bytes", ErrInvalidArgument, len(p.Key))
		}
		w.u8(3)
		w.u8(uint8(len(p.Key)))
		w.bytes(p.Key)
	default:
		return fmt.Errorf("%w: partitioning kind %d", ErrInvalidArgument, p.Kind)
	}
	return nil
}

// ---- SendMessages (§6, §13.7) ----

// Message is a message to send.
type Message struct {
	ID              [16]byte // u128 LE; 0 lets the server (Legacy) assign one. Current servers never assign ids.
	OriginTimestamp uint64   // µs since epoch
	Payload         []byte   // must be non-empty (the SDKs reject 0)
	Headers         []UserHeader
}

// MessageID returns a u128 id from its low and high 64 bits.
func MessageID(lo, hi uint64) [16]byte {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[0:], lo)
	binary.LittleEndian.PutUint64(id[8:], hi)
	return id
}

// MaxPayloadSize is the Rust SDK's per-message payload cap.
const MaxPayloadSize = 64_000_000

const (
	batchHeaderSize   = 256
	messageHeaderSize = 48 // Current
	legacyMsgHeader   = 64
	legacyIndexSize   = 16
)

// SendMessages encodes code 101 (Current operation 160 with a checksummed
// batch, §6; Legacy with an index and 64-byte headers, §13.7).
func SendMessages(d Dialect, stream, topic Identifier, p Partitioning, msgs []Message) (Request, error) {
	return AppendSendMessages(nil, d, stream, topic, p, msgs)
}

// AppendSendMessages is SendMessages encoding the body into buf's storage
// when it is large enough (the caller may then reuse it once the request
// is sent).
func AppendSendMessages(buf []byte, d Dialect, stream, topic Identifier, p Partitioning, msgs []Message) (Request, error) {
	if err := d.valid(); err != nil {
		return Request{}, err
	}
	if len(msgs) == 0 {
		return Request{}, fmt.Errorf("%w: no messages", ErrInvalidArgument)
	}
	meta := &writer{}
	if err := stream.encode(meta); err != nil {
		return Request{}, err
	}
	if err := topic.encode(meta); err != nil {
		return Request{}, err
	}
	if err := p.encode(meta); err != nil {
		return Request{}, err
	}
	meta.u32(uint32(len(msgs)))

	var hdrs [][]byte // made once a message has headers (most have none)
	total := uint64(0)
	minTS := uint64(math.MaxUint64)
	per := uint64(messageHeaderSize)
	if d == Legacy {
		per = legacyMsgHeader + legacyIndexSize
	}
	for i, m := range msgs {
		if len(m.Payload) == 0 || len(m.Payload) > MaxPayloadSize {
			return Request{}, fmt.Errorf("%w: message %d payload of %d bytes", ErrInvalidArgument, i, len(m.Payload))
		}
		h, err := EncodeUserHeaders(m.Headers)
		if err != nil {
			return Request{}, fmt.Errorf("message %d: %w", i, err)
		}
		if len(h) > 0 && hdrs == nil {
			hdrs = make([][]byte, len(msgs))
		}
		if hdrs != nil {
			hdrs[i] = h
		}
		total += per + uint64(len(m.Payload)) + uint64(len(h))
		minTS = min(minTS, m.OriginTimestamp)
	}
	bodyLen := 4 + uint64(len(meta.b)) + total
	if d == Current {
		bodyLen += batchHeaderSize
		if bodyLen > MaxFrameSize-HeaderSize {
			return Request{}, fmt.Errorf("%w: SendMessages body of %d bytes", ErrFrameTooLarge, bodyLen)
		}
	} else if bodyLen > math.MaxUint32-4 {
		return Request{}, fmt.Errorf("%w: SendMessages body of %d bytes", ErrFrameTooLarge, bodyLen)
	}
	// A Current body carries the input of its batch checksum past its end
	// (the batch header's fields, then each message's checksum), so it
	// needs no buffer of its own.
	scratch := uint64(0)
	if d == Current {
		scratch = 44 + 8*uint64(len(msgs))
	}
	w := &writer{b: buf[:0]}
	if uint64(cap(buf)) < bodyLen+scratch {
		w.b = make([]byte, 0, bodyLen+scratch)
	}
	hdrOf := func(i int) []byte {
		if hdrs == nil {
			return nil
		}
		return hdrs[i]
	}
	w.u32(uint32(len(meta.b)))
	w.bytes(meta.b)

	if d == Legacy {
		end := uint32(0)
		for i, m := range msgs {
			end += uint32(legacyMsgHeader + len(m.Payload) + len(hdrOf(i)))
			w.u32(0)
			w.u32(end)
			w.u64(0)
		}
		for i, m := range msgs {
			w.u64(0) // checksum: the server computes it
			w.bytes(m.ID[:])
			w.u64(0) // offset
			w.u64(0) // timestamp
			w.u64(m.OriginTimestamp)
			w.u32(uint32(len(hdrOf(i))))
			w.u32(uint32(len(m.Payload)))
			w.u64(0)
			w.bytes(m.Payload)
			w.bytes(hdrOf(i))
		}
		return Request{Code: CodeSendMessages, Operation: OpSendMessages, Body: w.b}, nil
	}

	batchLen := uint64(batchHeaderSize) + total
	bh := len(w.b)
	w.zeros(24)
	w.u64(minTS)
	w.u64(batchLen)
	w.u64(0) // batch checksum, patched below
	w.u32(uint32(len(msgs)))
	w.zeros(204)
	cs := w.b[bodyLen : bodyLen+scratch]
	copy(cs, w.b[bh:bh+40])
	copy(cs[40:], w.b[bh+48:bh+52])
	for i, m := range msgs {
		delta := m.OriginTimestamp - minTS
		if delta > math.MaxUint32 {
			return Request{}, fmt.Errorf("%w: message %d origin timestamp is %d µs after the batch minimum (max %d)",
				ErrInvalidArgument, i, delta, uint64(math.MaxUint32))
		}
		start := len(w.b)
		w.u64(0) // checksum, patched below
		w.bytes(m.ID[:])
		w.u32(uint32(i))
		w.u32(uint32(delta))
		w.u32(uint32(len(hdrOf(i))))
		w.u32(uint32(len(m.Payload)))
		w.u64(0)
		w.bytes(m.Payload)
		w.bytes(hdrOf(i))
		sum := xxh3.Hash(w.b[start+8:])
		binary.LittleEndian.PutUint64(w.b[start:], sum)
		binary.LittleEndian.PutUint64(cs[44+8*i:], sum)
	}
	// batch checksum: header fields 0..40, message_count, then the message checksums.
	binary.LittleEndian.PutUint64(w.b[bh+40:], xxh3.Hash(cs))
	return Request{Code: CodeSendMessages, Operation: OpSendMessages, Body: w.b}, nil
}

// SendConfirmation is one entry of a Current SendMessages reply (§6.4).
type SendConfirmation struct {
	StreamID    uint32
	TopicID     uint32
	PartitionID uint32
	BaseOffset  uint64 // offset of the first message
}

// DecodeSendMessagesReply decodes a successful SendMessages reply. Legacy
// replies are empty and return no confirmations. So does a Current reply
// with an empty body: a 0.9 server answers so a request it has already
// committed (a replay of the same request id), as the released 0.11 SDKs
// document; the caller has to find the offsets another way.
func DecodeSendMessagesReply(d Dialect, body []byte) ([]SendConfirmation, error) {
	switch d {
	case Legacy:
		if len(body) != 0 {
			return nil, fmt.Errorf("%w: legacy SendMessages reply of %d bytes", ErrMalformed, len(body))
		}
		return nil, nil
	case Current:
		if len(body) == 0 {
			return nil, nil
		}
		r := reader{b: body}
		n := r.u32()
		if r.err == nil && uint64(n)*20 > uint64(r.remaining()) {
			return nil, fmt.Errorf("%w: %d confirmations in %d bytes", ErrMalformed, n, r.remaining())
		}
		out := make([]SendConfirmation, n)
		for i := range out {
			out[i] = SendConfirmation{StreamID: r.u32(), TopicID: r.u32(), PartitionID: r.u32(), BaseOffset: r.u64()}
		}
		if err := r.end(d); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, d.valid()
}

// ---- PollMessages (§7, §13.8) ----

// PollingKind is the PollingStrategy kind.
type PollingKind uint8

const (
	PollOffset    PollingKind = 1
	PollTimestamp PollingKind = 2 // µs since epoch
	PollFirst     PollingKind = 3
	PollLast      PollingKind = 4 // the last Count messages
	PollNext      PollingKind = 5
)

// Poll describes a PollMessages request (same body in both dialects).
type Poll struct {
	Consumer   Consumer
	Stream     Identifier
	Topic      Identifier
	Partition  PartitionID
	Kind       PollingKind
	Value      uint64 // offset or timestamp; sent as 0 for First/Last/Next
	Count      uint32
	AutoCommit bool
}

// PollMessages encodes code 100.
func PollMessages(p Poll) (Request, error) {
	if p.Kind < PollOffset || p.Kind > PollNext {
		return Request{}, fmt.Errorf("%w: polling kind %d", ErrInvalidArgument, p.Kind)
	}
	w, err := offsetPrefix(p.Consumer, p.Stream, p.Topic, p.Partition)
	if err != nil {
		return Request{}, err
	}
	w.u8(uint8(p.Kind))
	if p.Kind == PollOffset || p.Kind == PollTimestamp {
		w.u64(p.Value)
	} else {
		w.u64(0)
	}
	w.u32(p.Count)
	w.bool(p.AutoCommit)
	return nonReplicated(CodePollMessages, w.b), nil
}

// PolledMessage is one decoded message. Payload and UserHeaders alias the
// reply body; parse the headers with DecodeUserHeaders.
type PolledMessage struct {
	Offset          uint64
	Timestamp       uint64 // broker append time, µs
	OriginTimestamp uint64 // µs
	ID              [16]byte
	Checksum        uint64 // as served, not verified
	Payload         []byte
	UserHeaders     []byte
}

// PolledMessages is a PollMessages reply.
type PolledMessages struct {
	PartitionID   uint32 // 0xFFFFFFFF = resync sentinel for Current group polls
	CurrentOffset uint64 // last committed offset (§8)
	Count         uint32 // messages_count as sent by the server
	Messages      []PolledMessage

	body []byte // the reply the messages alias, for Client.Release
}

// DecodePollMessagesReply decodes a PollMessages reply body.
func DecodePollMessagesReply(d Dialect, body []byte) (*PolledMessages, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	r := reader{b: body}
	out := &PolledMessages{PartitionID: r.u32(), CurrentOffset: r.u64(), Count: r.u32()}
	if r.err != nil {
		return nil, r.err
	}
	if d == Legacy {
		if uint64(out.Count)*legacyMsgHeader > uint64(r.remaining()) {
			return nil, fmt.Errorf("%w: %d messages cannot fit in %d bytes", ErrTruncated, out.Count, r.remaining())
		}
		out.Messages = make([]PolledMessage, 0, out.Count)
		for i := uint32(0); i < out.Count && r.err == nil; i++ {
			var m PolledMessage
			m.Checksum = r.u64()
			copy(m.ID[:], r.take(16))
			m.Offset = r.u64()
			m.Timestamp = r.u64()
			m.OriginTimestamp = r.u64()
			hl := r.u32()
			pl := r.u32()
			r.u64()
			m.Payload = r.take(int(min(uint64(pl), uint64(r.remaining())+1)))
			m.UserHeaders = r.take(int(min(uint64(hl), uint64(r.remaining())+1)))
			if r.err == nil {
				out.Messages = append(out.Messages, m)
			}
		}
		if err := r.done(); err != nil {
			return nil, err
		}
		return out, nil
	}
	out.Messages = make([]PolledMessage, 0, min(uint64(out.Count), uint64(r.remaining()/messageHeaderSize)))
	for r.err == nil && r.remaining() > 0 {
		hdr := r.take(batchHeaderSize)
		if r.err != nil {
			break
		}
		baseOffset := binary.LittleEndian.Uint64(hdr[8:])
		baseTS := binary.LittleEndian.Uint64(hdr[16:])
		originTS := binary.LittleEndian.Uint64(hdr[24:])
		batchLen := binary.LittleEndian.Uint64(hdr[32:])
		if batchLen < batchHeaderSize || batchLen-batchHeaderSize > uint64(r.remaining()) {
			r.fail(fmt.Errorf("%w: batch_length %d with %d bytes left", ErrMalformed, batchLen, r.remaining()))
			break
		}
		br := reader{b: r.take(int(batchLen - batchHeaderSize))}
		for br.err == nil && br.remaining() > 0 {
			var m PolledMessage
			m.Checksum = br.u64()
			copy(m.ID[:], br.take(16))
			od := br.u32()
			td := br.u32()
			hl := br.u32()
			pl := br.u32()
			br.u64()
			m.Payload = br.take(int(min(uint64(pl), uint64(br.remaining())+1)))
			m.UserHeaders = br.take(int(min(uint64(hl), uint64(br.remaining())+1)))
			m.Offset = baseOffset + uint64(od)
			m.Timestamp = baseTS
			m.OriginTimestamp = originTS + uint64(td)
			if br.err == nil {
				out.Messages = append(out.Messages, m)
			}
		}
		if br.err != nil {
			r.fail(br.err)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}
