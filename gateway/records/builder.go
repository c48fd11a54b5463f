package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Builder makes valid batches, for tests and tools. Fields are written as
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
	return bld.AppendBuild(nil, recs)
}

// AppendBuild is Build appending the batch to dst, in place when dst has
// the room (a reused buffer is neither allocated nor zeroed again). The
// batch is the returned slice's bytes from len(dst) on.
func (bld Builder) AppendBuild(dst []byte, recs []Record) ([]byte, error) {
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
	// Sizes first, so the records are written once into a buffer of the
	// right size (into the batch itself when uncompressed).
	rawLen := 0
	for i := range recs {
		r := &recs[i]
		n := recordBodyLen(r, ts(r)-first, i)
		if n > math.MaxInt32 {
			return nil, fmt.Errorf("%w: record %d is %d bytes", ErrInvalidRecord, i, n)
		}
		rawLen += varintLen(int64(n)) + n
	}
	start := len(dst)
	var out []byte
	if bld.Codec == None {
		out = grow(dst, HeaderSize+rawLen, len(dst)+HeaderSize+rawLen)[:start+HeaderSize]
	} else {
		out = make([]byte, 0, rawLen)
	}
	for i := range recs {
		r := &recs[i]
		t := ts(r)
		maxTS = max(maxTS, t)
		out = binary.AppendVarint(out, int64(recordBodyLen(r, t-first, i)))
		out = append(out, byte(r.Attributes))
		out = binary.AppendVarint(out, t-first)
		out = binary.AppendVarint(out, int64(i))
		out = appendBytesField(out, r.Key)
		out = appendBytesField(out, r.Value)
		out = binary.AppendVarint(out, int64(len(r.Headers)))
		for _, h := range r.Headers {
			out = binary.AppendVarint(out, int64(len(h.Key)))
			out = append(out, h.Key...)
			out = appendBytesField(out, h.Value)
		}
	}
	all := out
	if bld.Codec != None {
		payload, err := compress(bld.Codec, out)
		if err != nil {
			return nil, err
		}
		all = append(grow(dst, HeaderSize+len(payload), len(dst)+HeaderSize+len(payload))[:start+HeaderSize], payload...)
	}
	b := all[start:]
	payloadLen := len(b) - HeaderSize
	if payloadLen > math.MaxInt32-minLength {
		return nil, fmt.Errorf("%w: batch of %d bytes", ErrInvalidRecord, payloadLen)
	}

	attrs := int16(bld.Codec)
	if bld.Transactional {
		attrs |= attrTransactional
	}
	if bld.Control {
		attrs |= attrControl
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)                            // BaseOffset
	be.PutUint32(b[8:], uint32(minLength+payloadLen)) // Length
	be.PutUint32(b[12:], math.MaxUint32)              // PartitionLeaderEpoch -1, as clients send
	b[16] = 2                                         // Magic
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(len(recs)-1)) // LastOffsetDelta
	be.PutUint64(b[27:], uint64(first))       // FirstTimestamp
	be.PutUint64(b[35:], uint64(maxTS))       // MaxTimestamp
	be.PutUint64(b[43:], uint64(bld.ProducerID))
	be.PutUint16(b[51:], uint16(bld.ProducerEpoch))
	be.PutUint32(b[53:], uint32(bld.BaseSequence))
	be.PutUint32(b[57:], uint32(len(recs))) // NumRecords
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttrs:], castagnoli))
	return all, nil
}

// EncodedSize is the size record i takes in a batch, its length prefix
// included, as Build writes it when the record's timestamp is td after the
// batch's first.
func EncodedSize(r *Record, td int64, i int) int {
	n := recordBodyLen(r, td, i)
	return varintLen(int64(n)) + n
}

// recordBodyLen is the encoded size of record i, without its length
// prefix, with timestamp delta td.
func recordBodyLen(r *Record, td int64, i int) int {
	n := 1 + varintLen(td) + varintLen(int64(i)) + bytesFieldLen(r.Key) + bytesFieldLen(r.Value) +
		varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesFieldLen(h.Value)
	}
	return n
}

func bytesFieldLen(v []byte) int {
	if v == nil {
		return 1
	}
	return varintLen(int64(len(v))) + len(v)
}

// varintLen is the length of x as a zigzag varint.
func varintLen(x int64) int {
	ux := uint64(x<<1) ^ uint64(x>>63)
	n := 1
	for ux >= 0x80 {
		ux >>= 7
		n++
	}
	return n
}

// appendBytesField appends a varint length (-1 for nil) and the bytes.
func appendBytesField(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}
