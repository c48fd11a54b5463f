package iggybackend

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

// ---- helpers ----

// seqIDs returns a newID that hands out 1, 2, 3, ... as u128 ids.
func seqIDs() func() [16]byte {
	n := uint64(0)
	return func() [16]byte { n++; return iggy.MessageID(n, 0xfeed) }
}

var createTime = records.Header{}                    // CreateTime batch
var logAppendTime = records.Header{Attributes: 0x08} // LogAppendTime batch

// simulateIggy sends msgs through the real SendMessages encoder of dialect d
// (which runs EncodeUserHeaders and checks the timestamp window), then
// turns the request into the PollMessages reply a server would give,
// stamping offsets from base and the append time appendUs, and decodes it
// with DecodePollMessagesReply.
func simulateIggy(t testing.TB, d iggy.Dialect, msgs []iggy.Message, base, appendUs uint64) []iggy.PolledMessage {
	t.Helper()
	req, err := iggy.SendMessages(d, iggy.NumericID(1), iggy.NumericID(2), iggy.ToPartition(0), msgs)
	if err != nil {
		t.Fatalf("SendMessages(%v) rejected the batch: %v", d, err)
	}
	body := req.Body
	rest := body[4+binary.LittleEndian.Uint32(body):]
	reply := binary.LittleEndian.AppendUint32(nil, 0)
	reply = binary.LittleEndian.AppendUint64(reply, base+uint64(len(msgs))-1)
	reply = binary.LittleEndian.AppendUint32(reply, uint32(len(msgs)))
	le := binary.LittleEndian
	if d == iggy.Current {
		batch := bytes.Clone(rest)
		le.PutUint64(batch[8:], base)
		le.PutUint64(batch[16:], appendUs)
		reply = append(reply, batch...)
	} else {
		m := bytes.Clone(rest[16*len(msgs):])
		for i, off := 0, 0; i < len(msgs); i++ {
			le.PutUint64(m[off+24:], base+uint64(i))
			le.PutUint64(m[off+32:], appendUs)
			off += 64 + int(le.Uint32(m[off+48:])) + int(le.Uint32(m[off+52:]))
		}
		reply = append(reply, m...)
	}
	polled, err := iggy.DecodePollMessagesReply(d, reply)
	if err != nil {
		t.Fatalf("DecodePollMessagesReply(%v): %v", d, err)
	}
	if len(polled.Messages) != len(msgs) {
		t.Fatalf("polled %d messages, sent %d", len(polled.Messages), len(msgs))
	}
	for i, p := range polled.Messages {
		if p.ID != msgs[i].ID || p.Offset != base+uint64(i) || p.OriginTimestamp != msgs[i].OriginTimestamp ||
			!bytes.Equal(p.Payload, msgs[i].Payload) {
			t.Fatalf("message %d did not survive the simulated server: %+v", i, p)
		}
	}
	return polled.Messages
}

// checkWire checks what Iggy requires of each message beyond SendMessages.
func checkWire(t testing.TB, msgs []iggy.Message) {
	t.Helper()
	minTS := uint64(math.MaxUint64)
	for _, m := range msgs {
		minTS = min(minTS, m.OriginTimestamp)
	}
	for i, m := range msgs {
		if len(m.Payload) == 0 {
			t.Fatalf("message %d: empty payload", i)
		}
		if m.OriginTimestamp-minTS > math.MaxUint32 {
			t.Fatalf("message %d: origin %d outside the window from %d", i, m.OriginTimestamp, minTS)
		}
		keys := make(map[string]bool, len(m.Headers))
		for j, h := range m.Headers {
			k := string(rune(h.Key.Kind)) + string(h.Key.Value)
			if keys[k] {
				t.Fatalf("message %d: header key %q twice", i, h.Key.Value)
			}
			keys[k] = true
			for _, v := range []iggy.HeaderValue{h.Key, h.Value} {
				if v.Kind < 1 || v.Kind > 15 || len(v.Value) < 1 || len(v.Value) > 255 {
					t.Fatalf("message %d header %d: kind %d, %d bytes", i, j, v.Kind, len(v.Value))
				}
			}
		}
		b, err := iggy.EncodeUserHeaders(m.Headers)
		if err != nil {
			t.Fatalf("message %d: EncodeUserHeaders: %v", i, err)
		}
		if len(b) > iggy.MaxUserHeadersSize {
			t.Fatalf("message %d: %d bytes of user headers", i, len(b))
		}
	}
}

func eqBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func describeBytes(b []byte) string {
	if b == nil {
		return "null"
	}
	if len(b) > 24 {
		return fmt.Sprintf("%d bytes %x…", len(b), b[:12])
	}
	return fmt.Sprintf("%q", b)
}

// diffRecord compares the Kafka-visible content (not Offset/Attributes).
func diffRecord(want, got records.Record) string {
	switch {
	case !eqBytes(want.Key, got.Key):
		return fmt.Sprintf("key %s, want %s", describeBytes(got.Key), describeBytes(want.Key))
	case !eqBytes(want.Value, got.Value):
		return fmt.Sprintf("value %s, want %s", describeBytes(got.Value), describeBytes(want.Value))
	case want.Timestamp != got.Timestamp:
		return fmt.Sprintf("timestamp %d, want %d", got.Timestamp, want.Timestamp)
	case (want.Headers == nil) != (got.Headers == nil) && (len(want.Headers) != 0 || len(got.Headers) != 0):
		return "headers nil-ness differs"
	case len(want.Headers) != len(got.Headers):
		return fmt.Sprintf("%d headers, want %d", len(got.Headers), len(want.Headers))
	}
	for i := range want.Headers {
		w, g := want.Headers[i], got.Headers[i]
		if w.Key != g.Key || !eqBytes(w.Value, g.Value) {
			return fmt.Sprintf("header %d: %q=%s, want %q=%s", i, g.Key, describeBytes(g.Value), w.Key, describeBytes(w.Value))
		}
	}
	return ""
}

