package iggytest

import (
	"encoding/binary"
	"unicode/utf8"
)

// Status / result codes the double sends (§10, §13.10).
const (
	codeError                  uint32 = 1
	codeInvalidCommand         uint32 = 3
	codeInvalidFormat          uint32 = 4
	codeDisconnected           uint32 = 8
	codeResourceNotFound       uint32 = 20
	codeUnauthenticated        uint32 = 40
	codeInvalidCredentials     uint32 = 42
	codeInvalidUsername        uint32 = 43
	codeInvalidPassword        uint32 = 44
	codeRequestAlreadyApplied  uint32 = 59
	codeStreamIDNotFound       uint32 = 1009
	codeStreamNameExists       uint32 = 1012
	codeInvalidTopicSize       uint32 = 1019
	codeTooManyStreams         uint32 = 1020
	codeTopicIDNotFound        uint32 = 2010
	codeTopicNameExists        uint32 = 2013
	codeTooManyPartitions      uint32 = 2015
	codeInvalidPartitionsCount uint32 = 2019
	codeTooManyTopics          uint32 = 2021
	codePartitionNotFound      uint32 = 3007
	codeConsumerOffsetNotFound uint32 = 3021
	codeInvalidMessagesCount   uint32 = 4009
	codeTooBigUserHeaders      uint32 = 4017
	codeTooBigPayload          uint32 = 4022
	codeEmptyPayload           uint32 = 4024
	codeInvalidMessageChecksum uint32 = 4027
	codeNonZeroOffset          uint32 = 4031
	codeNonZeroTimestamp       uint32 = 4032
	codeInvalidIndexesCount    uint32 = 4035
	codeInvalidMessagesSize    uint32 = 4036
	codeTooSmallMessage        uint32 = 4037
	codeInvalidBatchChecksum   uint32 = 4039
	codeUnsupportedOptionKey   uint32 = 4041
	codeTransientNotCommitted  uint32 = 57
	codeInvalidOptionValue     uint32 = 4042
	codeOptionsBlockTooLarge   uint32 = 4043
	codeInvalidOffset          uint32 = 4100
	codeConsumerGroupNotFound  uint32 = 5000
	codeConsumerGroupMember    uint32 = 5006
)

// Command codes (both dialects; Current puts them on the wire only for
// non-replicated operations). Kept local so the double does not depend on
// constants still being added to package iggy.
const (
	cPing                 uint32 = 1
	cGetClusterMetadata   uint32 = 12
	cLegacyLoginUser      uint32 = 38
	cLogout               uint32 = 39
	cLoginRegister        uint32 = 40
	cLegacyLoginPAT       uint32 = 44
	cLoginRegisterPAT     uint32 = 45
	cPollMessages         uint32 = 100
	cSendMessages         uint32 = 101
	cGetConsumerOffset    uint32 = 120
	cStoreConsumerOffset  uint32 = 121
	cDeleteConsumerOffset uint32 = 122
	cGetStream            uint32 = 200
	cGetStreams           uint32 = 201
	cCreateStream         uint32 = 202
	cDeleteStream         uint32 = 203
	cGetTopic             uint32 = 300
	cGetTopics            uint32 = 301
	cCreateTopic          uint32 = 302
	cDeleteTopic          uint32 = 303
	cUpdateTopic          uint32 = 304
	cCreatePartitions     uint32 = 402
	cDeletePartitions     uint32 = 403
)

// Current-dialect operation bytes (§2, §5).
const (
	opRegister             uint8 = 1
	opNonReplicated        uint8 = 2
	opLogout               uint8 = 3
	opCreateStream         uint8 = 128
	opDeleteStream         uint8 = 130
	opCreateTopic          uint8 = 132
	opUpdateTopic          uint8 = 133
	opDeleteTopic          uint8 = 134
	opCreatePartitions     uint8 = 136
	opDeletePartitions     uint8 = 137
	opSendMessages         uint8 = 160
	opStoreConsumerOffset  uint8 = 161
	opDeleteConsumerOffset uint8 = 162
)

// opCodes maps every replicated operation of the §5 catalogue to its
// command code (used for Requests() and dispatch).
var opCodes = map[uint8]uint32{
	opLogout:               cLogout,
	opCreateStream:         cCreateStream,
	129:                    204, // UpdateStream (not implemented)
	opDeleteStream:         cDeleteStream,
	131:                    205, // PurgeStream (not implemented)
	opCreateTopic:          cCreateTopic,
	opUpdateTopic:          cUpdateTopic,
	opDeleteTopic:          cDeleteTopic,
	135:                    305, // PurgeTopic (not implemented)
	opCreatePartitions:     cCreatePartitions,
	opDeletePartitions:     cDeletePartitions,
	138:                    503, // DeleteSegments (not implemented)
	139:                    602, // consumer groups, users, PATs: not implemented
	140:                    603,
	141:                    33,
	142:                    35,
	143:                    34,
	144:                    37,
	145:                    36,
	146:                    42,
	147:                    43,
	148:                    604,
	149:                    605,
	opSendMessages:         cSendMessages,
	opStoreConsumerOffset:  cStoreConsumerOffset,
	opDeleteConsumerOffset: cDeleteConsumerOffset,
}

// breader consumes little-endian request fields. The first failure sticks
// as a status code; getters return zero values afterwards, so decoding
// never panics.
type breader struct {
	b    []byte
	off  int
	code uint32
}

