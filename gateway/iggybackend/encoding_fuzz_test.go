package iggybackend

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

// FuzzDecodeMessage: arbitrary user-header bytes and payloads never panic;
// errors wrap ErrMalformedMessage; whatever decodes is a record that
// survives EncodeBatch → DecodeMessage unchanged, and BuildBatch serves
// every message.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range recordShapes {
		msgs, err := EncodeBatch([]records.Record{s.rec}, createTime, seqIDs())
		if err != nil {
			f.Fatal(err)
		}
		b, err := iggy.EncodeUserHeaders(msgs[0].Headers)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, msgs[0].Payload, msgs[0].OriginTimestamp, uint64(1_750_000_000_000_000))
	}
	f.Add([]byte{2, 5, 0, 0, 0, 'k', 'g', 'a', 't', 'e', 1, 4, 0, 0, 0, 1, 0x3f, 0, 1}, []byte{0}, uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, userHeaders, payload []byte, origin, ts uint64) {
		m := iggy.PolledMessage{Offset: 3, Timestamp: ts, OriginTimestamp: origin, Payload: payload, UserHeaders: userHeaders}
		native := DecodeNative(m)
		rec, err := DecodeMessage(m)
		if b, n, berr := BuildBatch([]iggy.PolledMessage{m}, 0); berr != nil || n != 1 {
			t.Fatalf("BuildBatch: %d, %v", n, berr)
		} else if _, got, rerr := records.Records(b, math.MaxInt32); rerr != nil || len(got) != 1 {
			t.Fatalf("BuildBatch output: %v", rerr)
		} else {
			want := rec
			if err != nil {
				want = native
			}
			if _, flags, ferr := decodeMessage(m); ferr == nil && flags&(flagTxn|flagControl) != 0 {
				// A transactional record or a marker whose id or contents do
				// not match its flags is served as a plain native record
				// (classify), as BuildBatch does; a fuzzer found one.
				want, _, _ = classify(m)
			}
			if diff := diffRecord(want, got[0]); diff != "" {
				t.Fatalf("BuildBatch record: %s", diff)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrMalformedMessage) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if len(userHeaders) == 0 || userHeaders[0] != iggy.KindString {
			// Not a kgate message: the native mapping.
			if diff := diffRecord(native, rec); diff != "" {
				t.Fatalf("native message decoded differently: %s", diff)
			}
		}
		msgs, err := EncodeBatch([]records.Record{rec}, createTime, seqIDs())
		if errors.Is(err, ErrRecordTooLarge) {
			return // e.g. many repeated native header names: the envelope costs more
		}
		if err != nil {
			t.Fatal(err)
		}
		checkWire(t, msgs)
		hb, err := iggy.EncodeUserHeaders(msgs[0].Headers)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeMessage(iggy.PolledMessage{Timestamp: ts, OriginTimestamp: msgs[0].OriginTimestamp, Payload: msgs[0].Payload, UserHeaders: hb})
		if err != nil {
			t.Fatalf("re-encoded record: %v", err)
		}
		if diff := diffRecord(rec, again); diff != "" {
			t.Fatalf("re-encoded record: %s", diff)
		}
	})
}

// fuzzSource turns fuzz bytes into record fields; past the end it yields
// zeros.
type fuzzSource struct{ b []byte }

func (s *fuzzSource) u8() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

// bytes: 0xff = null; otherwise n = c&0x7f bytes, ×8 when c&0x80 (so
// lengths around 255 and beyond occur); the bytes are taken from the input
// (zero-padded).
func (s *fuzzSource) bytes() []byte {
	c := s.u8()
	if c == 0xff {
		return nil
	}
	n := int(c & 0x7f)
	if c&0x80 != 0 {
		n = n*8 + int(s.u8()&7)
	}
	out := make([]byte, n)
	copy(out, s.b)
	s.b = s.b[min(n, len(s.b)):]
	return out
}

func (s *fuzzSource) i64() int64 {
	var b [8]byte
	for i := range b {
		b[i] = s.u8()
	}
	return int64(binary.LittleEndian.Uint64(b[:]))
}

// FuzzRoundTrip: any batch of records round-trips exactly through
// EncodeBatch, the simulated server and DecodeMessage, and through
// BuildBatch.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{3, 0xff, 0x00, 2, 1, 'a', 1, 'b', 1, 'a', 0xff, 0x20, 0x05})
	f.Add([]byte{1, 0x80, 0x9f, 7, 0xa0, 1, 3, 0x9f, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &fuzzSource{b: data}
		ctl := s.u8()
		recs := make([]records.Record, 1+int(ctl&3))
		base := s.i64()
		for i := range recs {
			r := &recs[i]
			r.Key, r.Value = s.bytes(), s.bytes()
			switch m := s.u8(); m % 4 {
			case 0:
				r.Timestamp = s.i64()
			case 1:
				r.Timestamp = []int64{-1, 0, 1, math.MaxInt64}[m>>2&3]
			default:
				r.Timestamp = base + int64(m)*60_000
			}
			for range s.u8() % 6 {
				name := s.bytes()
				r.Headers = append(r.Headers, records.RecordHeader{Key: string(name), Value: s.bytes()})
			}
		}
		hdr := createTime
		if ctl&4 != 0 {
			hdr = logAppendTime
		}
		encodeRoundTrip(t, recs, hdr)
		if hdr == createTime {
			batch, n, err := BuildBatch(simulateIggy(t, iggy.Current, mustEncode(t, recs), 1, 1), math.MaxInt32)
			if err != nil || n != len(recs) {
				t.Fatal(n, err)
			}
			_, got, err := records.Records(batch, math.MaxInt32)
			if err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				if diff := diffRecord(recs[i], got[i]); diff != "" {
					t.Fatalf("record %d via BuildBatch: %s", i, diff)
				}
			}
		}
	})
}
