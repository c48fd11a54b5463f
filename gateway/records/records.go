// Package records encodes, decodes and validates Kafka record batches
// (magic v2), the format of the "records" field of Produce and Fetch.
package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
)

// Sentinel errors; callers map them to Kafka error codes. Every error
// returned by this package wraps exactly one of them.
var (
	// ErrCorrupt: bad CRC, inconsistent lengths, truncated or undecodable
	// data (CORRUPT_MESSAGE, 2).
	ErrCorrupt = errors.New("records: corrupt record batch")
	// ErrInvalidRecord: well-framed but invalid content, e.g. wrong magic,
	// count mismatch or bad record framing (INVALID_RECORD, 87).
	ErrInvalidRecord = errors.New("records: invalid record")
	// ErrUnsupportedCompression: codec 5..7 (UNSUPPORTED_COMPRESSION_TYPE, 76).
	ErrUnsupportedCompression = errors.New("records: unsupported compression type")
	// ErrTooLarge: decompressed size exceeds the caller's limit
	// (MESSAGE_TOO_LARGE, 10).
	ErrTooLarge = errors.New("records: decompressed records too large")
)

// Codec is the compression codec in the low 3 bits of the batch attributes.
type Codec int8

// Codecs defined by Kafka.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return "codec(" + strconv.Itoa(int(c)) + ")"
}

// Attribute bits of a batch.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// HeaderSize is the size of the fixed prefix of a magic-2 batch.
const HeaderSize = 61

// Byte offsets inside the batch header.
const (
	offLength   = 8
	offMagic    = 16
	offCRC      = 17
	offAttrs    = 21 // the CRC covers everything from here to the end
	batchPrefix = 12 // BaseOffset + Length: the bytes Length does not count
	minLength   = HeaderSize - batchPrefix
)

// Header is the fixed 61-byte prefix of a magic-2 record batch.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength: bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32

	// MinRecordTimestamp and MaxRecordTimestamp bound the records' own
	// timestamps, those without one (-1) left out; -1 when no record has
	// one. Validate and Records set them from the records, not the header.
	MinRecordTimestamp, MaxRecordTimestamp int64
}

// NoTimestamp is a record's timestamp when it has none.
const NoTimestamp = -1

// Compression returns the batch codec.
func (h Header) Compression() Codec { return Codec(h.Attributes & attrCodecMask) }

// Transactional reports whether the batch is part of a transaction.
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds control records (txn markers).
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// LogAppendTime reports whether timestamps are broker append times; then
// MaxTimestamp is every record's timestamp.
func (h Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Size is the whole batch size in bytes.
func (h Header) Size() int { return batchPrefix + int(h.Length) }

// ParseHeader decodes the header at the start of b. It checks neither the
// CRC nor any field's value.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: batch header needs %d bytes, have %d", ErrCorrupt, HeaderSize, len(b))
	}
	be := binary.BigEndian
	return Header{
		BaseOffset:           int64(be.Uint64(b[0:])),
		Length:               int32(be.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[12:])),
		Magic:                int8(b[16]),
		CRC:                  be.Uint32(b[17:]),
		Attributes:           int16(be.Uint16(b[21:])),
		LastOffsetDelta:      int32(be.Uint32(b[23:])),
		FirstTimestamp:       int64(be.Uint64(b[27:])),
		MaxTimestamp:         int64(be.Uint64(b[35:])),
		ProducerID:           int64(be.Uint64(b[43:])),
		ProducerEpoch:        int16(be.Uint16(b[51:])),
		BaseSequence:         int32(be.Uint32(b[53:])),
		NumRecords:           int32(be.Uint32(b[57:])),
	}, nil
}

