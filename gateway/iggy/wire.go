package iggy

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// writer appends little-endian fields.
type writer struct{ b []byte }

func (w *writer) u8(v uint8)     { w.b = append(w.b, v) }
func (w *writer) u32(v uint32)   { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *writer) u64(v uint64)   { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *writer) bytes(v []byte) { w.b = append(w.b, v...) }
func (w *writer) zeros(n int)    { w.b = append(w.b, make([]byte, n)...) }
func (w *writer) bool(v bool)    { w.u8(boolByte(v)) }
func (w *writer) str8(v string)  { w.u8(uint8(len(v))); w.b = append(w.b, v...) }
func (w *writer) str32(v string) { w.u32(uint32(len(v))); w.b = append(w.b, v...) }
func boolByte(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

// reader consumes little-endian fields with bounds checks. The first error
// sticks; every getter returns zero values afterwards.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail(fmt.Errorf("%w: need %d bytes at offset %d, have %d", ErrTruncated, n, r.off, len(r.b)-r.off))
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (r *reader) remaining() int { return len(r.b) - r.off }

// wireName reads [len u8 1..255][utf-8].
func (r *reader) wireName() string {
	n := int(r.u8())
	if r.err == nil && n == 0 {
		r.fail(fmt.Errorf("%w: empty name", ErrMalformed))
		return ""
	}
	v := r.take(n)
	if r.err == nil && !utf8.Valid(v) {
		r.fail(fmt.Errorf("%w: name is not UTF-8", ErrMalformed))
	}
	return string(v)
}

// bytes32 reads [len u32][bytes]; the length is checked against the input
// before anything is allocated.
func (r *reader) bytes32() []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(r.remaining()) {
		r.fail(fmt.Errorf("%w: length %d exceeds %d remaining bytes", ErrTruncated, n, r.remaining()))
		return nil
	}
	return r.take(int(n))
}

// done fails unless the input was consumed exactly.
func (r *reader) done() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail(fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b)-r.off))
	}
	return r.err
}

// end finishes a reply decode. Current replies may carry bytes after the
// fields we know: the released 0.11 SDKs ignore them (decode_from), so a
// server may add fields without a protocol bump. Legacy servers are final,
// and their replies must be consumed exactly.
func (r *reader) end(d Dialect) error {
	if d == Current {
		return r.err
	}
	return r.done()
}

func checkName(what, s string) error {
	if len(s) < 1 || len(s) > 255 {
		return fmt.Errorf("%w: %s must be 1..255 bytes, got %d", ErrInvalidArgument, what, len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not UTF-8", ErrInvalidArgument, what)
	}
	return nil
}

// Identifier is a stream/topic/group reference: numeric (kind 1) or string (kind 2).
type Identifier struct {
	Name   string // used when IsName
	ID     uint32
	IsName bool
}

// NumericID returns a numeric identifier (ids are 0-based in both dialects).
func NumericID(id uint32) Identifier { return Identifier{ID: id} }

// NamedID returns a string identifier.
func NamedID(name string) Identifier { return Identifier{Name: name, IsName: true} }

func (id Identifier) encode(w *writer) error {
	if id.IsName {
		if err := checkName("identifier", id.Name); err != nil {
			return err
		}
		w.u8(2)
		w.str8(id.Name)
		return nil
	}
	w.u8(1)
	w.u8(4)
	w.u32(id.ID)
	return nil
}

func (id Identifier) size() int {
	if id.IsName {
		return 2 + len(id.Name)
	}
	return 6
}

// ConsumerKind selects a single consumer (1) or a consumer group (2).
type ConsumerKind uint8

const (
	ConsumerSingle ConsumerKind = 1
	ConsumerGroup  ConsumerKind = 2
)

// Consumer is [kind u8][Identifier].
type Consumer struct {
	Kind ConsumerKind
	ID   Identifier
}

func (c Consumer) encode(w *writer) error {
	if c.Kind != ConsumerSingle && c.Kind != ConsumerGroup {
		return fmt.Errorf("%w: consumer kind %d", ErrInvalidArgument, c.Kind)
	}
	w.u8(uint8(c.Kind))
	return c.ID.encode(w)
}

// PartitionID is an optional partition id ([flag u8][u32]).
type PartitionID struct {
	ID  uint32
	Set bool
}

// Partition returns a set PartitionID.
func Partition(id uint32) PartitionID { return PartitionID{ID: id, Set: true} }

func (p PartitionID) encode(w *writer) {
	w.bool(p.Set)
	if p.Set {
		w.u32(p.ID)
	} else {
		w.u32(0)
	}
}
