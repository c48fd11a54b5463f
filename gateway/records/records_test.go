package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var codecs = []Codec{None, Gzip, Snappy, LZ4, Zstd}

const testLimit = 1 << 20

// sampleRecords covers null vs empty keys, values and header values, and
// repeated header names.
func sampleRecords() []Record {
	return []Record{
		{Timestamp: 1000, Key: []byte("k1"), Value: []byte("v1")},
		{Timestamp: 1001, Key: nil, Value: []byte("null key")},
		{Timestamp: 999, Key: []byte{}, Value: nil},
		{Timestamp: 5000, Key: []byte{}, Value: []byte{}, Attributes: 0},
		{Timestamp: 1002, Key: []byte("h"), Value: bytes.Repeat([]byte("x"), 300), Headers: []RecordHeader{
			{Key: "a", Value: []byte("1")},
			{Key: "null", Value: nil},
			{Key: "empty", Value: []byte{}},
			{Key: "a", Value: []byte("2")},
			{Key: "", Value: []byte("empty key")},
			{Key: "a", Value: []byte("3")},
		}},
		{Timestamp: 1003, Key: bytes.Repeat([]byte{0xff}, 200), Value: bytes.Repeat([]byte("compressible "), 1000)},
	}
}

// want returns recs as Records decodes them from a Builder batch.
func want(recs []Record, base int64) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		r.Offset = base + int64(i)
		out[i] = r
	}
	return out
}

// checkRecords compares with DeepEqual, which tells nil from empty, and
// reports only the first differing record.
func checkRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d differs:\n got %.300v\nwant %.300v", i, fmt.Sprintf("%+v", got[i]), fmt.Sprintf("%+v", want[i]))
		}
	}
}

func mustBuild(t testing.TB, b Builder, recs []Record) []byte {
	t.Helper()
	batch, err := b.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttrs:], castagnoli))
}

// rawBatch frames payload (already compressed with the attrs codec) as a
// batch declaring n records, with a correct CRC.
func rawBatch(attrs int16, n int32, payload []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(payload))
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(minLength+len(payload)))
	b[16] = 2
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(n-1))
	be.PutUint64(b[43:], ^uint64(0)) // producer id -1
	be.PutUint16(b[51:], 0xffff)
	be.PutUint32(b[53:], ^uint32(0))
	be.PutUint32(b[57:], uint32(n))
	b = append(b, payload...)
	fixCRC(b)
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			bld := Builder{Codec: c, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7, Transactional: true}
			recs := sampleRecords()
			batch := mustBuild(t, bld, recs)

			hs, err := Validate(batch, testLimit)
			if err != nil {
				t.Fatal(err)
			}
			if len(hs) != 1 {
				t.Fatalf("got %d headers", len(hs))
			}
			h := hs[0]
			if h.Compression() != c || !h.Transactional() || h.Control() || h.LogAppendTime() {
				t.Errorf("attributes %#x", h.Attributes)
			}
			if h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != 7 || h.PartitionLeaderEpoch != -1 {
				t.Errorf("producer fields %+v", h)
			}
			if h.NumRecords != int32(len(recs)) || h.LastOffset() != int64(len(recs)-1) || h.Size() != len(batch) {
				t.Errorf("counts %+v", h)
			}
			if h.FirstTimestamp != 1000 || h.MaxTimestamp != 5000 {
				t.Errorf("timestamps %d %d", h.FirstTimestamp, h.MaxTimestamp)
			}

			SetBaseOffset(batch, 100) // outside the CRC
			h2, got, err := Records(batch, testLimit)
			if err != nil {
				t.Fatal(err)
			}
			if h2.BaseOffset != 100 || h2.LastOffset() != 100+int64(len(recs)-1) {
				t.Errorf("base offset %d", h2.BaseOffset)
			}
			checkRecords(t, got, want(recs, 100))
			// Spelled out, as DeepEqual is the only thing telling nil from empty above.
			if got[1].Key != nil || got[2].Key == nil || got[2].Value != nil || got[3].Value == nil {
				t.Error("null and empty confused")
			}
			hd := got[4].Headers
			if hd[1].Value != nil || hd[2].Value == nil || len(hd[2].Value) != 0 {
				t.Error("null and empty header values confused")
			}
		})
	}
}

