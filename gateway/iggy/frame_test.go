package iggy

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/zeebo/xxh3"
)

func TestXXH3Vectors(t *testing.T) {
	// Reference values from libxxhash 0.8 (XXH3_64bits) over b[i] = i*7+3.
	want := map[int]uint64{
		0: 0x2d06800538d394c2, 1: 0x13e608bc156defed, 2: 0x1c9074b93943b86c, 3: 0xa9088dda485b481c,
		4: 0x6d9253b16c8b1ed3, 5: 0x998620e10e3a4b37, 8: 0x60539db630471163, 9: 0xfeff668361d723a8,
		16: 0xb8c859b0f030b585, 17: 0x714a04408e79b80f, 45: 0x0631fce0104f74f2, 52: 0x724426ca2f2ccba2,
		100: 0xb5937857f0d78c9f, 128: 0x67425a03650261bf, 129: 0xc664bf3311c6abc4, 200: 0x746cd0025327bf5b,
		240: 0x64556dc6b462a6cf, 241: 0x8beadd3a8874fe17, 1024: 0x9b81661c641c72b1, 1025: 0x806c2072ed713576,
		5000: 0x799aaddd7339581d, 20000: 0xa354c180a98d3853,
	}
	for n, w := range want {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		if got := xxh3.Hash(b); got != w {
			t.Errorf("len %d: got %016x want %016x", n, got, w)
		}
	}
	if got := xxh3.Hash([]byte("hello")); got != 0x9555e8555c62dcfd {
		t.Errorf("hello: %016x", got)
	}
}

