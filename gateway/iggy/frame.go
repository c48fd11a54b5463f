package iggy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Dialect selects the wire protocol.
type Dialect uint8

const (
	// Current is the 256-byte-header protocol of server 0.9.x (protocol 0.11.0, §1).
	Current Dialect = iota + 1
	// Legacy is the length-prefixed protocol of server 0.7.x–0.8.x (§13).
	Legacy
)

func (d Dialect) String() string {
	switch d {
	case Current:
		return "current"
	case Legacy:
		return "legacy"
	}
	return fmt.Sprintf("Dialect(%d)", uint8(d))
}

func (d Dialect) valid() error {
	if d != Current && d != Legacy {
		return fmt.Errorf("%w: unknown dialect %d", ErrInvalidArgument, uint8(d))
	}
	return nil
}

const (
	// HeaderSize is the current dialect's fixed frame header.
	HeaderSize = 256
	// MaxFrameSize bounds current-dialect frames (header included, §1).
	MaxFrameSize = 64 << 20
	// LegacyHeaderSize is the legacy request/reply prefix.
	LegacyHeaderSize = 8
	// LegacyMaxPayload is the legacy server's cap on non-SendMessages
	// payloads (§13.1). Replies are bounded with MaxFrameSize.
	LegacyMaxPayload = 10 << 20
	// ProtocolVersion is the packed protocol version 0.11.0 sent at login.
	ProtocolVersion uint32 = 0x00002C00
)

// Frame kinds (byte 60 of a current-dialect header).
const (
	FrameRequest  uint8 = 5
	FrameReply    uint8 = 8
	FrameEviction uint8 = 13
)

// Operation bytes of the current dialect (§2, §5).
const (
	OpRegister             uint8 = 1
	OpNonReplicated        uint8 = 2
	OpLogout               uint8 = 3
	OpCreateStream         uint8 = 128
	OpDeleteStream         uint8 = 130
	OpCreateTopic          uint8 = 132
	OpUpdateTopic          uint8 = 133
	OpDeleteTopic          uint8 = 134
	OpCreatePartitions     uint8 = 136
	OpSendMessages         uint8 = 160
	OpStoreConsumerOffset  uint8 = 161
	OpDeleteConsumerOffset uint8 = 162
)

// Command codes shared by both dialects (the legacy dialect sends them on the
// wire; the current one only for non-replicated operations).
const (
	CodePing                 uint32 = 1
	CodeLegacyLoginUser      uint32 = 38
	CodeLogout               uint32 = 39
	CodeLoginRegister        uint32 = 40
	CodeLegacyLoginPAT       uint32 = 44
	CodeLoginRegisterPAT     uint32 = 45
	CodePollMessages         uint32 = 100
	CodeSendMessages         uint32 = 101
	CodeGetConsumerOffset    uint32 = 120
	CodeStoreConsumerOffset  uint32 = 121
	CodeDeleteConsumerOffset uint32 = 122
	CodeGetStream            uint32 = 200
	CodeGetStreams           uint32 = 201
	CodeCreateStream         uint32 = 202
	CodeDeleteStream         uint32 = 203
	CodeGetTopic             uint32 = 300
	CodeGetTopics            uint32 = 301
	CodeCreateTopic          uint32 = 302
	CodeDeleteTopic          uint32 = 303
	CodeUpdateTopic          uint32 = 304
	CodeCreatePartitions     uint32 = 402
)

// RequestHeader holds the fields a client sets in a current-dialect request
// header (§1.1). Every other header byte is zero.
type RequestHeader struct {
	Client    [16]byte // random non-zero per connection/login, low 8 bytes first
	Request   uint64
	Operation uint8
	Session   uint64
	Code      uint32 // bytes 196..200: only for OpNonReplicated, else 0
}

// EncodeRequest builds a current-dialect request frame: header + body.
func EncodeRequest(h RequestHeader, body []byte) ([]byte, error) {
	f, err := encodeRequestHeader(h, len(body))
	if err != nil {
		return nil, err
	}
	return append(f, body...), nil
}

// encodeRequestHeader is the header of a current-dialect request frame
// whose body of bodyLen bytes follows it on the wire.
func encodeRequestHeader(h RequestHeader, bodyLen int) ([]byte, error) {
	if bodyLen > MaxFrameSize-HeaderSize {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrFrameTooLarge, bodyLen)
	}
	if h.Operation == 0 {
		return nil, fmt.Errorf("%w: operation 0", ErrInvalidArgument)
	}
	if h.Client == ([16]byte{}) {
		return nil, fmt.Errorf("%w: client id 0", ErrInvalidArgument)
	}
	f := make([]byte, HeaderSize, HeaderSize+min(bodyLen, 4096))
	binary.LittleEndian.PutUint32(f[48:], uint32(HeaderSize+bodyLen))
	f[60] = FrameRequest
	copy(f[128:144], h.Client[:])
	binary.LittleEndian.PutUint64(f[168:], h.Request)
	f[176] = h.Operation
	binary.LittleEndian.PutUint64(f[184:], h.Session)
	if h.Operation == OpNonReplicated {
		binary.LittleEndian.PutUint32(f[196:], h.Code)
	}
	return f, nil
}

