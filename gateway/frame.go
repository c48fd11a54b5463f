package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Header is a decoded Kafka request header (v0-v2).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

var (
	errTruncated   = errors.New("truncated request header")
	errUnknownKey  = errors.New("unknown api key")
	errBadTagCount = errors.New("too many tagged fields")
)

// maxHeaderTags bounds the tagged fields we walk over in a header.
const maxHeaderTags = 64

// ParseRequest splits a frame (without its size prefix) into its header and
// a request body ready to decode. The body is nil when the key is unknown to
// kmsg; flexible is reported so callers can answer in the right header form.
func ParseRequest(frame []byte) (Header, kmsg.Request, []byte, error) {
	var h Header
	if len(frame) < 8 {
		return h, nil, nil, errTruncated
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[8:]
	if len(rest) < 2 {
		return h, nil, nil, errTruncated
	}
	n := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if n >= 0 {
		if int(n) > len(rest) {
			return h, nil, nil, errTruncated
		}
		s := string(rest[:n])
		h.ClientID = &s
		rest = rest[n:]
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, nil, errUnknownKey
	}
	req.SetVersion(h.Version)
	// ApiVersions keeps a v0-v1 style header beyond its flexible version
	// only in responses; requests use the flexible header from v3 on.
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return h, nil, nil, err
		}
	}
	return h, req, rest, nil
}

// skipTags walks over a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errTruncated
	}
	if count > maxHeaderTags {
		return nil, errBadTagCount
	}
	b = b[n:]
	for i := uint64(0); i < count; i++ {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errTruncated
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errTruncated
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// DecodeBody decodes a request body, turning a decoder panic into an error
// so no input can crash the server.
func DecodeBody(req kmsg.Request, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), r)
		}
	}()
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("malformed %s v%d: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return nil
}

// AppendResponse appends a whole response frame (size, header, body).
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	// ApiVersions answers always use response header v0 (KIP-511).
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