// encodeRoundTrip encodes recs as one batch, checks the wire constraints, runs
// the messages through the simulated server in both dialects and checks
// DecodeMessage gives back every record exactly (for LogAppendTime
// batches: with the append time as timestamp). It returns the messages.
func encodeRoundTrip(t testing.TB, recs []records.Record, hdr records.Header) []iggy.Message {
	t.Helper()
	msgs, err := EncodeBatch(recs, hdr, seqIDs())
	if err != nil {
		t.Fatalf("EncodeBatch: %v", err)
	}
	if len(msgs) != len(recs) {
		t.Fatalf("%d messages for %d records", len(msgs), len(recs))
	}
	for i := range msgs {
		if msgs[i].ID != iggy.MessageID(uint64(i+1), 0xfeed) {
			t.Fatalf("message %d: id %x not from newID in order", i, msgs[i].ID)
		}
	}
	checkWire(t, msgs)
	const appendUs = 1_750_000_000_123_456
	for _, d := range []iggy.Dialect{iggy.Current, iggy.Legacy} {
		polled := simulateIggy(t, d, msgs, 42, appendUs)
		for i, p := range polled {
			got, err := DecodeMessage(p)
			if err != nil {
				t.Fatalf("%v: record %d: DecodeMessage: %v", d, i, err)
			}
			want := recs[i]
			if hdr.LogAppendTime() {
				want.Timestamp = appendUs / 1000
			}
			if diff := diffRecord(want, got); diff != "" {
				t.Fatalf("%v: record %d: %s\nrecord: %+v\nheaders: %+v", d, i, diff, recs[i], msgs[i].Headers)
			}
			if got.Offset != int64(42+i) {
				t.Fatalf("record %d: offset %d", i, got.Offset)
			}
		}
	}
	return msgs
}

func repeatByte(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }

const tsNow = int64(1_750_000_000_000) // ms

func kafkaHeaders(kv ...any) []records.RecordHeader {
	var out []records.RecordHeader
	for i := 0; i < len(kv); i += 2 {
		var v []byte
		switch x := kv[i+1].(type) {
		case string:
			v = []byte(x)
		case []byte:
			v = x
		case nil:
		}
		out = append(out, records.RecordHeader{Key: kv[i].(string), Value: v})
	}
	return out
}

// recordShapes: every Kafka record shape the encoding must carry exactly.
var recordShapes = []struct {
	name string
	rec  records.Record
}{
	{"plain", records.Record{Value: []byte("v"), Timestamp: tsNow}},
	{"null key and value (tombstone)", records.Record{Timestamp: tsNow}},
	{"empty key and value", records.Record{Key: []byte{}, Value: []byte{}, Timestamp: tsNow}},
	{"null key, empty value", records.Record{Value: []byte{}, Timestamp: tsNow}},
	{"value is the placeholder byte", records.Record{Value: []byte{0}, Timestamp: tsNow}},
	{"key 1", records.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: tsNow}},
	{"key 255", records.Record{Key: repeatByte('k', 255), Value: []byte("v"), Timestamp: tsNow}},
	{"key 256", records.Record{Key: repeatByte('k', 256), Value: []byte("v"), Timestamp: tsNow}},
	{"key 60000", records.Record{Key: repeatByte('k', 60000), Value: repeatByte('v', 70000), Timestamp: tsNow}},
	{"key tombstone", records.Record{Key: []byte("k"), Timestamp: tsNow}},
	{"binary key", records.Record{Key: []byte{0, 0xff, 0xfe}, Value: []byte{0}, Timestamp: tsNow}},
	{"header null value", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("h", nil)}},
	{"header empty value", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("h", "")}},
	{"header value 255", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("h", repeatByte('x', 255))}},
	{"header value 256", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("h", repeatByte('x', 256))}},
	{"header value 5000", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("h", repeatByte('x', 5000))}},
	{"header name empty", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("", "x")}},
	{"header name 255", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders(strings.Repeat("n", 255), "x")}},
	{"header name 256", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders(strings.Repeat("n", 256), "x")}},
	{"header non-ASCII name", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("ключ-🔑", "значение")}},
	{"header non-UTF-8 name", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("\xff\xfe", "x")}},
	{"repeated names in order", records.Record{Value: []byte("v"), Timestamp: tsNow,
		Headers: kafkaHeaders("a", "1", "b", "2", "a", "3", "a", nil, "b", "", "a", "4")}},
	{"repeated names, many headers", records.Record{Value: []byte("v"), Timestamp: tsNow,
		Headers: kafkaHeaders("a", "1", "b", "2", "a", "3", "c", "4", "b", "5", "d", "6", "a", "7", "e", "8", "a", nil, "f", "9")}},
	{"reserved names", records.Record{Value: []byte("v"), Timestamp: tsNow,
		Headers: kafkaHeaders("kgate", "x", "kafka.key", "k", "kafka.r.0", "r", "kafka.r.", "r", "kafka.rx", "ok")}},
	{"mixed plain and envelope headers", records.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: tsNow,
		Headers: kafkaHeaders("p1", "1", "n", nil, "p2", "2", "", "e", "p3", "3", "big", repeatByte('b', 300), "p4", "4")}},
	{"all headers need the envelope", records.Record{Value: []byte("v"), Timestamp: tsNow,
		Headers: kafkaHeaders("a", nil, "b", "", "c", nil)}},
	{"many plain headers", records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: func() []records.RecordHeader {
		var h []records.RecordHeader
		for i := range 300 {
			h = append(h, records.RecordHeader{Key: fmt.Sprint("h", i), Value: repeatByte('v', 200)})
		}
		return h
	}()}},
	{"timestamp -1", records.Record{Value: []byte("v"), Timestamp: -1}},
	{"timestamp 0", records.Record{Value: []byte("v"), Timestamp: 0}},
	{"timestamp 1", records.Record{Value: []byte("v"), Timestamp: 1}},
	{"timestamp min int64", records.Record{Value: []byte("v"), Timestamp: math.MinInt64}},
	{"timestamp max int64", records.Record{Value: []byte("v"), Timestamp: math.MaxInt64}},
	{"timestamp max exact", records.Record{Value: []byte("v"), Timestamp: math.MaxInt64 / 1000}},
	{"timestamp max exact + 1", records.Record{Value: []byte("v"), Timestamp: math.MaxInt64/1000 + 1}},
	{"everything at once", records.Record{Key: []byte{}, Value: nil, Timestamp: -1,
		Headers: kafkaHeaders("", nil, "x", "", "x", "1", "kgate", repeatByte('z', 1000))}},
}

