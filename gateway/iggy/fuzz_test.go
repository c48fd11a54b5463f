package iggy

import (
	"bytes"
	"testing"
)

// decodeAllBodies runs every body decoder in both dialects.
func decodeAllBodies(b []byte) {
	for _, d := range []Dialect{Current, Legacy} {
		_, _ = DecodeLoginReply(d, b)
		_, _ = DecodeCreateStreamReply(d, b)
		_, _ = DecodeGetStreamsReply(d, b)
		_, _ = DecodeCreateTopicReply(d, b)
		_, _, _ = DecodeGetTopicReply(d, b)
		_, _ = DecodeGetTopicsReply(d, b)
		_ = DecodeEmptyReply(d, b)
		_, _ = DecodeSendMessagesReply(d, b)
		_, _ = DecodePollMessagesReply(d, b)
		_, _, _ = DecodeGetConsumerOffsetReply(d, b)
	}
	_, _ = DecodeUserHeaders(b)
	_, _ = ResultPayload(b)
}

// FuzzDecodeReply feeds arbitrary bytes to the frame decoders of both
// dialects and every body decoder. The first byte selects the dialect for
// the frame decoder; the whole input is also tried as a body.
func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeAllBodies(data)
		if len(data) == 0 {
			return
		}
		d := Current
		if data[0]&1 == 1 {
			d = Legacy
		}
		if rr, err := ReadReply(d, bytes.NewReader(data[1:])); err == nil && len(rr.Body) > len(data) {
			t.Fatalf("streamed body %d longer than input %d", len(rr.Body), len(data))
		}
		r, err := DecodeReply(d, data[1:])
		if err != nil {
			return
		}
		_ = r.Err()
		if len(r.Body) > len(data) {
			t.Fatalf("body %d longer than input %d", len(r.Body), len(data))
		}
		decodeAllBodies(r.Body)
	})
}