func TestEvictionFrame(t *testing.T) {
	// Derived from §1.3: reason 9 (InvalidCredentials), versions 0.11.0/0.11.0.
	f := header256(t, map[int]string{
		48: "00 01 00 00", 60: "0d", 128: testClientHex, 144: "00 2c 00 00", 148: "00 2c 00 00", 255: "09",
	})
	r, err := DecodeReply(Current, f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != FrameEviction || r.Eviction == nil || r.Eviction.Reason != 9 || r.Eviction.ServerProtocolVersion != 0x2C00 || r.Eviction.Client != testClient {
		t.Fatalf("%+v", r)
	}
	err = r.Err()
	var ee *EvictionError
	if !errors.Is(err, ErrEvicted) || !errors.Is(err, ErrInvalidCredentials) || !errors.As(err, &ee) {
		t.Fatal(err)
	}
	for reason, sentinel := range map[uint8]error{
		1: ErrUnauthenticated, 4: ErrInvalidCommand, 10: ErrInvalidToken, 13: ErrStaleClient, 14: ErrIncompatibleProtocol, 15: ErrInvalidFormat, 200: ErrGeneric,
	} {
		f[255] = reason
		r, err := DecodeReply(Current, f)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(r.Err(), sentinel) {
			t.Errorf("reason %d: %v", reason, r.Err())
		}
		_ = r.Eviction.Reason.String()
	}
	// An eviction with a body is malformed.
	g := append(bytes.Clone(f), 0)
	g[48] = 1
	g[49] = 1
	if _, err := DecodeReply(Current, g); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
}

func TestErrorCodes(t *testing.T) {
	all := []uint32{1, 3, 4, 5, 6, 8, 20, 30, 40, 41, 42, 43, 44, 46, 47, 53, 54, 57, 58, 59, 80, 82, 100,
		1009, 1010, 1012, 1013, 1014, 1019, 1020, 2010, 2011, 2013, 2014, 2015, 2016, 2018, 2019, 2021,
		3007, 3008, 3009, 3013, 3021, 3022, 4009, 4017, 4022, 4023, 4024, 4027, 4031, 4032, 4033, 4034,
		4035, 4036, 4037, 4038, 4039, 4041, 4042, 4043, 4100, 5000, 5003, 5004, 5006, 5009, 14003}
	for _, c := range all {
		err := CodeError(c)
		var e *Error
		if !errors.As(err, &e) || e.Code != c || e.Name == "Unknown" || !errors.Is(err, ErrServer) || errors.Is(err, ErrUnknownCode) {
			t.Errorf("code %d: %v", c, err)
		}
	}
	if CodeError(0) != nil {
		t.Fatal("0 must be nil")
	}
	if err := CodeError(777); !errors.Is(err, ErrUnknownCode) || !errors.Is(err, ErrServer) {
		t.Fatal(err)
	}
	for c, s := range map[uint32]error{40: ErrUnauthenticated, 1009: ErrStreamNotFound, 1010: ErrStreamNotFound,
		2010: ErrTopicNotFound, 2011: ErrTopicNotFound, 3007: ErrPartitionNotFound, 5003: ErrConsumerGroupNotFound} {
		if !errors.Is(CodeError(c), s) {
			t.Errorf("%d !→ %v", c, s)
		}
	}
}

func TestFramingErrors(t *testing.T) {
	ok := replyFrame(t, 1, 2, 0, []byte{1, 2, 3})
	if r, err := DecodeReply(Current, ok); err != nil || len(r.Body) != 3 {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		d     Dialect
		frame []byte
		want  error
	}{
		"current short":        {Current, ok[:100], ErrTruncated},
		"current body short":   {Current, ok[:len(ok)-1], ErrTruncated},
		"current trailing":     {Current, append(bytes.Clone(ok), 0), ErrMalformed},
		"current size < 256":   {Current, header256(t, map[int]string{48: "ff 00 00 00", 60: "08"}), ErrFrameTooLarge},
		"current size > 64MiB": {Current, header256(t, map[int]string{48: "01 00 00 04", 60: "08"}), ErrFrameTooLarge},
		"current command 5":    {Current, header256(t, map[int]string{48: "00 01 00 00", 60: "05"}), ErrMalformed},
		"current status+body":  {Current, replyFrame(t, 1, 2, 40, []byte{1}), ErrMalformed},
		"legacy short":         {Legacy, []byte{0, 0, 0}, ErrTruncated},
		"legacy body short":    {Legacy, hx(t, "00000000 05000000 01"), ErrTruncated},
		"legacy trailing":      {Legacy, hx(t, "00000000 00000000 01"), ErrMalformed},
		"legacy huge":          {Legacy, hx(t, "00000000 ffffffff"), ErrFrameTooLarge},
		"legacy status+body":   {Legacy, hx(t, "28000000 01000000 00"), ErrMalformed},
		"bad dialect":          {Dialect(9), ok, ErrInvalidArgument},
	} {
		if _, err := DecodeReply(tc.d, tc.frame); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	if _, err := EncodeRequest(RequestHeader{Client: testClient}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := EncodeRequest(RequestHeader{Operation: 2}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := EncodeLegacyRequest(CodeCreateStream, make([]byte, LegacyMaxPayload+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatal(err)
	}
}

func TestReadReply(t *testing.T) {
	stream := append(replyFrame(t, 1, 2, 0, []byte("abc")), replyFrame(t, 2, 2, 1009, nil)...)
	rd := bytes.NewReader(stream)
	r, err := ReadReply(Current, rd)
	if err != nil || string(r.Body) != "abc" || r.Request != 1 {
		t.Fatal(err, r)
	}
	r, err = ReadReply(Current, rd)
	if err != nil || !errors.Is(r.Err(), ErrStreamNotFound) {
		t.Fatal(err, r)
	}
	if _, err := ReadReply(Current, rd); err != io.EOF {
		t.Fatal(err)
	}
	// A lying legacy length (60 MiB) with 3 bytes behind it: no big allocation, clean error.
	rd = bytes.NewReader(hx(t, "00000000 0000c003 01 02 03"))
	if _, err := ReadReply(Legacy, rd); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{7}, 200_000)
	r, err = ReadReply(Legacy, bytes.NewReader(legacyReply(0, big)))
	if err != nil || !bytes.Equal(r.Body, big) {
		t.Fatal(err)
	}
}

// TestTruncationNeverPanics cuts every valid reply at every length and
// checks that each decoder returns an error or a value, never panics.
func TestTruncationNeverPanics(t *testing.T) {
	for _, body := range [][]byte{
		hx(t, currentPollReply), hx(t, legacyPollReply),
		hx(t, "00000000 "+topicHead+" "+topicTail+" 00000000 00000000 "+partition0),
		hx(t, "00000000 00000000 07 00 00 00 00 00 00 00 00 2c 00 00 02 30 2e"),
	} {
		for i := 0; i < len(body); i++ {
			decodeAllBodies(body[:i])
		}
	}
	// Strict decoders must reject every proper prefix.
	full := hx(t, legacyPollReply)
	for i := 0; i < len(full); i++ {
		if _, err := DecodePollMessagesReply(Legacy, full[:i]); err == nil {
			t.Fatalf("legacy poll prefix %d accepted", i)
		}
	}
	full = hx(t, currentPollReply)
	// Prefix 16 is a valid empty poll: the Current decoder steps by
	// batch_length and does not enforce messages_count (see Count).
	for i := 1; i < len(full); i++ {
		if _, err := DecodePollMessagesReply(Current, full[:i]); err == nil && i != 16 {
			t.Fatalf("current poll prefix %d accepted", i)
		}
	}
}