// ---- tests ----

func TestRoundTripShapes(t *testing.T) {
	for _, s := range recordShapes {
		t.Run(s.name, func(t *testing.T) {
			encodeRoundTrip(t, []records.Record{s.rec}, createTime)
			encodeRoundTrip(t, []records.Record{s.rec}, logAppendTime)
		})
	}
	t.Run("all in one batch", func(t *testing.T) {
		var recs []records.Record
		for _, s := range recordShapes {
			recs = append(recs, s.rec)
		}
		encodeRoundTrip(t, recs, createTime)
		encodeRoundTrip(t, recs, logAppendTime)
	})
}

// TestReadableLayout: what Iggy-native readers see.
func TestReadableLayout(t *testing.T) {
	enc := func(r records.Record) iggy.Message {
		t.Helper()
		m, err := EncodeBatch([]records.Record{r}, createTime, seqIDs())
		if err != nil {
			t.Fatal(err)
		}
		return m[0]
	}
	keyOf := func(h iggy.UserHeader) string { return string(h.Key.Value) }

	m := enc(records.Record{Value: []byte("hello"), Timestamp: tsNow})
	if m.Headers != nil || string(m.Payload) != "hello" || m.OriginTimestamp != uint64(tsNow)*1000 {
		t.Fatalf("plain record: %+v", m)
	}
	m = enc(records.Record{Value: []byte{0}, Timestamp: tsNow})
	if m.Headers != nil || !bytes.Equal(m.Payload, []byte{0}) {
		t.Fatalf("a real 0x00 value needs no metadata: %+v", m)
	}

	m = enc(records.Record{Key: []byte("user-1"), Value: []byte("v"), Timestamp: tsNow})
	if len(m.Headers) != 2 || keyOf(m.Headers[0]) != "kgate" || keyOf(m.Headers[1]) != "kafka.key" ||
		string(m.Headers[1].Value.Value) != "user-1" || m.Headers[1].Value.Kind != iggy.KindRaw ||
		!bytes.Equal(m.Headers[0].Value.Value, []byte{1, flagKeyHeader, 0, 0}) {
		t.Fatalf("key record: %+v", m.Headers)
	}

	// Unique, fitting headers are exactly the user headers: no marker.
	h := kafkaHeaders("traceparent", "00-abc-01", "ключ", "v", "\xff", "raw-name")
	m = enc(records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: h})
	if len(m.Headers) != 3 {
		t.Fatalf("plain headers: %+v", m.Headers)
	}
	for i, uh := range m.Headers {
		wantKind := iggy.KindString
		if i == 2 {
			wantKind = iggy.KindRaw // not UTF-8
		}
		if keyOf(uh) != h[i].Key || uh.Key.Kind != wantKind || uh.Value.Kind != iggy.KindRaw || !bytes.Equal(uh.Value.Value, h[i].Value) {
			t.Fatalf("header %d: %+v", i, uh)
		}
	}

	// A repeated name: first occurrence plain, later ones in the envelope.
	m = enc(records.Record{Value: []byte("v"), Timestamp: tsNow, Headers: kafkaHeaders("a", "1", "a", "2", "b", "3")})
	var keys []string
	for _, uh := range m.Headers {
		keys = append(keys, keyOf(uh))
	}
	if got := strings.Join(keys, ","); got != "kgate,kafka.r.0,a,b" {
		t.Fatalf("repeated names: keys %s", got)
	}

	// Timestamps not representable as an origin go to the envelope.
	for _, ts := range []int64{-1, 0, math.MaxInt64} {
		m = enc(records.Record{Value: []byte("v"), Timestamp: ts})
		if len(m.Headers) != 2 || m.Headers[0].Value.Value[1] != flagTimestamp {
			t.Fatalf("timestamp %d: %+v", ts, m.Headers)
		}
	}
	// LogAppendTime: nothing carried, origin 0.
	ms, err := EncodeBatch([]records.Record{{Value: []byte("v"), Timestamp: tsNow}}, logAppendTime, seqIDs())
	if err != nil || ms[0].Headers != nil || ms[0].OriginTimestamp != 0 {
		t.Fatalf("LogAppendTime: %+v %v", ms, err)
	}
}

// TestGolden pins the bytes of the worked examples in docs/iggy.md.
func TestGolden(t *testing.T) {
	cases := []struct {
		rec    records.Record
		origin uint64
		hex    string
	}{
		{
			records.Record{Key: []byte("k"), Value: nil, Timestamp: -1, Headers: kafkaHeaders("h", nil, "id", "7")},
			0,
			"02050000006b67617465" + "010400000001350001" +
				"02090000006b61666b612e6b6579" + "01010000006b" +
				"02090000006b61666b612e722e30" + "0106000000010100016800" +
				"0202000000" + "6964" + "010100000037",
		},
		{
			records.Record{Key: []byte("order-17"), Value: []byte("{}"), Timestamp: 1_750_000_000_000},
			1_750_000_000_000_000,
			"02050000006b67617465" + "010400000001010000" +
				"02090000006b61666b612e6b6579" + "01080000006f726465722d3137",
		},
	}
	for i, c := range cases {
		msgs, err := EncodeBatch([]records.Record{c.rec}, createTime, seqIDs())
		if err != nil {
			t.Fatal(err)
		}
		b, err := iggy.EncodeUserHeaders(msgs[0].Headers)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.hex || msgs[0].OriginTimestamp != c.origin {
			t.Errorf("example %d: headers\n got %s\nwant %s\norigin %d", i, got, c.hex, msgs[0].OriginTimestamp)
		}
	}
}