func TestBuilderTimestamps(t *testing.T) {
	batch := mustBuild(t, Builder{BaseTimestamp: 77, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]Record{{}, {Timestamp: 80}, {}})
	h, recs, err := Records(batch, testLimit)
	if err != nil {
		t.Fatal(err)
	}
	if h.FirstTimestamp != 77 || h.MaxTimestamp != 80 || recs[0].Timestamp != 77 || recs[1].Timestamp != 80 || recs[2].Timestamp != 77 {
		t.Errorf("header %+v records %+v", h, recs)
	}

	// LogAppendTime: every record carries MaxTimestamp.
	batch[22] |= attrLogAppendTime
	binary.BigEndian.PutUint64(batch[35:], 12345)
	fixCRC(batch)
	_, recs, err = Records(batch, testLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Timestamp != 12345 {
			t.Errorf("log append time: %d", r.Timestamp)
		}
	}

	if _, err := (Builder{}).Build(nil); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("empty build: %v", err)
	}
	if _, err := (Builder{Codec: 5}).Build(sampleRecords()); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("codec 5 build: %v", err)
	}
}

func TestMultipleBatches(t *testing.T) {
	var data []byte
	var sizes []int
	for _, c := range codecs {
		b := mustBuild(t, Builder{Codec: c, ProducerID: -1, BaseSequence: -1}, sampleRecords())
		data = append(data, b...)
		sizes = append(sizes, len(b))
	}
	hs, err := Validate(data, testLimit)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for i, h := range hs {
		if h.Compression() != codecs[i] || h.Size() != sizes[i] {
			t.Errorf("batch %d: %+v", i, h)
		}
		if _, recs, err := Records(data[off:], testLimit); err != nil || len(recs) != len(sampleRecords()) {
			t.Errorf("batch %d: %d records, %v", i, len(recs), err)
		}
		off += h.Size()
	}

	// The limit is shared by all batches.
	one := mustBuild(t, Builder{Codec: Zstd}, sampleRecords())
	_, recs, _ := Records(one, testLimit)
	raw := mustBuild(t, Builder{}, recs)
	rawLen := len(raw) - HeaderSize
	two := append(append([]byte(nil), one...), one...)
	if _, err := Validate(two, 2*rawLen); err != nil {
		t.Errorf("limit 2x: %v", err)
	}
	if _, err := Validate(two, 2*rawLen-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("limit 2x-1: %v", err)
	}
	if _, err := Validate(one, rawLen-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("limit x-1: %v", err)
	}
}

func TestErrors(t *testing.T) {
	good := func() []byte { return mustBuild(t, Builder{ProducerID: -1, BaseSequence: -1}, sampleRecords()) }
	// Each mutation leaves a correct CRC unless the case is about the CRC.
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		want   error
	}{
		{"empty", func([]byte) []byte { return nil }, ErrInvalidRecord},
		{"crc field", func(b []byte) []byte { b[offCRC] ^= 1; return b }, ErrCorrupt},
		{"payload bit", func(b []byte) []byte { b[len(b)-1] ^= 0x10; return b }, ErrCorrupt},
		{"attributes bit", func(b []byte) []byte { b[offAttrs+1] ^= 0x10; return b }, ErrCorrupt},
		{"magic 1", func(b []byte) []byte { b[offMagic] = 1; return b }, ErrInvalidRecord},
		{"magic 0 short", func(b []byte) []byte { b[offMagic] = 0; return b[:30] }, ErrInvalidRecord},
		{"length short", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], minLength-1); return b }, ErrCorrupt},
		{"length negative", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 0x80000000); return b }, ErrCorrupt},
		{"length long", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], uint32(len(b)-11)); return b }, ErrCorrupt},
		{"trailing garbage", func(b []byte) []byte { return append(b, 0, 0, 0) }, ErrCorrupt},
		{"codec 5", func(b []byte) []byte { b[22] |= 5; fixCRC(b); return b }, ErrUnsupportedCompression},
		{"codec 7", func(b []byte) []byte { b[22] |= 7; fixCRC(b); return b }, ErrUnsupportedCompression},
		{"count low", func(b []byte) []byte { setCount(b, 5, 4); return b }, ErrInvalidRecord},
		{"count high", func(b []byte) []byte { setCount(b, 7, 6); return b }, ErrInvalidRecord},
		{"count zero", func(b []byte) []byte { setCount(b, 0, -1); return b }, ErrInvalidRecord},
		{"count huge", func(b []byte) []byte { setCount(b, 1<<31-1, 1<<31-2); return b }, ErrInvalidRecord},
		{"last delta", func(b []byte) []byte { setCount(b, 6, 6); return b }, ErrInvalidRecord},
		{"sequence", func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[43:], 5)
			fixCRC(b)
			return b
		}, ErrInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(good())
			if _, err := Validate(b, testLimit); !errors.Is(err, tc.want) {
				t.Errorf("Validate: %v, want %v", err, tc.want)
			}
			if len(b) == 0 {
				return
			}
			_, _, err := Records(b, testLimit)
			if tc.name == "trailing garbage" {
				// Records reads one batch and ignores what follows.
				if err != nil {
					t.Errorf("Records: %v", err)
				}
			} else if !errors.Is(err, tc.want) {
				t.Errorf("Records: %v, want %v", err, tc.want)
			}
		})
	}
}

