package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// An entry on disk is a 64-byte header followed by its data and extensions,
// all little-endian:
//
//	 0 magic       u32
//	 4 crc         u32  CRC-32C of bytes 8..64 of the header and of the body
//	 8 index       u64
//	16 term        u64
//	24 batchFirst  u64  first index of the StoreLogs batch it was written in
//	32 batchLast   u64  last index of that batch: the entry with index == batchLast completes it
//	40 appendedAt  i64  unix nanoseconds (valid when flagAppendedAt is set)
//	48 dataLen     u32
//	52 extLen      u32
//	56 type        u8
//	57 flags       u8
//	58 reserved    6 bytes, zero
//
// The batch bounds let the opener tell an unfinished write (the tail of the
// last batch, never acknowledged) from damage to an entry that a later batch
// was written after (acknowledged, so an error).
const (
	headerSize = 64
	magic      = 0x4c52476b // "kGRL" in the file

	flagAppendedAt = 1 << 0
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the decoded fixed part of an entry.
type header struct {
	crc        uint32
	index      uint64
	term       uint64
	batchFirst uint64
	batchLast  uint64
	appendedAt int64
	dataLen    uint32
	extLen     uint32
	typ        uint8
	flags      uint8
}

func (h *header) size() int64 { return headerSize + int64(h.dataLen) + int64(h.extLen) }

// errNotEntry: the bytes do not start with an entry header.
var errNotEntry = errors.New("no entry header")

func decodeHeader(b []byte) (header, error) {
	if len(b) < headerSize || binary.LittleEndian.Uint32(b[0:]) != magic {
		return header{}, errNotEntry
	}
	return header{
		crc:        binary.LittleEndian.Uint32(b[4:]),
		index:      binary.LittleEndian.Uint64(b[8:]),
		term:       binary.LittleEndian.Uint64(b[16:]),
		batchFirst: binary.LittleEndian.Uint64(b[24:]),
		batchLast:  binary.LittleEndian.Uint64(b[32:]),
		appendedAt: int64(binary.LittleEndian.Uint64(b[40:])),
		dataLen:    binary.LittleEndian.Uint32(b[48:]),
		extLen:     binary.LittleEndian.Uint32(b[52:]),
		typ:        b[56],
		flags:      b[57],
	}, nil
}

// appendHeader appends the header of l, written in the batch first..last,
// to buf; the entry's body (l.Data, then l.Extensions) follows it in the
// file. The checksum covers both, so the body need not be copied next to
// the header to compute it.
func appendHeader(buf []byte, l *raft.Log, first, last uint64) ([]byte, error) {
	if uint64(len(l.Data)) > 1<<32-1 || uint64(len(l.Extensions)) > 1<<32-1 {
		return buf, fmt.Errorf("raft log entry %d too large", l.Index)
	}
	start := len(buf)
	buf = append(buf, make([]byte, headerSize)...)
	h := buf[start:]
	binary.LittleEndian.PutUint32(h[0:], magic)
	binary.LittleEndian.PutUint64(h[8:], l.Index)
	binary.LittleEndian.PutUint64(h[16:], l.Term)
	binary.LittleEndian.PutUint64(h[24:], first)
	binary.LittleEndian.PutUint64(h[32:], last)
	var flags uint8
	if !l.AppendedAt.IsZero() {
		flags |= flagAppendedAt
		binary.LittleEndian.PutUint64(h[40:], uint64(l.AppendedAt.UnixNano()))
	}
	binary.LittleEndian.PutUint32(h[48:], uint32(len(l.Data)))
	binary.LittleEndian.PutUint32(h[52:], uint32(len(l.Extensions)))
	h[56] = uint8(l.Type)
	h[57] = flags
	crc := crc32.Checksum(h[8:headerSize], castagnoli)
	crc = crc32.Update(crc, castagnoli, l.Data)
	crc = crc32.Update(crc, castagnoli, l.Extensions)
	binary.LittleEndian.PutUint32(h[4:], crc)
	return buf, nil
}

// checkEntry verifies the checksum of the whole entry b (header and body).
func checkEntry(h *header, b []byte) bool {
	if int64(len(b)) != h.size() {
		return false
	}
	return crc32.Update(crc32.Checksum(b[8:headerSize], castagnoli), castagnoli, b[headerSize:]) == h.crc
}

// decodeEntry fills l from the verified entry b; l's slices point into b.
func decodeEntry(h *header, b []byte, l *raft.Log) {
	*l = raft.Log{Index: h.index, Term: h.term, Type: raft.LogType(h.typ)}
	body := b[headerSize:]
	if h.dataLen > 0 {
		l.Data = body[:h.dataLen:h.dataLen]
	}
	if h.extLen > 0 {
		l.Extensions = body[h.dataLen:]
	}
	if h.flags&flagAppendedAt != 0 {
		l.AppendedAt = time.Unix(0, h.appendedAt)
	}
}