func TestTimestampWindow(t *testing.T) {
	const h = int64(3_600_000) // 1 h in ms
	recs := []records.Record{
		{Value: []byte("a"), Timestamp: tsNow},       // outlier early
		{Value: []byte("b"), Timestamp: tsNow + 3*h}, // window
		{Value: []byte("c"), Timestamp: -1},          // no timestamp
		{Value: []byte("d"), Timestamp: tsNow + 3*h + 1},
		{Value: []byte("e"), Timestamp: 0},
		{Value: []byte("f"), Timestamp: tsNow + 4*h},   // window (71.6 min holds 1 h)
		{Value: []byte("g"), Timestamp: tsNow + 100*h}, // outlier late
		{Value: []byte("h"), Timestamp: math.MaxInt64},
	}
	msgs := encodeRoundTrip(t, recs, createTime)
	w := uint64(tsNow+3*h) * 1000
	for i, m := range msgs {
		inWindow := i == 1 || i == 3 || i == 5
		if inWindow != (m.Headers == nil) {
			t.Errorf("record %d: headers %+v", i, m.Headers)
		}
		if inWindow && m.OriginTimestamp != uint64(recs[i].Timestamp)*1000 {
			t.Errorf("record %d: origin %d", i, m.OriginTimestamp)
		}
		if !inWindow && m.OriginTimestamp != w && m.OriginTimestamp != w+math.MaxUint32 {
			t.Errorf("record %d: origin %d not clamped to the window", i, m.OriginTimestamp)
		}
	}
	// The window starts at the earliest of equally good ones.
	msgs = encodeRoundTrip(t, []records.Record{{Value: []byte("x"), Timestamp: tsNow + 5*h}, {Value: []byte("y"), Timestamp: tsNow}}, createTime)
	if msgs[1].Headers != nil || msgs[0].Headers == nil || msgs[0].OriginTimestamp != uint64(tsNow)*1000+math.MaxUint32 {
		t.Fatalf("tie: %+v", msgs)
	}
	// Nothing representable: all origins 0, all timestamps in the envelope.
	msgs = encodeRoundTrip(t, []records.Record{{Value: []byte("x"), Timestamp: -1}, {Value: []byte("y"), Timestamp: 0}}, createTime)
	for _, m := range msgs {
		if m.OriginTimestamp != 0 || m.Headers == nil {
			t.Fatalf("no window: %+v", m)
		}
	}
}

func TestRecordTooLarge(t *testing.T) {
	cases := map[string]records.Record{
		"key":          {Key: repeatByte('k', 100_000), Value: []byte("v")},
		"header value": {Value: []byte("v"), Headers: kafkaHeaders("h", repeatByte('v', 100_000))},
		"many headers": {Value: []byte("v"), Headers: func() []records.RecordHeader {
			var h []records.RecordHeader
			for range 20_000 {
				h = append(h, records.RecordHeader{Key: "name", Value: []byte("value")})
			}
			return h
		}()},
	}
	for name, r := range cases {
		recs := []records.Record{{Value: []byte("ok"), Timestamp: tsNow}, r}
		_, err := EncodeBatch(recs, createTime, seqIDs())
		if !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "record 1") {
			t.Errorf("%s: %v", name, err)
		}
	}
	big := make([]byte, iggy.MaxPayloadSize+1)
	if _, err := EncodeBatch([]records.Record{{Value: big}}, createTime, seqIDs()); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("payload: %v", err)
	}

	// The longest key that fits (in the envelope: 100,000 bytes of user
	// headers hold the marker and 363 chunk pairs carrying a 3-byte
	// uvarint length and the key; docs/iggy.md quotes this number).
	r := records.Record{Key: repeatByte('k', 92_465), Value: []byte("v"), Timestamp: tsNow}
	encodeRoundTrip(t, []records.Record{r}, createTime)
	r.Key = append(r.Key, 'k')
	if _, err := EncodeBatch([]records.Record{r}, createTime, seqIDs()); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("key one byte over the limit: %v", err)
	}

	// Too big as readable headers, fits in the compact layout.
	var many []records.RecordHeader
	for i := range 7000 {
		many = append(many, records.RecordHeader{Key: fmt.Sprintf("%04d", i), Value: []byte("v")})
	}
	r = records.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: tsNow, Headers: many}
	msgs := encodeRoundTrip(t, []records.Record{r}, createTime)
	flags := msgs[0].Headers[0].Value.Value[1]
	if flags != flagKeyEnv|flagHeaders {
		t.Fatalf("compact layout flags %#x", flags)
	}
	for _, h := range msgs[0].Headers[1:] {
		if !strings.HasPrefix(string(h.Key.Value), "kafka.r.") {
			t.Fatalf("compact layout has a plain header %q", h.Key.Value)
		}
	}
}