func setCount(b []byte, n, lastDelta int32) {
	binary.BigEndian.PutUint32(b[23:], uint32(lastDelta))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	fixCRC(b)
}

// TestRecordFraming hand-encodes bad records inside otherwise valid batches.
func TestRecordFraming(t *testing.T) {
	rec := func(body ...[]byte) []byte {
		b := bytes.Join(body, nil)
		return append(binary.AppendVarint(nil, int64(len(b))), b...)
	}
	v := func(x int64) []byte { return binary.AppendVarint(nil, x) }
	okRec := func(delta int64) []byte { return rec([]byte{0}, v(0), v(delta), v(-1), v(1), []byte("x"), v(0)) }
	cases := []struct {
		name    string
		n       int32
		payload []byte
		ok      bool
	}{
		{"valid", 2, append(okRec(0), okRec(1)...), true},
		{"offset delta", 2, append(okRec(0), okRec(2)...), false},
		{"offset delta first", 1, okRec(1), false},
		{"fewer records", 3, append(okRec(0), okRec(1)...), false},
		{"extra record", 1, append(okRec(0), okRec(1)...), false},
		{"trailing byte", 1, append(okRec(0), 0), false},
		{"byte inside record", 1, rec([]byte{0}, v(0), v(0), v(-1), v(-1), v(0), []byte{0}), false},
		{"record length over", 1, append(v(100), okRec(0)[1:]...), false},
		{"record length negative", 1, append(v(-3), okRec(0)[1:]...), false},
		{"empty record", 1, rec(), false},
		{"key length -2", 1, rec([]byte{0}, v(0), v(0), v(-2), v(-1), v(0)), false},
		{"value too long", 1, rec([]byte{0}, v(0), v(0), v(-1), v(5), []byte("ab"), v(0)), false},
		{"header count negative", 1, rec([]byte{0}, v(0), v(0), v(-1), v(-1), v(-1)), false},
		{"header count high", 1, rec([]byte{0}, v(0), v(0), v(-1), v(-1), v(2), v(1), []byte("a"), v(-1)), false},
		{"header null key", 1, rec([]byte{0}, v(0), v(0), v(-1), v(-1), v(1), v(-1), v(-1)), false},
		{"header ok", 1, rec([]byte{0}, v(0), v(0), v(-1), v(-1), v(1), v(0), v(-1)), true},
		{"varint 6 bytes", 1, rec([]byte{0}, v(0), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0}, v(-1), v(-1), v(0)), false},
		{"varint over 32 bits", 1, rec([]byte{0}, v(0), []byte{0x80, 0x80, 0x80, 0x80, 0x10}, v(-1), v(-1), v(0)), false},
		{"varint 5 bytes ok", 1, rec([]byte{0}, v(0), []byte{0x80, 0x80, 0x80, 0x80, 0x00}, v(-1), v(-1), v(0)), true},
		{"varlong 11 bytes", 1, rec([]byte{0}, bytes.Repeat([]byte{0x80}, 10), []byte{0}, v(0), v(-1), v(-1), v(0)), false},
		{"varlong max", 1, rec([]byte{0}, v(-1<<63), v(0), v(-1), v(-1), v(0)), true},
		{"truncated varint", 1, rec([]byte{0}, v(0), v(0), v(-1), v(-1), []byte{0x80}), false},
	}
	for _, tc := range cases {
		for _, c := range []Codec{None, Zstd} {
			t.Run(tc.name+"/"+c.String(), func(t *testing.T) {
				p, err := compress(c, tc.payload)
				if err != nil {
					t.Fatal(err)
				}
				b := rawBatch(int16(c), tc.n, p)
				_, verr := Validate(b, testLimit)
				_, _, rerr := Records(b, testLimit)
				if tc.ok {
					if verr != nil || rerr != nil {
						t.Errorf("Validate %v, Records %v", verr, rerr)
					}
					return
				}
				if !errors.Is(verr, ErrInvalidRecord) || !errors.Is(rerr, ErrInvalidRecord) {
					t.Errorf("Validate %v, Records %v; want ErrInvalidRecord", verr, rerr)
				}
			})
		}
	}
}