// SetBaseOffset rewrites the base offset of the batch starting at b[0].
// The base offset is outside the CRC, so the batch stays valid.
// b must hold at least 8 bytes.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[:8], uint64(offset))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkBatch checks the framing, magic, CRC and header fields of the batch
// at the start of b, returning the header and the (possibly compressed)
// records payload. Bytes after the batch are ignored.
func checkBatch(b []byte) (Header, []byte, error) {
	if len(b) < offMagic+1 {
		return Header{}, nil, fmt.Errorf("%w: truncated batch header (%d bytes)", ErrCorrupt, len(b))
	}
	// Magic first: older formats lay out the rest differently.
	if m := int8(b[offMagic]); m != 2 {
		return Header{}, nil, fmt.Errorf("%w: magic %d, only magic 2 is supported", ErrInvalidRecord, m)
	}
	length := int32(binary.BigEndian.Uint32(b[offLength:]))
	if length < minLength {
		return Header{}, nil, fmt.Errorf("%w: batch length %d below minimum %d", ErrCorrupt, length, minLength)
	}
	// int64 so a huge length cannot overflow on 32-bit platforms.
	if int64(length)+batchPrefix > int64(len(b)) {
		return Header{}, nil, fmt.Errorf("%w: batch length %d exceeds the %d bytes available", ErrCorrupt, length, len(b)-batchPrefix)
	}
	b = b[:batchPrefix+int(length)]
	h, _ := ParseHeader(b) // length >= minLength, so b holds a header
	if got := crc32.Checksum(b[offAttrs:], castagnoli); got != h.CRC {
		return h, nil, fmt.Errorf("%w: CRC mismatch: header %#08x, computed %#08x", ErrCorrupt, h.CRC, got)
	}
	if c := h.Compression(); c > Zstd {
		return h, nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, c)
	}
	if h.NumRecords < 1 {
		return h, nil, fmt.Errorf("%w: record count %d", ErrInvalidRecord, h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return h, nil, fmt.Errorf("%w: last offset delta %d inconsistent with record count %d", ErrInvalidRecord, h.LastOffsetDelta, h.NumRecords)
	}
	// As the broker does: an idempotent batch must carry a sequence.
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return h, nil, fmt.Errorf("%w: producer id %d with base sequence %d", ErrInvalidRecord, h.ProducerID, h.BaseSequence)
	}
	return h, b[HeaderSize:], nil
}

// scratch buffers for decompression in Validate, whose output is dropped.
var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledScratch bounds what we keep pooled, so one huge batch does not
// pin its buffer forever.
const maxPooledScratch = 64 << 20

// Validate checks a produce "records" field (one or more concatenated
// batches) as a broker does and returns each batch's header in order.
// Decompressed data across all batches may total at most maxUncompressed
// bytes; more fails with ErrTooLarge before it is allocated.
func Validate(data []byte, maxUncompressed int) ([]Header, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: no record batches", ErrInvalidRecord)
	}
	budget := max(maxUncompressed, 0)
	var (
		headers []Header
		scratch *[]byte
	)
	defer func() {
		if scratch != nil && cap(*scratch) <= maxPooledScratch {
			scratchPool.Put(scratch)
		}
	}()
	for off, i := 0, 0; off < len(data); i++ {
		h, payload, err := checkBatch(data[off:])
		if err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", i, off, err)
		}
		if c := h.Compression(); c != None {
			if scratch == nil {
				scratch = scratchPool.Get().(*[]byte)
			}
			out, err := decompress(c, payload, (*scratch)[:0], budget)
			if cap(out) > cap(*scratch) {
				*scratch = out
			}
			if err != nil {
				return nil, fmt.Errorf("batch %d at byte %d: %w", i, off, err)
			}
			budget -= len(out)
			payload = out
		}
		if err := parseRecords(payload, &h, nil); err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", i, off, err)
		}
		if headers == nil {
			// Usually one batch per partition.
			headers = make([]Header, 0, 1)
		}
		headers = append(headers, h)
		off += h.Size()
	}
	return headers, nil
}

// RecordHeader is one record header; a nil Value is null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one decoded record; a nil Key or Value is null.
type Record struct {
	Offset     int64
	Timestamp  int64
	Key, Value []byte
	Headers    []RecordHeader
	Attributes int8
}

// Records checks and decodes the batch starting at b (bytes after it are
// ignored), decompressing at most maxUncompressed bytes. Key and Value
// slices alias b, or for compressed batches a fresh buffer.
func Records(b []byte, maxUncompressed int) (Header, []Record, error) {
	h, payload, err := checkBatch(b)
	if err != nil {
		return h, nil, err
	}
	if c := h.Compression(); c != None {
		// A fresh buffer: the records alias it.
		payload, err = decompress(c, payload, nil, max(maxUncompressed, 0))
		if err != nil {
			return h, nil, err
		}
	}
	// A record takes at least 7 bytes; bound the count by the payload so a
	// lying NumRecords cannot force a huge allocation.
	recs := make([]Record, 0, min(int(h.NumRecords), len(payload)/7))
	if err := parseRecords(payload, &h, &recs); err != nil {
		return h, nil, err
	}
	return h, recs, nil
}