// EncodeLegacyRequest builds a legacy request frame: [length][code][payload].
func EncodeLegacyRequest(code uint32, payload []byte) ([]byte, error) {
	f, err := encodeLegacyHeader(code, len(payload))
	if err != nil {
		return nil, err
	}
	return append(f, payload...), nil
}

// encodeLegacyHeader is the [length][code] a legacy payload of payloadLen
// bytes follows.
func encodeLegacyHeader(code uint32, payloadLen int) ([]byte, error) {
	if code != CodeSendMessages && payloadLen > LegacyMaxPayload {
		return nil, fmt.Errorf("%w: payload of %d bytes", ErrFrameTooLarge, payloadLen)
	}
	if uint64(payloadLen)+4 > 0xFFFFFFFF {
		return nil, fmt.Errorf("%w: payload of %d bytes", ErrFrameTooLarge, payloadLen)
	}
	f := make([]byte, 8, 8+min(payloadLen, 4096))
	binary.LittleEndian.PutUint32(f[0:], uint32(4+payloadLen))
	binary.LittleEndian.PutUint32(f[4:], code)
	return f, nil
}

// Eviction is the payload of a current-dialect eviction frame (§1.3).
type Eviction struct {
	Client                   [16]byte
	ServerProtocolVersion    uint32
	ServerProtocolVersionMin uint32
	Reason                   EvictionReason
}

// Reply is a decoded reply of either dialect. For Legacy only Status and
// Body are set.
type Reply struct {
	Kind      uint8 // FrameReply or FrameEviction (current); FrameReply for legacy
	Client    [16]byte
	Op        uint64 // the server copies the session here
	Commit    uint64
	Request   uint64
	Operation uint8
	Status    uint32
	Body      []byte    // aliases the input
	Eviction  *Eviction // set when Kind == FrameEviction
}

// Err returns the error the reply carries: an *EvictionError, an *Error
// for a non-zero status, or nil.
func (r *Reply) Err() error {
	if r.Eviction != nil {
		return &EvictionError{Eviction: *r.Eviction}
	}
	return CodeError(r.Status)
}

// DecodeReplyHeader parses the fixed header of a reply (256 bytes for
// Current, 8 for Legacy) and returns the reply without body and the body
// length that follows. The body length is validated against the dialect's
// bounds, so a caller may read exactly that many bytes.
func DecodeReplyHeader(d Dialect, hdr []byte) (*Reply, int, error) {
	switch d {
	case Current:
		if len(hdr) < HeaderSize {
			return nil, 0, fmt.Errorf("%w: reply header of %d bytes", ErrTruncated, len(hdr))
		}
		if len(hdr) > HeaderSize {
			return nil, 0, fmt.Errorf("%w: reply header of %d bytes", ErrMalformed, len(hdr))
		}
		size := binary.LittleEndian.Uint32(hdr[48:])
		if size < HeaderSize || size > MaxFrameSize {
			return nil, 0, fmt.Errorf("%w: frame size %d", ErrFrameTooLarge, size)
		}
		r := &Reply{Kind: hdr[60]}
		switch r.Kind {
		case FrameReply:
			copy(r.Client[:], hdr[160:176])
			r.Op = binary.LittleEndian.Uint64(hdr[176:])
			r.Commit = binary.LittleEndian.Uint64(hdr[184:])
			r.Request = binary.LittleEndian.Uint64(hdr[200:])
			r.Operation = hdr[208]
			r.Status = binary.LittleEndian.Uint32(hdr[216:])
		case FrameEviction:
			if size != HeaderSize {
				return nil, 0, fmt.Errorf("%w: eviction with a %d-byte body", ErrMalformed, size-HeaderSize)
			}
			ev := &Eviction{
				ServerProtocolVersion:    binary.LittleEndian.Uint32(hdr[144:]),
				ServerProtocolVersionMin: binary.LittleEndian.Uint32(hdr[148:]),
				Reason:                   EvictionReason(hdr[255]),
			}
			copy(ev.Client[:], hdr[128:144])
			r.Client = ev.Client
			r.Eviction = ev
		default:
			return nil, 0, fmt.Errorf("%w: frame command %d", ErrMalformed, r.Kind)
		}
		body := int(size) - HeaderSize
		if r.Kind == FrameReply && r.Status != 0 && body != 0 {
			return nil, 0, fmt.Errorf("%w: error status %d with a %d-byte body", ErrMalformed, r.Status, body)
		}
		return r, body, nil
	case Legacy:
		if len(hdr) < LegacyHeaderSize {
			return nil, 0, fmt.Errorf("%w: reply header of %d bytes", ErrTruncated, len(hdr))
		}
		if len(hdr) > LegacyHeaderSize {
			return nil, 0, fmt.Errorf("%w: reply header of %d bytes", ErrMalformed, len(hdr))
		}
		r := &Reply{Kind: FrameReply, Status: binary.LittleEndian.Uint32(hdr[0:])}
		n := binary.LittleEndian.Uint32(hdr[4:])
		if n > MaxFrameSize {
			return nil, 0, fmt.Errorf("%w: payload length %d", ErrFrameTooLarge, n)
		}
		if r.Status != 0 && n != 0 {
			return nil, 0, fmt.Errorf("%w: error status %d with a %d-byte payload", ErrMalformed, r.Status, n)
		}
		return r, int(n), nil
	}
	return nil, 0, d.valid()
}

