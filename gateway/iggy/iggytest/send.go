package iggytest

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

func xxh3Hash(b []byte) uint64 { return xxh3.Hash(b) }

const (
	maxPayload     = 64_000_000
	maxUserHeaders = 100_000
)

// sendMeta is the common SendMessages prefix (§6.1, §13.7):
// [metadata_length u32][stream][topic][Partitioning][messages_count u32].
type sendMeta struct {
	stream, topic ident
	part          partitioning
	count         uint32
}

func readSendMeta(r *breader) sendMeta {
	var m sendMeta
	n := r.u32()
	if r.code == 0 && uint64(n) > uint64(r.remaining()) {
		r.fail(codeInvalidCommand)
	}
	meta := breader{b: r.take(int(n))}
	if r.code != 0 {
		return m
	}
	m.stream = meta.ident()
	m.topic = meta.ident()
	m.part = meta.partitioning()
	m.count = meta.u32()
	if c := meta.end(true); c != 0 {
		r.fail(c)
	}
	return m
}

// sendCurrent handles SendMessages of §6: the batch is validated (layout,
// counts, every message checksum, the batch checksum) before anything is
// stored. Unknown stream / topic / partition is status 20 (§6.4).
func (s *Server) sendCurrent(body []byte) outcome {
	r := breader{b: body}
	meta := readSendMeta(&r)
	if r.code != 0 {
		return denied(r.code)
	}
	if meta.count == 0 {
		return denied(codeInvalidMessagesCount)
	}
	st, t, c := s.data.lookup(meta.stream, meta.topic)
	if c != 0 {
		return denied(codeResourceNotFound)
	}
	hdr := r.take(256)
	if r.code != 0 {
		return denied(r.code)
	}
	originTS := binary.LittleEndian.Uint64(hdr[24:])
	batchLen := binary.LittleEndian.Uint64(hdr[32:])
	batchSum := binary.LittleEndian.Uint64(hdr[40:])
	msgCount := binary.LittleEndian.Uint32(hdr[48:])
	for _, b := range hdr[52:] {
		if b != 0 {
			return denied(codeInvalidCommand) // reserved bytes must be 0
		}
	}
	if batchLen != 256+uint64(r.remaining()) {
		return denied(codeInvalidCommand) // the batch must end with the body
	}
	if msgCount != meta.count {
		return denied(codeInvalidMessagesCount)
	}
	msgs := make([]StoredMessage, 0, min(int(msgCount), r.remaining()/48))
	sums := make([]byte, 0, 44+8*min(int(msgCount), r.remaining()/48))
	sums = append(sums, hdr[:40]...)
	sums = append(sums, hdr[48:52]...)
	for i := uint32(0); i < msgCount; i++ {
		fh := r.take(48)
		if r.code != 0 {
			return denied(r.code)
		}
		hl := binary.LittleEndian.Uint32(fh[32:])
		pl := binary.LittleEndian.Uint32(fh[36:])
		switch {
		case pl == 0:
			return denied(codeEmptyPayload)
		case pl > maxPayload:
			return denied(codeTooBigPayload)
		case hl > maxUserHeaders:
			return denied(codeTooBigUserHeaders)
		}
		payload := r.take(int(pl))
		headers := r.take(int(hl))
		if r.code != 0 {
			return denied(r.code)
		}
		sum := binary.LittleEndian.Uint64(fh[0:])
		h := xxh3.New()
		_, _ = h.Write(fh[8:])
		_, _ = h.Write(payload)
		_, _ = h.Write(headers)
		if h.Sum64() != sum {
			return denied(codeInvalidMessageChecksum)
		}
		sums = append(sums, fh[0:8]...)
		m := StoredMessage{
			OriginTimestamp: originTS + uint64(binary.LittleEndian.Uint32(fh[28:])),
			Payload:         append([]byte(nil), payload...),
			UserHeaders:     append([]byte(nil), headers...),
		}
		copy(m.ID[:], fh[8:24])
		msgs = append(msgs, m)
	}
	if r.remaining() != 0 {
		return denied(codeInvalidCommand)
	}
	if xxh3Hash(sums) != batchSum {
		return denied(codeInvalidBatchChecksum)
	}
	p, ok := s.data.pick(t, meta.part)
	if !ok {
		return denied(codeResourceNotFound)
	}
	base := s.data.appendMsgs(p, msgs)
	w := &bwriter{}
	w.u32(1)
	w.u32(st.id)
	w.u32(t.id)
	w.u32(p.id)
	w.u64(base)
	return okBody(w.b)
}

// sendLegacy handles SendMessages of §13.7: metadata, a 16-byte index
// entry per message, then messages with 64-byte headers. Success is an
// empty reply.
func (s *Server) sendLegacy(body []byte) outcome {
	r := breader{b: body}
	meta := readSendMeta(&r)
	if r.code != 0 {
		return denied(r.code)
	}
	if meta.count == 0 {
		return denied(codeInvalidMessagesCount)
	}
	if uint64(meta.count)*16 > uint64(r.remaining()) {
		return denied(codeInvalidIndexesCount)
	}
	index := r.take(int(meta.count) * 16)
	data := r.rest()
	msgs := make([]StoredMessage, 0, meta.count)
	prev := uint32(0)
	for i := 0; i < int(meta.count); i++ {
		e := index[16*i : 16*i+16]
		if binary.LittleEndian.Uint32(e[0:]) != 0 {
			return denied(codeNonZeroOffset)
		}
		if binary.LittleEndian.Uint64(e[8:]) != 0 {
			return denied(codeNonZeroTimestamp)
		}
		end := binary.LittleEndian.Uint32(e[4:])
		if end <= prev || uint64(end) > uint64(len(data)) {
			return denied(codeInvalidMessagesSize)
		}
		m := data[prev:end]
		prev = end
		if len(m) < 64 {
			return denied(codeTooSmallMessage)
		}
		hl := binary.LittleEndian.Uint32(m[48:])
		pl := binary.LittleEndian.Uint32(m[52:])
		if 64+uint64(pl)+uint64(hl) != uint64(len(m)) {
			return denied(codeInvalidMessagesSize)
		}
		switch {
		case pl > maxPayload:
			return denied(codeTooBigPayload)
		case hl > maxUserHeaders:
			return denied(codeTooBigUserHeaders)
		}
		sm := StoredMessage{
			OriginTimestamp: binary.LittleEndian.Uint64(m[40:]),
			Payload:         append([]byte(nil), m[64:64+pl]...),
			UserHeaders:     append([]byte(nil), m[64+pl:]...),
		}
		copy(sm.ID[:], m[8:24])
		msgs = append(msgs, sm)
	}
	if uint64(prev) != uint64(len(data)) {
		return denied(codeInvalidMessagesSize)
	}
	_, t, c := s.data.lookup(meta.stream, meta.topic)
	if c != 0 {
		return denied(c)
	}
	p, ok := s.data.pick(t, meta.part)
	if !ok {
		if meta.part.kind == 2 {
			return denied(codePartitionNotFound)
		}
		return denied(codeTopicIDNotFound) // §13.3: Balanced on 0 partitions gives 2010
	}
	s.data.appendMsgs(p, msgs)
	return okBody(nil)
}