func (r *breader) fail(code uint32) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *breader) take(n int) []byte {
	if r.code != 0 {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail(codeInvalidCommand)
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

func (r *breader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *breader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *breader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (r *breader) remaining() int { return len(r.b) - r.off }

// rest returns everything not consumed yet.
func (r *breader) rest() []byte {
	if r.code != 0 {
		return nil
	}
	v := r.b[r.off:]
	r.off = len(r.b)
	return v
}

// end fails with InvalidCommand on trailing bytes when strict (Current
// bodies); the legacy server ignores trailing bytes (§13.1).
func (r *breader) end(strict bool) uint32 {
	if strict && r.code == 0 && r.off != len(r.b) {
		r.fail(codeInvalidCommand)
	}
	return r.code
}

// wireName reads [len u8][utf-8]: an empty name is a validation failure
// (4), bad UTF-8 a decoding failure (3).
func (r *breader) wireName() string {
	n := int(r.u8())
	if r.code == 0 && n == 0 {
		r.fail(codeInvalidFormat)
		return ""
	}
	v := r.take(n)
	if r.code == 0 && !utf8.Valid(v) {
		r.fail(codeInvalidCommand)
		return ""
	}
	return string(v)
}

// ident is a decoded Identifier (§4).
type ident struct {
	id     uint32
	name   string
	isName bool
}

func (r *breader) ident() ident {
	kind := r.u8()
	n := int(r.u8())
	if r.code != 0 {
		return ident{}
	}
	switch kind {
	case 1:
		if n != 4 {
			r.fail(codeInvalidCommand)
			return ident{}
		}
		return ident{id: r.u32()}
	case 2:
		if n == 0 {
			r.fail(codeInvalidFormat)
			return ident{}
		}
		v := r.take(n)
		if r.code == 0 && !utf8.Valid(v) {
			r.fail(codeInvalidCommand)
		}
		return ident{name: string(v), isName: true}
	}
	r.fail(codeInvalidCommand)
	return ident{}
}

// consumer is a decoded Consumer: kind 1 (single) or 2 (group).
type consumer struct {
	kind uint8
	id   ident
}

// key is the consumer-offset key. The server hashes string ids with
// XXH32 into the numeric key space; so does the double.
func (c consumer) key() uint32 {
	if c.id.isName {
		return xxh32([]byte(c.id.name), 0)
	}
	return c.id.id
}

func (r *breader) consumer() consumer {
	k := r.u8()
	if r.code == 0 && k != 1 && k != 2 {
		r.fail(codeInvalidCommand)
	}
	return consumer{kind: k, id: r.ident()}
}

// optPartition reads [flag u8][u32].
func (r *breader) optPartition() (id uint32, set bool) {
	flag := r.u8()
	v := r.u32()
	if r.code == 0 && flag > 1 {
		r.fail(codeInvalidCommand)
	}
	return v, flag == 1
}

// partitioning is a decoded Partitioning (§4).
type partitioning struct {
	kind uint8
	id   uint32
	key  []byte
}

func (r *breader) partitioning() partitioning {
	var p partitioning
	p.kind = r.u8()
	n := int(r.u8())
	if r.code != 0 {
		return p
	}
	switch {
	case p.kind == 1 && n == 0:
	case p.kind == 2 && n == 4:
		p.id = r.u32()
	case p.kind == 3 && n >= 1:
		p.key = r.take(n)
	default:
		r.fail(codeInvalidCommand)
	}
	return p
}

// bwriter appends little-endian fields.
type bwriter struct{ b []byte }

func (w *bwriter) u8(v uint8)     { w.b = append(w.b, v) }
func (w *bwriter) u32(v uint32)   { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *bwriter) u64(v uint64)   { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *bwriter) bytes(v []byte) { w.b = append(w.b, v...) }
func (w *bwriter) zeros(n int)    { w.b = append(w.b, make([]byte, n)...) }
func (w *bwriter) name(s string)  { w.u8(uint8(len(s))); w.b = append(w.b, s...) }

// xxh32 is XXH32 (the server's hash for string consumer ids and messages
// keys, §4).
func xxh32(b []byte, seed uint32) uint32 {
	const (
		p1 uint32 = 0x9E3779B1
		p2 uint32 = 0x85EBCA77
		p3 uint32 = 0xC2B2AE3D
		p4 uint32 = 0x27D4EB2F
		p5 uint32 = 0x165667B1
	)
	rotl := func(x uint32, r uint) uint32 { return x<<r | x>>(32-r) }
	n := len(b)
	var h uint32
	if n >= 16 {
		v1, v2, v3, v4 := seed+p1+p2, seed+p2, seed, seed-p1
		for len(b) >= 16 {
			v1 = rotl(v1+binary.LittleEndian.Uint32(b[0:])*p2, 13) * p1
			v2 = rotl(v2+binary.LittleEndian.Uint32(b[4:])*p2, 13) * p1
			v3 = rotl(v3+binary.LittleEndian.Uint32(b[8:])*p2, 13) * p1
			v4 = rotl(v4+binary.LittleEndian.Uint32(b[12:])*p2, 13) * p1
			b = b[16:]
		}
		h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)
	} else {
		h = seed + p5
	}
	h += uint32(n)
	for len(b) >= 4 {
		h = rotl(h+binary.LittleEndian.Uint32(b)*p3, 17) * p4
		b = b[4:]
	}
	for _, c := range b {
		h = rotl(h+uint32(c)*p5, 11) * p1
	}
	h ^= h >> 15
	h *= p2
	h ^= h >> 13
	h *= p3
	h ^= h >> 16
	return h
}