func TestTruncated(t *testing.T) {
	for _, c := range codecs {
		full := mustBuild(t, Builder{Codec: c}, sampleRecords())
		two := append(append([]byte(nil), full...), full...)
		for n := range len(two) {
			_, err := Validate(two[:n], testLimit)
			if n == len(full) {
				if err != nil {
					t.Errorf("%v: one whole batch: %v", c, err)
				}
				continue
			}
			if err == nil {
				t.Fatalf("%v: truncated to %d: no error", c, n)
			}
			if n < len(full) {
				if _, _, err := Records(two[:n], testLimit); err == nil {
					t.Fatalf("%v: Records truncated to %d: no error", c, n)
				}
			}
		}
	}
}

// TestCorruptCompressed garbles compressed payloads (CRC fixed so that
// decoding is reached): always an error, never a panic.
func TestCorruptCompressed(t *testing.T) {
	for _, c := range codecs[1:] {
		good := mustBuild(t, Builder{Codec: c}, sampleRecords())
		for i := HeaderSize; i < len(good); i++ {
			b := append([]byte(nil), good...)
			b[i] ^= 0xa5
			fixCRC(b)
			if _, err := Validate(b, testLimit); err == nil {
				// Some bytes (e.g. gzip header mtime/OS) do not matter.
				continue
			} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrTooLarge) {
				t.Errorf("%v byte %d: unexpected %v", c, i, err)
			}
		}
	}
}

// Bombs: 100 MB of zeros, limit 1 MB.
const bombSize = 100 << 20

