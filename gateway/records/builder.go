package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
) // Builder makes valid batches, for tests and tools. Fields are written as
// given: a non-idempotent producer sets ProducerID, ProducerEpoch and
// BaseSequence to -1.
type Builder struct {
	Codec         Codec
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// BaseTimestamp is used for records whose Timestamp is 0.
	BaseTimestamp int64
	Transactional bool
	// Control marks a control batch (transaction markers); the caller
	// supplies properly encoded control records.
	Control bool
}

// Build encodes recs as one batch with BaseOffset 0 and offset deltas
// 0..n-1 (Record.Offset is ignored). FirstTimestamp is the first record's
// timestamp and MaxTimestamp the largest; the CRC is computed.
func (bld Builder) Build(recs []Record) ([]byte, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: a batch needs at least one record", ErrInvalidRecord)
	}
	if len(recs) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d records", ErrInvalidRecord, len(recs))
	}
	if bld.Codec < None || bld.Codec > Zstd {
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, bld.Codec)
	}
	ts := func(r *Record) int64 {
		if r.Timestamp == 0 {
			return bld.BaseTimestamp
		}
		return r.Timestamp
	}
	first := ts(&recs[0])
	maxTS := first
	var raw, body []byte
	for i := range recs {
		r := &recs[i]
		t := ts(r)
		maxTS = max(maxTS, t)
		body = append(body[:0], byte(r.Attributes))
		body = binary.AppendVarint(body, t-first)
		body = binary.AppendVarint(body, int64(i))
		body = appendBytesField(body, r.Key)
		body = appendBytesField(body, r.Value)
		body = binary.AppendVarint(body, int64(len(r.Headers)))
		for _, h := range r.Headers {
			body = binary.AppendVarint(body, int64(len(h.Key)))
			body = append(body, h.Key...)
			body = appendBytesField(body, h.Value)
		}
		if len(body) > math.MaxInt32 {
			return nil, fmt.Errorf("%w: record %d is %d bytes", ErrInvalidRecord, i, len(body))
		}
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	payload, err := compress(bld.Codec, raw)
	if err != nil {
		return nil, err
	}
	if len(payload) > math.MaxInt32-minLength {
		return nil, fmt.Errorf("%w: batch of %d bytes", ErrInvalidRecord, len(payload))
	}

	attrs := int16(bld.Codec)
	if bld.Transactional {
		attrs |= attrTransactional
	}
	if bld.Control {
		attrs |= attrControl
	}
	be := binary.BigEndian
	b := make([]byte, HeaderSize, HeaderSize+len(payload))
	be.PutUint64(b[0:], 0)                              // BaseOffset
	be.PutUint32(b[8:], uint32(minLength+len(payload))) // Length
	be.PutUint32(b[12:], math.MaxUint32)                // PartitionLeaderEpoch -1, as clients send
	b[16] = 2                                           // Magic
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(len(recs)-1)) // LastOffsetDelta
	be.PutUint64(b[27:], uint64(first))       // FirstTimestamp
	be.PutUint64(b[35:], uint64(maxTS))       // MaxTimestamp
	be.PutUint64(b[43:], uint64(bld.ProducerID))
	be.PutUint16(b[51:], uint16(bld.ProducerEpoch))
	be.PutUint32(b[53:], uint32(bld.BaseSequence))
	be.PutUint32(b[57:], uint32(len(recs))) // NumRecords
	b = append(b, payload...)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttrs:], castagnoli))
	return b, nil
}

// appendBytesField appends a varint length (-1 for nil) and the bytes.
func appendBytesField(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}