func TestDecodeNative(t *testing.T) {
	le := binary.LittleEndian
	u128 := make([]byte, 16)
	u128[0] = 1
	i128 := bytes.Repeat([]byte{0xff}, 16) // -1
	hs := []iggy.UserHeader{
		{Key: iggy.HeaderValue{Kind: iggy.KindString, Value: []byte("content-type")}, Value: iggy.HeaderValue{Kind: iggy.KindString, Value: []byte("json")}},
		{Key: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte{0xff, 'x'}}, Value: iggy.HeaderValue{Kind: iggy.KindUint32, Value: le.AppendUint32(nil, 7)}},
		{Key: iggy.HeaderValue{Kind: 6, Value: le.AppendUint32(nil, uint32(0xffffffff))}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("int32")}},
		{Key: iggy.HeaderValue{Kind: iggy.KindBool, Value: []byte{1}}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("b")}},
		{Key: iggy.HeaderValue{Kind: 13, Value: u128}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("u128")}},
		{Key: iggy.HeaderValue{Kind: 8, Value: i128}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("i128")}},
		{Key: iggy.HeaderValue{Kind: iggy.KindFloat64, Value: le.AppendUint64(nil, math.Float64bits(1.5))}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("f")}},
		{Key: iggy.HeaderValue{Kind: 14, Value: le.AppendUint32(nil, math.Float32bits(0.25))}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("f32")}},
		{Key: iggy.HeaderValue{Kind: 6, Value: []byte{1, 2, 3}}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("bad")}},
		{Key: iggy.HeaderValue{Kind: iggy.KindUint64, Value: le.AppendUint64(nil, math.MaxUint64)}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("u64")}},
		// What the reference Rust gateway writes is native to us.
		{Key: iggy.HeaderValue{Kind: iggy.KindString, Value: []byte("kafka.key")}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("k")}},
		{Key: iggy.HeaderValue{Kind: iggy.KindString, Value: []byte("content-type")}, Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte("again")}},
	}
	want := []struct{ k, v string }{
		{"content-type", "json"}, {"\xffx", "\x07\x00\x00\x00"}, {"-1", "int32"}, {"true", "b"},
		{"1", "u128"}, {"-1", "i128"}, {"1.5", "f"}, {"0.25", "f32"}, {"0x010203", "bad"},
		{"18446744073709551615", "u64"}, {"kafka.key", "k"}, {"content-type", "again"},
	}
	block, err := iggy.EncodeUserHeaders(hs)
	if err != nil {
		t.Fatal(err)
	}
	m := iggy.PolledMessage{Offset: 9, Timestamp: 2_000_000_999, OriginTimestamp: 1_750_000_000_123_999, Payload: []byte("p"), UserHeaders: block}
	for _, dec := range []func(iggy.PolledMessage) (records.Record, error){
		DecodeMessage,
		func(m iggy.PolledMessage) (records.Record, error) { return DecodeNative(m), nil },
	} {
		r, err := dec(m)
		if err != nil {
			t.Fatal(err)
		}
		if r.Key != nil || string(r.Value) != "p" || r.Timestamp != 1_750_000_000_123 || r.Offset != 9 || len(r.Headers) != len(want) {
			t.Fatalf("native: %+v", r)
		}
		for i, w := range want {
			if r.Headers[i].Key != w.k || string(r.Headers[i].Value) != w.v {
				t.Errorf("header %d: %q=%q, want %q=%q", i, r.Headers[i].Key, r.Headers[i].Value, w.k, w.v)
			}
		}
	}

	// Origin 0: the append time; no headers: nil; empty payload: empty value.
	r, err := DecodeMessage(iggy.PolledMessage{Timestamp: 2_000_000_999})
	if err != nil || r.Timestamp != 2_000_000 || r.Headers != nil || r.Value == nil || len(r.Value) != 0 || r.Key != nil {
		t.Fatalf("bare message: %+v %v", r, err)
	}
}

// kgateMessage builds a polled message from the given user headers.
func kgateMessage(t *testing.T, payload []byte, pairs ...iggy.UserHeader) iggy.PolledMessage {
	t.Helper()
	b, err := iggy.EncodeUserHeaders(pairs)
	if err != nil {
		t.Fatal(err)
	}
	return iggy.PolledMessage{OriginTimestamp: 5_000, Payload: payload, UserHeaders: b}
}

func strPair(k string, kind uint8, v []byte) iggy.UserHeader {
	return iggy.UserHeader{Key: iggy.HeaderValue{Kind: iggy.KindString, Value: []byte(k)}, Value: iggy.HeaderValue{Kind: kind, Value: v}}
}

func markerPair(flags byte, chunks uint16) iggy.UserHeader {
	return strPair("kgate", iggy.KindRaw, []byte{1, flags, byte(chunks >> 8), byte(chunks)})
}

