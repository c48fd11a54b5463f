package fsm

import (
	"encoding/binary"
	"errors"
	"math"
)

// errShort is returned when an encoded command or snapshot ends early.
var errShort = errors.New("fsm: truncated encoding")

// enc appends the fixed binary forms used by commands and snapshots.
// The encoding is deterministic: same values, same bytes.
type enc struct{ b []byte }

func (e *enc) u8(v uint8) { e.b = append(e.b, v) }
func (e *enc) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *enc) i16(v int16)    { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *enc) i32(v int32)    { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *enc) i64(v int64)    { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *enc) u64(v uint64)   { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) uvar(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) bytes(v []byte) { e.uvar(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)   { e.uvar(uint64(len(v))); e.b = append(e.b, v...) }

// nullableBytes encodes nil distinctly from empty.
func (e *enc) nullableBytes(v []byte) {
	if v == nil {
		e.uvar(0)
		return
	}
	e.uvar(uint64(len(v)) + 1)
	e.b = append(e.b, v...)
}

// dec reads what enc wrote; the first error sticks and later reads return zeros.
type dec struct {
	b   []byte
	err error
	// size is the length of the whole input (an entry's, in Decode), so
	// that pos can say where the next byte was in it.
	size int
}

// pos is where the next byte to decode lies in the input.
func (d *dec) pos() int { return d.size - len(d.b) }

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}
func (d *dec) bool() bool { return d.u8() != 0 }
func (d *dec) i16() int16 {
	if v := d.take(2); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}
func (d *dec) i32() int32 {
	if v := d.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}
func (d *dec) i64() int64 {
	if v := d.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}
func (d *dec) u64() uint64 { return uint64(d.i64()) }
func (d *dec) uvar() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length and bounds it by what is left, so a corrupt length
// cannot make the caller allocate more than the input could hold.
func (d *dec) count(minElemSize int) int {
	n := d.uvar()
	if minElemSize < 1 {
		minElemSize = 1
	}
	if n > uint64(len(d.b)/minElemSize) || n > math.MaxInt32 {
		if d.err == nil {
			d.err = errShort
		}
		return 0
	}
	return int(n)
}

func (d *dec) bytes() []byte {
	n := d.count(1)
	v := d.take(n)
	if v == nil {
		return []byte{}
	}
	return v
}
func (d *dec) str() string { return string(d.bytes()) }
func (d *dec) nullableBytes() []byte {
	n := d.uvar()
	if n == 0 || d.err != nil {
		return nil
	}
	if n-1 > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	v := d.take(int(n - 1))
	if v == nil {
		return []byte{}
	}
	return v
}