func zeroStream(t *testing.T, w io.WriteCloser) {
	t.Helper()
	zeros := make([]byte, 1<<20)
	for range bombSize / len(zeros) {
		if _, err := w.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBombs(t *testing.T) {
	bombs := map[string]func(t *testing.T) (Codec, []byte){
		"gzip": func(t *testing.T) (Codec, []byte) {
			var buf bytes.Buffer
			zeroStream(t, gzip.NewWriter(&buf))
			return Gzip, buf.Bytes()
		},
		"zstd": func(t *testing.T) (Codec, []byte) {
			var buf bytes.Buffer
			w, _ := zstd.NewWriter(&buf)
			zeroStream(t, w)
			return Zstd, buf.Bytes()
		},
		"zstd 32 MiB window": func(t *testing.T) (Codec, []byte) {
			var buf bytes.Buffer
			w, _ := zstd.NewWriter(&buf, zstd.WithWindowSize(32<<20))
			zeroStream(t, w)
			return Zstd, buf.Bytes()
		},
		"zstd declared size": func(t *testing.T) (Codec, []byte) {
			e, _ := zstd.NewWriter(nil)
			return Zstd, e.EncodeAll(make([]byte, bombSize), nil)
		},
		"lz4": func(t *testing.T) (Codec, []byte) {
			var buf bytes.Buffer
			zeroStream(t, lz4.NewWriter(&buf))
			return LZ4, buf.Bytes()
		},
		"snappy raw lying length": func(t *testing.T) (Codec, []byte) {
			// Claims 100 MB; only the header is checked before failing.
			return Snappy, append(binary.AppendUvarint(nil, bombSize), 0)
		},
		"snappy xerial": func(t *testing.T) (Codec, []byte) {
			block := snappy.Encode(nil, make([]byte, 1<<16))
			out := append([]byte(nil), xerialMagic...)
			out = append(out, 0, 0, 0, 1, 0, 0, 0, 1)
			for range bombSize >> 16 {
				out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
				out = append(out, block...)
			}
			return Snappy, out
		},
	}
	for name, mk := range bombs {
		t.Run(name, func(t *testing.T) {
			c, payload := mk(t)
			batch := rawBatch(int16(c), 1, payload)
			// Warm the pools and keep GC from emptying them, so we count
			// per-call allocations only, not the pooled decoders' fixed
			// state (zstd's window buffer is up to 8 MiB). The race
			// detector randomly drops pooled items (and lz4 draws on
			// several pools a call), hence the best of up to 40 tries,
			// stopping at the first within both bounds.
			const validateMax, recordsMax = 256 << 10, 2<<20 + 256<<10
			Validate(batch, 1<<20)
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			va, ra := uint64(math.MaxUint64), uint64(math.MaxUint64)
			for i := 0; i < 40 && (va > validateMax || ra > recordsMax); i++ {
				var m0, m1, m2 runtime.MemStats
				runtime.ReadMemStats(&m0)
				_, err := Validate(batch, 1<<20)
				runtime.ReadMemStats(&m1)
				_, _, rerr := Records(batch, 1<<20)
				runtime.ReadMemStats(&m2)
				if !errors.Is(err, ErrTooLarge) || !errors.Is(rerr, ErrTooLarge) {
					t.Fatalf("Validate %v, Records %v; want ErrTooLarge", err, rerr)
				}
				va = min(va, m1.TotalAlloc-m0.TotalAlloc)
				ra = min(ra, m2.TotalAlloc-m1.TotalAlloc)
			}
			// Validate reuses its pooled buffer; Records grows a fresh one
			// by doubling up to the 1 MiB limit (< 2 MiB in all).
			if a := va; a > validateMax {
				t.Errorf("Validate allocated %d bytes for a %d-byte compressed bomb", a, len(payload))
			}
			if a := ra; a > recordsMax {
				t.Errorf("Records allocated %d bytes for a %d-byte compressed bomb", a, len(payload))
			}
		})
	}
}

// kmsgBatch encodes recs with franz-go's kmsg types and compressor.
func kmsgBatch(t *testing.T, c Codec, recs []Record) []byte {
	t.Helper()
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{
			Attributes:       r.Attributes,
			TimestampDelta64: r.Timestamp - recs[0].Timestamp,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // Length 0 took one byte
		raw = kr.AppendTo(raw)
	}
	payload := raw
	if c != None {
		kc := [...]kgo.CompressionCodec{Gzip: kgo.GzipCompression(), Snappy: kgo.SnappyCompression(), LZ4: kgo.Lz4Compression(), Zstd: kgo.ZstdCompression()}[c]
		comp, err := kgo.DefaultCompressor(kc)
		if err != nil {
			t.Fatal(err)
		}
		var typ kgo.CompressionCodecType
		payload, typ = comp.Compress(new(bytes.Buffer), raw)
		if Codec(typ) != c {
			t.Fatalf("franz-go used codec %d", typ)
		}
		payload = append([]byte(nil), payload...)
	}
	maxTS := recs[0].Timestamp
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		Length:               int32(minLength + len(payload)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(c),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       recs[0].Timestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              payload,
	}
	b := rb.AppendTo(nil)
	fixCRC(b)
	return b
}

func TestKmsgInterop(t *testing.T) {
	recs := sampleRecords()
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			// franz-go bytes through our decoder.
			b := kmsgBatch(t, c, recs)
			if _, err := Validate(b, testLimit); err != nil {
				t.Fatal(err)
			}
			_, got, err := Records(b, testLimit)
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, want(recs, 0))
			if c == None {
				ours := mustBuild(t, Builder{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
				if !bytes.Equal(ours, b) {
					t.Error("uncompressed Build output differs from kmsg encoding")
				}
			}

			// Our bytes through franz-go's decoder.
			ours := mustBuild(t, Builder{Codec: c, ProducerID: 9, ProducerEpoch: 1, BaseSequence: 3}, recs)
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(ours); err != nil {
				t.Fatal(err)
			}
			if rb.Magic != 2 || rb.NumRecords != int32(len(recs)) || rb.LastOffsetDelta != int32(len(recs)-1) ||
				rb.ProducerID != 9 || rb.ProducerEpoch != 1 || rb.FirstSequence != 3 || rb.Attributes != int16(c) {
				t.Errorf("kmsg header %+v", rb)
			}
			if uint32(rb.CRC) != crc32.Checksum(ours[offAttrs:], castagnoli) {
				t.Error("CRC")
			}
			raw, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(c))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				n, sz := binary.Varint(raw)
				var kr kmsg.Record
				if err := kr.ReadFrom(raw[:sz+int(n)]); err != nil {
					t.Fatal(err)
				}
				raw = raw[sz+int(n):]
				if kr.OffsetDelta != int32(i) || rb.FirstTimestamp+kr.TimestampDelta64 != r.Timestamp ||
					!bytes.Equal(kr.Key, r.Key) || (kr.Key == nil) != (r.Key == nil) ||
					!bytes.Equal(kr.Value, r.Value) || (kr.Value == nil) != (r.Value == nil) || len(kr.Headers) != len(r.Headers) {
					t.Errorf("record %d: kmsg read %+v", i, kr)
				}
				for j, h := range r.Headers {
					if kr.Headers[j].Key != h.Key || !bytes.Equal(kr.Headers[j].Value, h.Value) || (kr.Headers[j].Value == nil) != (h.Value == nil) {
						t.Errorf("record %d header %d: %+v", i, j, kr.Headers[j])
					}
				}
			}
			if len(raw) != 0 {
				t.Errorf("%d bytes left", len(raw))
			}
		})
	}
}