func (d Dialect) headerSize() int {
	if d == Legacy {
		return LegacyHeaderSize
	}
	return HeaderSize
}

// DecodeReply decodes one complete reply frame; frame must hold exactly
// one frame. Body aliases frame.
func DecodeReply(d Dialect, frame []byte) (*Reply, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	hs := d.headerSize()
	if len(frame) < hs {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrTruncated, len(frame))
	}
	r, n, err := DecodeReplyHeader(d, frame[:hs])
	if err != nil {
		return nil, err
	}
	switch rest := len(frame) - hs; {
	case rest < n:
		return nil, fmt.Errorf("%w: body of %d bytes, header says %d", ErrTruncated, rest, n)
	case rest > n:
		return nil, fmt.Errorf("%w: %d bytes after the frame", ErrMalformed, rest-n)
	}
	r.Body = frame[hs : hs+n : hs+n]
	return r, nil
}

// ReadReply reads one reply from rd. The body buffer grows with the bytes
// actually received, so a lying size field cannot force a large allocation.
func ReadReply(d Dialect, rd io.Reader) (*Reply, error) {
	return readReplyInto(d, rd, nil)
}

// readReplyInto is ReadReply reading the body into buf's storage when it
// is large enough.
func readReplyInto(d Dialect, rd io.Reader, buf []byte) (*Reply, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	hdr := make([]byte, d.headerSize())
	if _, err := io.ReadFull(rd, hdr); err != nil {
		return nil, err
	}
	r, n, err := DecodeReplyHeader(d, hdr)
	if err != nil {
		return nil, err
	}
	body, err := readN(rd, n, buf)
	if err != nil {
		return nil, err
	}
	r.Body = body
	return r, nil
}

func readN(rd io.Reader, n int, into []byte) ([]byte, error) {
	if into != nil && n <= cap(into) {
		// Storage the caller already has: no allocation, and a lying size
		// costs nothing more.
		b := into[:n]
		if _, err := io.ReadFull(rd, b); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	// Replies up to 16 MiB (a poll's worth) get their whole buffer at
	// once; beyond that the buffer grows as bytes arrive, so a bogus
	// length costs at most 16 MiB more than the bytes really sent.
	const chunk = 64 << 10
	buf := make([]byte, 0, min(n, 16<<20))
	for len(buf) < n {
		step := min(n-len(buf), chunk)
		if cap(buf)-len(buf) < step {
			nb := make([]byte, len(buf), min(n, max(2*cap(buf), len(buf)+step)))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(rd, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// splitResult strips the result section of a result-framed reply body (§3).
// An empty body is returned as is (some RF replies are allowed to be empty).
func splitResult(body []byte) ([]byte, error) {
	if len(body) == 0 {
		return body, nil
	}
	r := reader{b: body}
	count := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	if count == 0 {
		return body[4:], nil
	}
	r.u32() // index
	code := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	if code == 0 {
		return nil, fmt.Errorf("%w: result entry with code 0", ErrMalformed)
	}
	return nil, CodeError(code)
}

// ResultPayload checks a result-framed reply body (metadata ops,
// StoreConsumerOffset, login) and returns the payload after the result
// section, or the *Error of the first failed entry.
func ResultPayload(body []byte) ([]byte, error) { return splitResult(body) }
