package records

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/klauspost/compress/snappy"
)

// fuzzLimit is small so the fuzzer reaches ErrTooLarge too.
const fuzzLimit = 64 << 10

func FuzzValidate(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkInvariants(t, data)
		// Most mutations only break the CRC; fixing it lets the fuzzer
		// reach the decompressors and record parsing.
		if fixed := fixCRCs(data); fixed != nil {
			checkInvariants(t, fixed)
		}
	})
}

// checkInvariants: no panics, only sentinel errors, and whatever Validate
// accepts Records decodes, with the declared counts, and survives a
// rebuild unchanged.
func checkInvariants(t *testing.T, data []byte) {
	hs, err := Validate(data, fuzzLimit)
	_, _, rerr := Records(data, fuzzLimit)
	for _, e := range []error{err, rerr} {
		if e != nil && !errors.Is(e, ErrCorrupt) && !errors.Is(e, ErrInvalidRecord) &&
			!errors.Is(e, ErrUnsupportedCompression) && !errors.Is(e, ErrTooLarge) {
			t.Fatalf("error wraps no sentinel: %v", e)
		}
	}
	if err != nil {
		return
	}
	off := 0
	for i, h := range hs {
		h2, recs, err := Records(data[off:], fuzzLimit)
		if err != nil {
			t.Fatalf("batch %d: Validate accepted, Records: %v", i, err)
		}
		if h2 != h || len(recs) != int(h.NumRecords) {
			t.Fatalf("batch %d: header %+v vs %+v, %d records", i, h2, h, len(recs))
		}
		rebuilt, err := Builder{ProducerID: -1, BaseSequence: -1}.Build(recs)
		if err != nil {
			t.Fatalf("batch %d: rebuild: %v", i, err)
		}
		_, again, err := Records(rebuilt, fuzzLimit)
		if err != nil {
			t.Fatalf("batch %d: rebuilt batch: %v", i, err)
		}
		for j := range recs {
			again[j].Offset += h.BaseOffset
		}
		checkRecords(t, again, recs)
		off += h.Size()
	}
	if off != len(data) {
		t.Fatalf("batches cover %d of %d bytes", off, len(data))
	}
}

// fixCRCs returns a copy of data with the CRC of every plausibly framed
// batch recomputed, or nil if there is none.
func fixCRCs(data []byte) []byte {
	var out []byte
	for off := 0; len(data)-off >= HeaderSize; {
		n := int64(int32(binary.BigEndian.Uint32(data[off+offLength:])))
		if n < minLength || n+batchPrefix > int64(len(data)-off) {
			break
		}
		if out == nil {
			out = append([]byte(nil), data...)
		}
		end := off + batchPrefix + int(n)
		fixCRC(out[off:end])
		off = end
	}
	return out
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzValidate seeds")

// TestWriteFuzzCorpus regenerates the committed seed corpus:
//
//	go test -run TestWriteFuzzCorpus -update-corpus ./gateway/records/
func TestWriteFuzzCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("needs -update-corpus")
	}
	recs := []Record{
		{Timestamp: 10, Key: []byte("k"), Value: []byte("value value value")},
		{Timestamp: 12, Key: nil, Value: []byte{}, Headers: []RecordHeader{
			{Key: "h", Value: []byte("1")}, {Key: "h", Value: nil}, {Key: "e", Value: []byte{}},
		}},
		{Timestamp: 11, Key: []byte{}, Value: nil, Attributes: 1},
	}
	build := func(b Builder) []byte { return mustBuild(t, b, recs) }
	seeds := map[string][]byte{}
	for _, c := range codecs {
		seeds["valid_"+c.String()] = build(Builder{Codec: c, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 100, Transactional: c == Zstd})
	}
	none := build(Builder{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	seeds["valid_two_batches"] = append(append([]byte(nil), none...), build(Builder{Codec: LZ4, ProducerID: -1, BaseSequence: -1})...)
	seeds["valid_control"] = build(Builder{Control: true, Transactional: true, ProducerID: 3})
	raw := none[HeaderSize:]
	seeds["valid_snappy_raw_block"] = rawBatch(int16(Snappy), 3, snappy.Encode(nil, raw))

	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), none...)
		f(b)
		return b
	}
	seeds["bad_crc"] = mut(func(b []byte) { b[offCRC]++ })
	seeds["bad_magic1"] = mut(func(b []byte) { b[offMagic] = 1 })
	seeds["bad_codec6"] = mut(func(b []byte) { b[22] |= 6; fixCRC(b) })
	seeds["bad_count"] = mut(func(b []byte) { setCount(b, 4, 3) })
	seeds["bad_offset_delta"] = mut(func(b []byte) { b[HeaderSize+3] = 2; fixCRC(b) }) // first record's offset delta 0 -> 1
	seeds["bad_truncated"] = none[:len(none)-5]
	seeds["bad_snappy_lying_length"] = rawBatch(int16(Snappy), 1, append(binary.AppendUvarint(nil, 1<<30), 0))

	dir := filepath.Join("testdata", "fuzz", "FuzzValidate")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