// parseRecords checks that p holds exactly h.NumRecords well-formed records
// with offset deltas 0..n-1, appending them to out when out is non-nil.
func parseRecords(p []byte, h *Header, out *[]Record) error {
	h.MinRecordTimestamp, h.MaxRecordTimestamp = NoTimestamp, NoTimestamp
	i := 0
	for idx := int32(0); idx < h.NumRecords; idx++ {
		if i >= len(p) {
			return fmt.Errorf("%w: batch declares %d records, holds %d", ErrInvalidRecord, h.NumRecords, idx)
		}
		length, n := varint(p, i)
		if n < 0 || length < 0 || int64(len(p)-n) < length {
			return badRecord(idx, "length")
		}
		r := p[n : n+int(length)]
		i = n + int(length)

		if len(r) < 1 {
			return badRecord(idx, "attributes")
		}
		attrs := int8(r[0])
		tsDelta, j := varlong(r, 1)
		if j < 0 {
			return badRecord(idx, "timestamp delta")
		}
		offDelta, j := varint(r, j)
		if j < 0 {
			return badRecord(idx, "offset delta")
		}
		if offDelta != int64(idx) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, idx, offDelta)
		}
		key, j := bytesField(r, j)
		if j < 0 {
			return badRecord(idx, "key")
		}
		value, j := bytesField(r, j)
		if j < 0 {
			return badRecord(idx, "value")
		}
		nh, j := varint(r, j)
		// Each header takes at least 2 bytes; the bound also caps the
		// allocation below.
		if j < 0 || nh < 0 || nh > int64(len(r)-j)/2 {
			return badRecord(idx, "header count")
		}
		var hdrs []RecordHeader
		if out != nil && nh > 0 {
			hdrs = make([]RecordHeader, 0, nh)
		}
		for k := int64(0); k < nh; k++ {
			var hk, hv []byte
			hk, j = bytesField(r, j)
			if j < 0 || hk == nil { // header keys cannot be null
				return badRecord(idx, "header key")
			}
			hv, j = bytesField(r, j)
			if j < 0 {
				return badRecord(idx, "header value")
			}
			if out != nil {
				hdrs = append(hdrs, RecordHeader{Key: string(hk), Value: hv})
			}
		}
		if j != len(r) {
			return fmt.Errorf("%w: record %d: %d bytes after the headers", ErrInvalidRecord, idx, len(r)-j)
		}
		ts := h.FirstTimestamp + tsDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		if ts != NoTimestamp {
			if h.MinRecordTimestamp == NoTimestamp || ts < h.MinRecordTimestamp {
				h.MinRecordTimestamp = ts
			}
			if h.MaxRecordTimestamp == NoTimestamp || ts > h.MaxRecordTimestamp {
				h.MaxRecordTimestamp = ts
			}
		}
		if out != nil {
			*out = append(*out, Record{
				Offset:     h.BaseOffset + int64(idx),
				Timestamp:  ts,
				Key:        key,
				Value:      value,
				Headers:    hdrs,
				Attributes: attrs,
			})
		}
	}
	if i != len(p) {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrInvalidRecord, len(p)-i, h.NumRecords)
	}
	return nil
}

func badRecord(idx int32, field string) error {
	return fmt.Errorf("%w: record %d: malformed %s", ErrInvalidRecord, idx, field)
}

// varint decodes a zigzag varint that must fit in an int32 (Kafka allows
// at most 5 bytes). It returns the index after it, or -1.
func varint(b []byte, i int) (int64, int) {
	if i < len(b) && b[i] < 0x80 { // fast path: one byte
		x := uint32(b[i])
		return int64(int32(x>>1) ^ -int32(x&1)), i + 1
	}
	var x uint32
	for s := uint(0); s < 35; s += 7 {
		if i >= len(b) {
			return 0, -1
		}
		c := b[i]
		i++
		if s == 28 && c > 0x0f {
			return 0, -1 // more than 32 bits
		}
		x |= uint32(c&0x7f) << s
		if c < 0x80 {
			return int64(int32(x>>1) ^ -int32(x&1)), i
		}
	}
	return 0, -1
}

// varlong decodes a zigzag varint of at most 10 bytes (an int64).
func varlong(b []byte, i int) (int64, int) {
	if i < len(b) && b[i] < 0x80 {
		x := uint64(b[i])
		return int64(x>>1) ^ -int64(x&1), i + 1
	}
	var x uint64
	for s := uint(0); s < 70; s += 7 {
		if i >= len(b) {
			return 0, -1
		}
		c := b[i]
		i++
		if s == 63 && c > 1 {
			return 0, -1 // more than 64 bits
		}
		x |= uint64(c&0x7f) << s
		if c < 0x80 {
			return int64(x>>1) ^ -int64(x&1), i
		}
	}
	return 0, -1
}

// bytesField decodes a varint length (-1 = null) and that many bytes. An
// empty field is a non-nil empty slice so it stays distinct from null.
func bytesField(b []byte, i int) ([]byte, int) {
	n, i := varint(b, i)
	switch {
	case i < 0 || n < -1:
		return nil, -1
	case n == -1:
		return nil, i
	case int64(len(b)-i) < n:
		return nil, -1
	}
	end := i + int(n)
	return b[i:end:end], end
}
