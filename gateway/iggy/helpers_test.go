package iggy

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
)

// hx decodes hex with spaces, '|' separators and "00*N" repetitions.
func hx(t testing.TB, s string) []byte {
	t.Helper()
	var out []byte
	for _, tok := range strings.Fields(strings.ReplaceAll(s, "|", " ")) {
		if i := strings.IndexByte(tok, '*'); i >= 0 {
			b, err := hex.DecodeString(tok[:i])
			if err != nil {
				t.Fatalf("bad token %q", tok)
			}
			n, err := strconv.Atoi(tok[i+1:])
			if err != nil {
				t.Fatalf("bad token %q", tok)
			}
			out = append(out, bytes.Repeat(b, n)...)
			continue
		}
		b, err := hex.DecodeString(tok)
		if err != nil {
			t.Fatalf("bad token %q: %v", tok, err)
		}
		out = append(out, b...)
	}
	return out
}

// header256 builds a 256-byte header from offset → hex patches.
func header256(t testing.TB, patches map[int]string) []byte {
	t.Helper()
	h := make([]byte, HeaderSize)
	for off, s := range patches {
		copy(h[off:], hx(t, s))
	}
	return h
}

const testClientHex = "01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10"

var testClient = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func eqBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s mismatch\n got %x\nwant %x", what, got, want)
	}
}

// replyFrame builds a current-dialect reply frame.
func replyFrame(t testing.TB, request uint64, op uint8, status uint32, body []byte) []byte {
	t.Helper()
	h := make([]byte, HeaderSize)
	le := func(off int, v uint64, n int) {
		for i := 0; i < n; i++ {
			h[off+i] = byte(v >> (8 * i))
		}
	}
	le(48, uint64(HeaderSize+len(body)), 4)
	h[60] = FrameReply
	copy(h[160:], testClient[:])
	le(200, request, 8)
	h[208] = op
	le(216, uint64(status), 4)
	return append(h, body...)
}

func legacyReply(status uint32, body []byte) []byte {
	f := []byte{byte(status), byte(status >> 8), byte(status >> 16), byte(status >> 24)}
	n := len(body)
	f = append(f, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	return append(f, body...)
}