func TestDecodeMalformed(t *testing.T) {
	raw := iggy.KindRaw
	cases := map[string]iggy.PolledMessage{
		"marker kind":          kgateMessage(t, []byte("v"), strPair("kgate", iggy.KindString, []byte{1, 0, 0, 0})),
		"marker length":        kgateMessage(t, []byte("v"), strPair("kgate", raw, []byte{1, 0, 0})),
		"version 2":            kgateMessage(t, []byte("v"), strPair("kgate", raw, []byte{2, 0, 0, 0})),
		"version 0":            kgateMessage(t, []byte("v"), strPair("kgate", raw, []byte{0, 0, 0, 0})),
		"txn and control":      kgateMessage(t, []byte("v"), markerPair(flagTxn|flagControl, 0)),
		"both key flags":       kgateMessage(t, []byte("v"), markerPair(flagKeyHeader|flagKeyEnv, 1), strPair("kafka.key", raw, []byte("k")), strPair("kafka.r.0", raw, []byte{0})),
		"null and empty":       kgateMessage(t, []byte{0}, markerPair(flagValueNull|flagValueEmpty, 0)),
		"envelope flag only":   kgateMessage(t, []byte("v"), markerPair(flagTimestamp, 0)),
		"chunks without flag":  kgateMessage(t, []byte("v"), markerPair(0, 1), strPair("kafka.r.0", raw, []byte{0})),
		"missing kafka.key":    kgateMessage(t, []byte("v"), markerPair(flagKeyHeader, 0)),
		"kafka.key wrong name": kgateMessage(t, []byte("v"), markerPair(flagKeyHeader, 0), strPair("kafka.kez", raw, []byte("k"))),
		"kafka.key wrong kind": kgateMessage(t, []byte("v"), markerPair(flagKeyHeader, 0), strPair("kafka.key", iggy.KindString, []byte("k"))),
		"chunk missing":        kgateMessage(t, []byte("v"), markerPair(flagTimestamp, 2), strPair("kafka.r.0", raw, []byte{2})),
		"chunk misnamed":       kgateMessage(t, []byte("v"), markerPair(flagTimestamp, 1), strPair("kafka.r.1", raw, []byte{2})),
		"chunk kind":           kgateMessage(t, []byte("v"), markerPair(flagTimestamp, 1), strPair("kafka.r.0", iggy.KindString, []byte{2})),
		"bad placeholder":      kgateMessage(t, []byte("vv"), markerPair(flagValueNull, 0)),
		"placeholder not 0":    kgateMessage(t, []byte{1}, markerPair(flagValueEmpty, 0)),
		"trailing envelope":    kgateMessage(t, []byte("v"), markerPair(flagTimestamp, 1), strPair("kafka.r.0", raw, []byte{2, 0})),
		"truncated varint":     kgateMessage(t, []byte("v"), markerPair(flagTimestamp, 1), strPair("kafka.r.0", raw, []byte{0x80})),
		"key length":           kgateMessage(t, []byte("v"), markerPair(flagKeyEnv, 1), strPair("kafka.r.0", raw, []byte{5, 'a'})),
		"zero env headers":     kgateMessage(t, []byte("v"), markerPair(flagHeaders, 1), strPair("kafka.r.0", raw, []byte{0})),
		"header count":         kgateMessage(t, []byte("v"), markerPair(flagHeaders, 1), strPair("kafka.r.0", raw, []byte{9, 0, 1, 'h', 0})),
		"index too big":        kgateMessage(t, []byte("v"), markerPair(flagHeaders, 1), strPair("kafka.r.0", raw, []byte{1, 1, 1, 'h', 0})),
		"index gap":            kgateMessage(t, []byte("v"), markerPair(flagHeaders, 1), strPair("kafka.r.0", raw, []byte{2, 1, 1, 'h', 0, 1, 1, 'h', 0})),
		"index order":          kgateMessage(t, []byte("v"), markerPair(flagHeaders, 1), strPair("kafka.r.0", raw, []byte{2, 1, 1, 'h', 0, 0, 1, 'h', 0})),
		"header value length":  kgateMessage(t, []byte("v"), markerPair(flagHeaders, 1), strPair("kafka.r.0", raw, []byte{1, 0, 1, 'h', 9, 'x'})),
		"bad TLV":              {Payload: []byte("v"), UserHeaders: []byte{2, 5, 0, 0, 0, 'k'}},
	}
	for name, m := range cases {
		r, err := DecodeMessage(m)
		if !errors.Is(err, ErrMalformedMessage) {
			t.Errorf("%s: got %+v, %v", name, r, err)
		}
		n := DecodeNative(m) // must not panic; serves the message as native
		if string(n.Value) != string(m.Payload) || n.Key != nil {
			t.Errorf("%s: native %+v", name, n)
		}
	}

	// Well-formed hand-built messages decode (the decoder is not
	// stricter than the format), e.g. an empty marker and odd chunk sizes.
	r, err := DecodeMessage(kgateMessage(t, []byte("v"), markerPair(0, 0), strPair("kgate", raw, []byte("x"))))
	if err != nil || len(r.Headers) != 1 || r.Headers[0].Key != "kgate" || r.Timestamp != 5 {
		t.Fatalf("empty marker: %+v %v", r, err)
	}
	r, err = DecodeMessage(kgateMessage(t, []byte("v"), markerPair(flagKeyEnv|flagTimestamp, 2),
		strPair("kafka.r.0", raw, []byte{2, 'a'}), strPair("kafka.r.1", raw, []byte{'b', 0x03})))
	if err != nil || string(r.Key) != "ab" || r.Timestamp != -2 {
		t.Fatalf("split chunks: %+v %v", r, err)
	}
}

func TestBuildBatch(t *testing.T) {
	var recs []records.Record
	for i, s := range recordShapes {
		r := s.rec
		if i%3 == 0 {
			r.Timestamp = 0 // Builder's "use BaseTimestamp" must keep 0
		}
		recs = append(recs, r)
	}
	msgs, err := EncodeBatch(recs, createTime, seqIDs())
	if err != nil {
		t.Fatal(err)
	}
	polled := simulateIggy(t, iggy.Current, msgs, 1000, 1_750_000_000_000_000)

	check := func(batch []byte, n int, want []records.Record, base int64) {
		t.Helper()
		h, got, err := records.Records(batch, math.MaxInt32)
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		if h.Size() != len(batch) || len(got) != n || h.BaseOffset != base || h.ProducerID != -1 || h.ProducerEpoch != -1 ||
			h.BaseSequence != -1 || h.Compression() != records.None || h.LogAppendTime() || h.Transactional() {
			t.Fatalf("header %+v, %d records (want %d)", h, len(got), n)
		}
		maxTS := int64(math.MinInt64)
		for i := range got {
			if got[i].Offset != base+int64(i) {
				t.Fatalf("record %d: offset %d", i, got[i].Offset)
			}
			if diff := diffRecord(want[i], got[i]); diff != "" {
				t.Fatalf("record %d: %s", i, diff)
			}
			maxTS = max(maxTS, got[i].Timestamp)
		}
		if h.MaxTimestamp != maxTS {
			t.Fatalf("max timestamp %d, want %d", h.MaxTimestamp, maxTS)
		}
	}

	full, n, err := BuildBatch(polled, math.MaxInt32)
	if err != nil || n != len(polled) {
		t.Fatalf("BuildBatch: %d, %v", n, err)
	}
	check(full, n, recs, 1000)
	size := records.HeaderSize
	for i := range recs {
		size += records.EncodedSize(&recs[i], recs[i].Timestamp-recs[0].Timestamp, i)
	}
	if size != len(full) {
		t.Fatalf("predicted %d bytes, built %d", size, len(full))
	}

	// maxBytes: never exceeded unless one message; the prefix is maximal.
	prev := 0
	for mb := -1; mb <= len(full)+1; mb += 1 + mb/20 {
		batch, n, err := BuildBatch(polled, mb)
		if err != nil {
			t.Fatal(err)
		}
		if n < 1 || n < prev || (len(batch) > mb && n != 1) {
			t.Fatalf("maxBytes %d: %d messages, %d bytes", mb, n, len(batch))
		}
		if n < len(polled) {
			more, _, _ := BuildBatch(polled[:n+1], math.MaxInt32)
			if len(more) <= mb {
				t.Fatalf("maxBytes %d: stopped at %d messages though %d fit in %d bytes", mb, n, n+1, len(more))
			}
		}
		check(batch, n, recs, 1000)
		prev = n
	}

	// Stop at a gap.
	gap := append([]iggy.PolledMessage{}, polled[:3]...)
	gap[2].Offset++
	_, n, _ = BuildBatch(gap, math.MaxInt32)
	if n != 2 {
		t.Fatalf("gap: %d messages", n)
	}
	// Empty input.
	if b, n, err := BuildBatch(nil, 100); b != nil || n != 0 || err != nil {
		t.Fatalf("empty: %v %d %v", b, n, err)
	}
	// A malformed kgate message is served as native.
	bad := kgateMessage(t, []byte("payload"), markerPair(0x80, 0))
	bad.Offset = 7
	batch, n, err := BuildBatch([]iggy.PolledMessage{bad}, 0)
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	check(batch, 1, []records.Record{DecodeNative(bad)}, 7)

	// LogAppendTime records come back with the Iggy append time.
	msgs, err = EncodeBatch(recs[:3], logAppendTime, seqIDs())
	if err != nil {
		t.Fatal(err)
	}
	batch, n, err = BuildBatch(simulateIggy(t, iggy.Legacy, msgs, 0, 1_750_000_000_777_000), math.MaxInt32)
	if err != nil || n != 3 {
		t.Fatal(n, err)
	}
	want := append([]records.Record{}, recs[:3]...)
	for i := range want {
		want[i].Timestamp = 1_750_000_000_777
	}
	check(batch, 3, want, 0)
}