func TestSnappyRawBlock(t *testing.T) {
	// librdkafka/franz-go style: one raw block, no xerial framing.
	recs := sampleRecords()
	raw := mustBuild(t, Builder{}, recs)[HeaderSize:]
	b := rawBatch(int16(Snappy), int32(len(recs)), snappy.Encode(nil, raw))
	binary.BigEndian.PutUint64(b[27:], uint64(recs[0].Timestamp))
	fixCRC(b)
	_, got, err := Records(b, testLimit)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, want(recs, 0))
}

// benchRecords is 1 MiB of 1 KiB records.
func benchRecords() []Record {
	recs := make([]Record, 1024)
	for i := range recs {
		v := make([]byte, 1000)
		for j := range v {
			v[j] = byte("abcdefghij"[(i+j*7)%10]) ^ byte(j%3)
		}
		recs[i] = Record{Timestamp: int64(1700000000000 + i), Key: fmt.Appendf(nil, "key-%06d", i), Value: v}
	}
	return recs
}

func BenchmarkValidate(b *testing.B) {
	recs := benchRecords()
	for _, c := range codecs {
		batch := mustBuild(b, Builder{Codec: c, ProducerID: -1, BaseSequence: -1}, recs)
		b.Run(c.String(), func(b *testing.B) {
			// Throughput in uncompressed bytes, what the producer sent.
			_, rs, _ := Records(batch, 8<<20)
			var total int
			for _, r := range rs {
				total += len(r.Key) + len(r.Value)
			}
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(batch, 8<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecords(b *testing.B) {
	batch := mustBuild(b, Builder{Codec: LZ4}, benchRecords())
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Records(batch, 8<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConcurrent exercises the decoder pools from many goroutines (run
// with -race).
func TestConcurrent(t *testing.T) {
	var batches [][]byte
	for _, c := range codecs {
		batches = append(batches, mustBuild(t, Builder{Codec: c}, sampleRecords()))
	}
	bomb := rawBatch(int16(Zstd), 1, zstdEncoder().EncodeAll(make([]byte, 2<<20), nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				b := batches[(g+i)%len(batches)]
				if _, err := Validate(b, testLimit); err != nil {
					t.Error(err)
					return
				}
				if _, recs, err := Records(b, testLimit); err != nil || len(recs) != len(sampleRecords()) {
					t.Error(len(recs), err)
					return
				}
				if _, err := Validate(bomb, testLimit); !errors.Is(err, ErrTooLarge) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestAppendBuild: AppendBuild writes the batch Build makes after what dst
// holds, into dst's own array when it has the room, for every codec.
func TestAppendBuild(t *testing.T) {
	recs := []Record{{Key: []byte("k"), Value: []byte("v1"), Timestamp: 5}, {Value: bytes.Repeat([]byte("x"), 300), Timestamp: 9}}
	for _, c := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		bld := Builder{Codec: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		want, err := bld.Build(recs)
		if err != nil {
			t.Fatal(err)
		}
		for _, room := range []int{0, 4096} {
			// A reused buffer holds old bytes: none of them may show.
			dst := bytes.Repeat([]byte{0xff}, 3+room)[:3]
			copy(dst, "pre")
			got, err := bld.AppendBuild(dst, recs)
			if err != nil {
				t.Fatal(err)
			}
			if string(got[:3]) != "pre" || !bytes.Equal(got[3:], want) {
				t.Errorf("codec %d, room %d: appended batch differs from Build's", c, room)
			}
			if room > 0 && &got[0] != &dst[0] {
				t.Errorf("codec %d: a buffer with room was not written in place", c)
			}
			if _, _, err := Records(got[3:], 1<<20); err != nil {
				t.Errorf("codec %d, room %d: %v", c, room, err)
			}
		}
	}
}