// ---- property test ----

var namePool = []string{"a", "b", "trace", "", "kgate", "kafka.key", "kafka.r.3", "ключ", "\xfe",
	strings.Repeat("n", 255), strings.Repeat("n", 256)}

func randBytes(rng *rand.Rand) []byte {
	switch rng.IntN(10) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		return []byte{0}
	case 3:
		return repeatByte(byte(rng.IntN(256)), []int{254, 255, 256, 511, 600}[rng.IntN(5)])
	case 4:
		b := make([]byte, rng.IntN(3000))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	b := make([]byte, 1+rng.IntN(40))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func randRecord(rng *rand.Rand, base int64) records.Record {
	r := records.Record{Key: randBytes(rng), Value: randBytes(rng)}
	switch rng.IntN(8) {
	case 0:
		r.Timestamp = []int64{-1, 0, 1, math.MaxInt64, math.MinInt64, math.MaxInt64 / 1000, math.MaxInt64/1000 + 1}[rng.IntN(7)]
	case 1:
		r.Timestamp = int64(rng.Uint64())
	case 2:
		r.Timestamp = base + rng.Int64N(10*3_600_000) // hours apart
	default:
		r.Timestamp = base + rng.Int64N(60_000)
	}
	for range rng.IntN(7) {
		name := namePool[rng.IntN(len(namePool))]
		if rng.IntN(3) == 0 {
			name = string(randBytes(rng))
		}
		r.Headers = append(r.Headers, records.RecordHeader{Key: name, Value: randBytes(rng)})
	}
	return r
}

func TestRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	iters := 400
	if testing.Short() {
		iters = 50
	}
	for i := range iters {
		recs := make([]records.Record, 1+rng.IntN(8))
		for j := range recs {
			recs[j] = randRecord(rng, tsNow)
		}
		hdr := createTime
		if i%7 == 0 {
			hdr = logAppendTime
		}
		encodeRoundTrip(t, recs, hdr)
		// Deterministic: the same input gives the same messages.
		a, _ := EncodeBatch(recs, hdr, seqIDs())
		b, _ := EncodeBatch(recs, hdr, seqIDs())
		for j := range a {
			ha, _ := iggy.EncodeUserHeaders(a[j].Headers)
			hb, _ := iggy.EncodeUserHeaders(b[j].Headers)
			if !bytes.Equal(ha, hb) || a[j].OriginTimestamp != b[j].OriginTimestamp || !bytes.Equal(a[j].Payload, b[j].Payload) {
				t.Fatalf("iteration %d: not deterministic", i)
			}
		}
		// Fetch side: the records survive BuildBatch too.
		if hdr == createTime {
			batch, n, err := BuildBatch(simulateIggy(t, iggy.Current, mustEncode(t, recs), 5, 1), math.MaxInt32)
			if err != nil || n != len(recs) {
				t.Fatal(n, err)
			}
			_, got, err := records.Records(batch, math.MaxInt32)
			if err != nil {
				t.Fatal(err)
			}
			for j := range recs {
				if diff := diffRecord(recs[j], got[j]); diff != "" {
					t.Fatalf("iteration %d record %d via BuildBatch: %s", i, j, diff)
				}
			}
		}
	}
}

func mustEncode(t testing.TB, recs []records.Record) []iggy.Message {
	t.Helper()
	msgs, err := EncodeBatch(recs, createTime, seqIDs())
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// Transactional batches keep their producer id, epoch, sequence and the
// transactional bit through Iggy, a marker comes back as a control batch of
// its own, and batches of different classes are never merged.
func TestTransactionalBatchesAndMarkers(t *testing.T) {
	txnHdr := records.Header{Attributes: 0x10}
	ts := int64(1_750_000_000_000)
	plain := []records.Record{{Timestamp: ts, Value: []byte("p0")}, {Timestamp: ts, Key: []byte("k"), Value: []byte("p1")}}
	txnRecs := []records.Record{{Timestamp: ts, Value: []byte("t0")}, {Timestamp: ts + 1, Key: []byte("k"), Value: []byte("t1")},
		{Timestamp: ts + 2, Value: nil}}
	ids := newIDSource()
	for _, d := range []iggy.Dialect{iggy.Current, iggy.Legacy} {
		var msgs []iggy.Message
		m, err := EncodeBatch(plain, createTime, ids.forBatch(gateway.ProduceBatch{ProducerID: -1}))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m...)
		m, err = EncodeBatch(txnRecs, txnHdr, ids.forBatch(gateway.ProduceBatch{ProducerID: 7, ProducerEpoch: 2, BaseSequence: 5}))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m...)
		marker, err := EncodeMarker(7, 2, false, 0, ts+3)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, marker)
		commit, err := EncodeMarker(7, 2, true, 0, ts+4)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, commit)
		m, err = EncodeBatch(plain[:1], createTime, ids.forBatch(gateway.ProduceBatch{ProducerID: -1}))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m...)
		polled := simulateIggy(t, d, msgs, 100, uint64(ts)*1000)

		type want struct {
			base       int64
			n          int
			pid        int64
			epoch      int16
			seq        int32
			txn, ctl   bool
			recs       []records.Record
			markerType byte
		}
		wants := []want{
			{base: 100, n: 2, pid: -1, epoch: -1, seq: -1, recs: plain},
			{base: 102, n: 3, pid: 7, epoch: 2, seq: 5, txn: true, recs: txnRecs},
			{base: 105, n: 1, pid: 7, epoch: 2, seq: -1, txn: true, ctl: true, markerType: 0},
			{base: 106, n: 1, pid: 7, epoch: 2, seq: -1, txn: true, ctl: true, markerType: 1},
			{base: 107, n: 1, pid: -1, epoch: -1, seq: -1, recs: plain[:1]},
		}
		rest := polled
		for i, w := range wants {
			batch, n, err := BuildBatch(rest, math.MaxInt32)
			if err != nil {
				t.Fatalf("%v batch %d: %v", d, i, err)
			}
			rest = rest[n:]
			h, err := records.ParseHeader(batch)
			if err != nil || h.Size() != len(batch) {
				t.Fatalf("%v batch %d: %v", d, i, err)
			}
			if w.ctl {
				// A control batch (producer id, no sequence): as Kafka's
				// clients read it.
				var kb kmsg.RecordBatch
				if err := kb.ReadFrom(batch); err != nil || kb.NumRecords != 1 {
					t.Fatalf("%v marker %d: %v", d, i, err)
				}
				var r kmsg.Record
				if err := r.ReadFrom(kb.Records); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(r.Key, []byte{0, 0, 0, w.markerType}) || !bytes.Equal(r.Value, []byte{0, 0, 0, 0, 0, 0}) {
					t.Fatalf("%v marker %d: key %x value %x", d, i, r.Key, r.Value)
				}
			}
			var got []records.Record
			if !w.ctl {
				if _, got, err = records.Records(batch, math.MaxInt32); err != nil {
					t.Fatal(err)
				}
			}
			if h.BaseOffset != w.base || int(h.NumRecords) != w.n || h.ProducerID != w.pid || h.ProducerEpoch != w.epoch ||
				h.BaseSequence != w.seq || h.Transactional() != w.txn || h.Control() != w.ctl {
				t.Fatalf("%v batch %d: header %+v with %d records, want %+v", d, i, h, len(got), w)
			}
			for j := range got {
				if diff := diffRecord(w.recs[j], got[j]); diff != "" {
					t.Fatalf("%v batch %d record %d: %s", d, i, j, diff)
				}
			}
		}
		if len(rest) != 0 {
			t.Fatalf("%v: %d messages left", d, len(rest))
		}

		// What an Iggy client sees of a marker: a 6-byte payload and the
		// kgate header with the CONTROL flag (0x80) and the key.
		nat := DecodeNative(polled[5])
		if len(nat.Value) != 6 || len(nat.Headers) != 2 || nat.Headers[0].Key != "kgate" || nat.Headers[0].Value[1]&0x80 == 0 ||
			nat.Headers[1].Key != "kafka.key" {
			t.Fatalf("%v: native view of a marker %+v", d, nat)
		}
		// and of a transactional record: its value, and the kgate header
		// with the TXN flag (0x40).
		nat = DecodeNative(polled[2])
		if string(nat.Value) != "t0" || len(nat.Headers) != 1 || nat.Headers[0].Key != "kgate" || nat.Headers[0].Value[1] != 0x40 {
			t.Fatalf("%v: native view of a transactional record %+v", d, nat)
		}
	}
}

// A message that claims to be a marker or a transactional record but whose
// id or contents do not fit is served as a plain native record, never as
// a control batch.
func TestMisflaggedMessagesAreServedNatively(t *testing.T) {
	marker, err := EncodeMarker(7, 2, true, 0, 1_750_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	marker.ID = iggy.MessageID(1, 2) // not a marker id
	txn, err := EncodeBatch([]records.Record{{Timestamp: 1_750_000_000_000, Value: []byte("v")}}, records.Header{Attributes: 0x10}, seqIDs())
	if err != nil {
		t.Fatal(err)
	}
	polled := simulateIggy(t, iggy.Current, append([]iggy.Message{marker}, txn...), 0, 1)
	for i := range polled {
		batch, n, err := BuildBatch(polled[i:i+1], math.MaxInt32)
		if err != nil || n != 1 {
			t.Fatalf("message %d: %d, %v", i, n, err)
		}
		h, recs, err := records.Records(batch, math.MaxInt32)
		if err != nil || h.Control() || h.Transactional() || h.ProducerID != -1 || len(recs) != 1 {
			t.Fatalf("message %d: %+v %v", i, h, err)
		}
		if !bytes.Equal(recs[0].Value, polled[i].Payload) {
			t.Fatalf("message %d: value %q", i, recs[0].Value)
		}
	}
}
