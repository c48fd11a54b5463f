package iggy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/zeebo/xxh3"
)

// Bytes below are derived by hand from the field tables (§4, §5, §7, §13).

func TestCreateStream(t *testing.T) {
	req, err := CreateStream("kgate")
	if err != nil {
		t.Fatal(err)
	}
	body := hx(t, "05 6b 67 61 74 65")
	eqBytes(t, "body", req.Body, body)
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy", got, hx(t, "0a 00 00 00 ca 00 00 00 05 6b 67 61 74 65"))
	got, _ = req.Frame(Current, RequestHeader{Client: testClient, Request: 2, Session: 7})
	want := append(header256(t, map[int]string{
		48: "06 01 00 00", 60: "05", 128: testClientHex,
		168: "02 00 00 00 00 00 00 00", 176: "80", 184: "07 00 00 00 00 00 00 00",
	}), body...)
	eqBytes(t, "current", got, want)

	// Stream: id 3, created 0x10, topics 0, size 0, msgs 0, "kgate".
	stream := "03000000 10 00 00 00 00 00 00 00 00000000 00*8 00*8 05 6b 67 61 74 65"
	s, err := DecodeCreateStreamReply(Current, hx(t, "00000000 "+stream+" 00000000"))
	if err != nil || s.ID != 3 || s.CreatedAt != 16 || s.Name != "kgate" || len(s.Options) != 0 {
		t.Fatal(err, s)
	}
	s, err = DecodeCreateStreamReply(Legacy, hx(t, stream))
	if err != nil || s.ID != 3 || s.Name != "kgate" {
		t.Fatal(err, s)
	}
	// Duplicate name via the result section.
	if _, err := DecodeCreateStreamReply(Current, hx(t, "01000000 00000000 f4030000")); !errors.Is(err, ErrStreamAlreadyExists) {
		t.Fatal(err)
	}
	// Legacy rejects the options suffix as trailing bytes, Current requires it.
	if _, err := DecodeCreateStreamReply(Legacy, hx(t, stream+" 00000000")); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	if _, err := DecodeCreateStreamReply(Current, hx(t, "00000000 "+stream)); !errors.Is(err, ErrTruncated) {
		t.Fatal(err)
	}
	if _, err := CreateStream(""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestGetStreams(t *testing.T) {
	req := GetStreams()
	got, _ := req.Frame(Current, RequestHeader{Client: testClient, Request: 3, Session: 7})
	eqBytes(t, "current", got, header256(t, map[int]string{
		48: "00 01 00 00", 60: "05", 128: testClientHex, 168: "03", 176: "02", 184: "07", 196: "c9 00 00 00",
	}))
	got, _ = req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy", got, hx(t, "04 00 00 00 c9 00 00 00"))

	s0 := "00000000 01 00*7 02000000 64 00*7 05 00*7 01 61"
	s1 := "01000000 02 00*7 00000000 00*8 00*8 02 62 63"
	ss, err := DecodeGetStreamsReply(Legacy, hx(t, s0+" "+s1))
	if err != nil || len(ss) != 2 || ss[0].Name != "a" || ss[0].TopicsCount != 2 || ss[0].SizeBytes != 100 || ss[0].MessagesCount != 5 || ss[1].ID != 1 || ss[1].Name != "bc" {
		t.Fatal(err, ss)
	}
	// Current adds [opts_len u32][opts]; here a 4-byte dummy block.
	ss, err = DecodeGetStreamsReply(Current, hx(t, s0+" 04000000 aabbccdd "+s1+" 00000000"))
	if err != nil || len(ss) != 2 || len(ss[0].Options) != 4 || ss[1].Name != "bc" {
		t.Fatal(err, ss)
	}
	if ss, err := DecodeGetStreamsReply(Current, nil); err != nil || len(ss) != 0 {
		t.Fatal(err, ss)
	}
	if _, err := DecodeGetStreamsReply(Current, hx(t, s0+" ff000000")); !errors.Is(err, ErrTruncated) {
		t.Fatal(err)
	}
}

func TestCreateTopic(t *testing.T) {
	cfg := TopicConfig{Name: "t", PartitionsCount: 3, Compression: CompressionGzip, MessageExpiry: 3_600_000_000, MaxTopicSize: math.MaxUint64, ReplicationFactor: 1}
	req, err := CreateTopic(Current, NumericID(0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	eqBytes(t, "current", req.Body, hx(t, `01 04 00000000 03000000 01 74
02 15000000 636f6d7072657373696f6e5f616c676f726974686d 09 01000000 02
02 0e000000 6d6573736167655f657870697279 0c 08000000 00 a4 93 d6 00 00 00 00
02 0e000000 6d61785f746f7069635f73697a65 0c 08000000 ff ff ff ff ff ff ff ff`))
	if req.Operation != OpCreateTopic {
		t.Fatal(req.Operation)
	}
	// Defaults: no options at all.
	req, _ = CreateTopic(Current, NamedID("s"), TopicConfig{Name: "t"})
	eqBytes(t, "current defaults", req.Body, hx(t, "02 01 73 00000000 01 74"))

	req, err = CreateTopic(Legacy, NumericID(0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy", got, hx(t, `22 00 00 00 2e 01 00 00
01 04 00000000 03000000 02 00 a4 93 d6 00 00 00 00 ff ff ff ff ff ff ff ff 01 01 74`))
	req, _ = CreateTopic(Legacy, NumericID(0), TopicConfig{Name: "t"})
	eqBytes(t, "legacy defaults", req.Body, hx(t, "01 04 00000000 00000000 01 00*8 00*8 00 01 74"))

	for _, bad := range []TopicConfig{{Name: ""}, {Name: "t", PartitionsCount: 1001}, {Name: "t", Compression: 3}} {
		if _, err := CreateTopic(Current, NumericID(0), bad); !errors.Is(err, ErrInvalidArgument) {
			t.Fatal(bad, err)
		}
	}
}

const (
	// TopicHeader id 1, created 2, partitions 1, expiry MAX, compression 1, max size MAX
	topicHead = "01000000 02 00*7 01000000 ff*8 01 ff*8"
	topicTail = "00*8 00*8 01 74" // size, messages, name "t"
	// Partition id 0, created 2, 1 segment, current_offset 9, size 100, 10 messages.
	partition0 = "00000000 02 00*7 01000000 09 00*7 64 00*7 0a 00*7"
)

func TestTopicReplies(t *testing.T) {
	cur := topicHead + " " + topicTail + " 00000000 00000000"
	leg := topicHead + " 01 " + topicTail

	td, err := DecodeCreateTopicReply(Current, hx(t, "00000000 "+cur+" "+partition0))
	if err != nil || td.ID != 1 || td.Name != "t" || td.MessageExpiry != math.MaxUint64 || td.Compression != CompressionNone || len(td.Partitions) != 1 || td.Partitions[0].CurrentOffset != 9 || td.Partitions[0].MessagesCount != 10 {
		t.Fatal(err, td)
	}
	td, err = DecodeCreateTopicReply(Legacy, hx(t, leg+" "+partition0))
	if err != nil || td.ReplicationFactor != 1 || len(td.Partitions) != 1 || td.Partitions[0].SegmentsCount != 1 {
		t.Fatal(err, td)
	}
	// Partition count larger than the body.
	if _, err := DecodeCreateTopicReply(Legacy, hx(t, leg)); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}

	req, _ := GetTopic(NumericID(0), NamedID("t"))
	eqBytes(t, "get topic", req.Body, hx(t, "01 04 00000000 02 01 74"))
	if req.Code != CodeGetTopic || req.Operation != OpNonReplicated {
		t.Fatal(req)
	}
	if _, found, err := DecodeGetTopicReply(Current, nil); found || err != nil {
		t.Fatal(found, err)
	}
	if td, found, err := DecodeGetTopicReply(Current, hx(t, cur+" "+partition0)); !found || err != nil || td.Partitions[0].ID != 0 {
		t.Fatal(found, err)
	}

	req, _ = GetTopics(NumericID(5))
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "get topics", got, hx(t, "0a 00 00 00 2d 01 00 00 01 04 05000000"))
	ts, err := DecodeGetTopicsReply(Current, hx(t, "02000000 "+cur+" "+cur))
	if err != nil || len(ts) != 2 {
		t.Fatal(err, ts)
	}
	ts, err = DecodeGetTopicsReply(Legacy, hx(t, leg+" "+leg))
	if err != nil || len(ts) != 2 || ts[1].Name != "t" {
		t.Fatal(err, ts)
	}
	if _, err := DecodeGetTopicsReply(Current, hx(t, "ffffffff "+cur)); !errors.Is(err, ErrTruncated) {
		t.Fatal(err)
	}
	// The released SDKs read an empty body as no topics.
	if ts, err := DecodeGetTopicsReply(Current, nil); err != nil || len(ts) != 0 {
		t.Fatal(err, ts)
	}
}

func TestCreatePartitions(t *testing.T) {
	req, err := CreatePartitions(NumericID(1), NumericID(2), 4)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy", got, hx(t, "14 00 00 00 92 01 00 00 01 04 01000000 01 04 02000000 04000000"))
	if req.Operation != OpCreatePartitions {
		t.Fatal(req.Operation)
	}
	if err := DecodeEmptyReply(Current, hx(t, "00000000")); err != nil {
		t.Fatal(err)
	}
	if err := DecodeEmptyReply(Current, hx(t, "01000000 00000000 df070000")); !errors.Is(err, ErrTooManyPartitions) {
		t.Fatal(err)
	}
	if err := DecodeEmptyReply(Legacy, nil); err != nil {
		t.Fatal(err)
	}
	if err := DecodeEmptyReply(Legacy, []byte{0}); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	if _, err := CreatePartitions(NumericID(1), NumericID(2), 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestConsumerOffsets(t *testing.T) {
	c := Consumer{Kind: ConsumerSingle, ID: NumericID(7)}
	req, err := StoreConsumerOffset(Current, c, NumericID(0), NumericID(1), Partition(2), 41, AckQuorum)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "01 01 04 07000000 01 04 00000000 01 04 01000000 01 02000000"
	eqBytes(t, "store current", req.Body, hx(t, prefix+" 29 00*7 01"))
	if req.Operation != OpStoreConsumerOffset {
		t.Fatal(req.Operation)
	}
	req, _ = StoreConsumerOffset(Legacy, c, NumericID(0), NumericID(1), Partition(2), 41, AckQuorum)
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "store legacy", got, hx(t, "24 00 00 00 79 00 00 00 "+prefix+" 29 00*7"))

	req, _ = GetConsumerOffset(Consumer{Kind: ConsumerGroup, ID: NamedID("g")}, NumericID(0), NumericID(1), PartitionID{})
	eqBytes(t, "get", req.Body, hx(t, "02 02 01 67 01 04 00000000 01 04 01000000 00 00000000"))
	if req.Code != CodeGetConsumerOffset {
		t.Fatal(req.Code)
	}
	for _, d := range []Dialect{Current, Legacy} {
		co, found, err := DecodeGetConsumerOffsetReply(d, hx(t, "02000000 0a 00*7 05 00*7"))
		if err != nil || !found || co != (ConsumerOffset{PartitionID: 2, CurrentOffset: 10, StoredOffset: 5}) {
			t.Fatal(err, co)
		}
		if _, found, err := DecodeGetConsumerOffsetReply(d, nil); found || err != nil {
			t.Fatal(found, err)
		}
	}
	if _, err := StoreConsumerOffset(Current, Consumer{Kind: 3}, NumericID(0), NumericID(0), PartitionID{}, 0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestPollRequest(t *testing.T) {
	base := Poll{Consumer: Consumer{Kind: ConsumerSingle, ID: NumericID(1)}, Stream: NumericID(0), Topic: NumericID(0), Partition: Partition(0), Count: 10}
	prefix := "01 01 04 01000000 01 04 00000000 01 04 00000000 01 00000000"
	for _, tc := range []struct {
		kind  PollingKind
		value uint64
		auto  bool
		want  string
	}{
		{PollOffset, 5, false, "01 05 00*7"},
		{PollTimestamp, 1_700_000_000_000_000, true, "02 00 40 1e 18 24 0a 06 00"},
		{PollFirst, 99, false, "03 00*8"},
		{PollLast, 99, false, "04 00*8"},
		{PollNext, 0, true, "05 00*8"},
	} {
		p := base
		p.Kind, p.Value, p.AutoCommit = tc.kind, tc.value, tc.auto
		req, err := PollMessages(p)
		if err != nil {
			t.Fatal(err)
		}
		auto := " 00"
		if tc.auto {
			auto = " 01"
		}
		eqBytes(t, "poll", req.Body, hx(t, prefix+" "+tc.want+" 0a000000"+auto))
	}
	req, _ := PollMessages(Poll{Consumer: base.Consumer, Stream: base.Stream, Topic: base.Topic, Kind: PollFirst, Count: 1})
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy poll", got, hx(t, "2a 00 00 00 64 00 00 00 "+"01 01 04 01000000 01 04 00000000 01 04 00000000 00 00000000"+" 03 00*8 01000000 00"))
	if _, err := PollMessages(Poll{Consumer: base.Consumer, Kind: 6}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}

// currentPollReply: partition 1, current 12; one batch of two messages,
// base_offset 10, base_timestamp 0x1000, origin 0x2000; message 1 has a
// header "k"="v" (String kinds).
const currentPollReply = `
01000000 0c 00*7 02000000
00*8 0a 00*7 00 10 00*6 00 20 00*6 6f 01 00*6 00*8 02000000 00*204
11*8 01 00*15 00000000 05000000 00000000 01000000 00*8 61
22*8 02 00*15 01000000 07000000 0c000000 02000000 00*8 62 63 02 01000000 6b 02 01000000 76`

// legacyPollReply: partition 1, current 12; messages at offsets 10 and 11.
const legacyPollReply = `
01000000 0c 00*7 02000000
11*8 01 00*15 0a 00*7 00 10 00*6 05 20 00*6 00000000 01000000 00*8 61
22*8 02 00*15 0b 00*7 00 10 00*6 07 20 00*6 0c000000 02000000 00*8 62 63 02 01000000 6b 02 01000000 76`

func TestPollReplies(t *testing.T) {
	for _, tc := range []struct {
		d    Dialect
		body string
	}{{Current, currentPollReply}, {Legacy, legacyPollReply}} {
		pm, err := DecodePollMessagesReply(tc.d, hx(t, tc.body))
		if err != nil {
			t.Fatal(tc.d, err)
		}
		if pm.PartitionID != 1 || pm.CurrentOffset != 12 || len(pm.Messages) != 2 {
			t.Fatalf("%v %+v", tc.d, pm)
		}
		m0, m1 := pm.Messages[0], pm.Messages[1]
		if m0.Offset != 10 || m1.Offset != 11 || m0.Timestamp != 0x1000 || m0.OriginTimestamp != 0x2005 || m1.OriginTimestamp != 0x2007 {
			t.Fatalf("%v %+v", tc.d, pm.Messages)
		}
		if string(m0.Payload) != "a" || string(m1.Payload) != "bc" || m0.ID != MessageID(1, 0) || m1.Checksum != 0x2222222222222222 {
			t.Fatalf("%v %+v", tc.d, pm.Messages)
		}
		hs, err := DecodeUserHeaders(m1.UserHeaders)
		if err != nil || len(hs) != 1 || string(hs[0].Key.Value) != "k" || string(hs[0].Value.Value) != "v" || hs[0].Key.Kind != KindString {
			t.Fatal(err, hs)
		}
	}
	// Empty poll keeps the 16-byte prefix.
	for _, d := range []Dialect{Current, Legacy} {
		pm, err := DecodePollMessagesReply(d, hx(t, "ffffffff 00*8 00000000"))
		if err != nil || pm.PartitionID != math.MaxUint32 || len(pm.Messages) != 0 {
			t.Fatal(err, pm)
		}
	}
	// Unknown stream: status 1009 / legacy 1009 with empty body.
	r, _ := DecodeReply(Current, replyFrame(t, 4, OpNonReplicated, 1009, nil))
	if !errors.Is(r.Err(), ErrStreamNotFound) {
		t.Fatal(r.Err())
	}
	r, _ = DecodeReply(Legacy, legacyReply(2010, nil))
	if !errors.Is(r.Err(), ErrTopicNotFound) {
		t.Fatal(r.Err())
	}
	// Batch length running past the body.
	bad := hx(t, currentPollReply)
	bad[16+32] = 0xff
	if _, err := DecodePollMessagesReply(Current, bad); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	// Legacy count larger than the body.
	bad = hx(t, legacyPollReply)
	bad[12] = 3
	if _, err := DecodePollMessagesReply(Legacy, bad); err == nil {
		t.Fatal("want error")
	}
}

func TestSendMessagesVariants(t *testing.T) {
	msgs := []Message{
		{ID: MessageID(1, 0), OriginTimestamp: 1000, Payload: []byte("a"), Headers: []UserHeader{{Key: HeaderValue{KindString, []byte("k")}, Value: HeaderValue{KindRaw, []byte{0}}}}},
		{ID: MessageID(2, 0), OriginTimestamp: 900, Payload: []byte("bc")},
	}
	// Legacy, key partitioning, two messages with a header.
	req, err := SendMessages(Legacy, NamedID("s"), NumericID(1), ByKey([]byte("key")), msgs)
	if err != nil {
		t.Fatal(err)
	}
	eqBytes(t, "legacy", req.Body, hx(t, `
12000000 02 01 73 01 04 01000000 03 03 6b 65 79 02000000
00000000 4d000000 00*8 00000000 8f000000 00*8
00*8 01 00*15 00*8 00*8 e8 03 00*6 0c000000 01000000 00*8 61 02 01000000 6b 01 01000000 00
00*8 02 00*15 00*8 00*8 84 03 00*6 00000000 02000000 00*8 62 63`))

	// Current, balanced: check structure rather than checksums (those are
	// pinned by the §9 golden) and that the poll decoder reads it back.
	req, err = SendMessages(Current, NumericID(0), NumericID(0), Balanced(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	r := reader{b: req.Body}
	if ml := r.u32(); ml != 6+6+2+4 {
		t.Fatal(ml)
	}
	batch := req.Body[4+18:]
	pm, err := DecodePollMessagesReply(Current, append(hx(t, "00000000 00*8 02000000"), batch...))
	if err != nil || len(pm.Messages) != 2 {
		t.Fatal(err, pm)
	}
	if pm.Messages[0].OriginTimestamp != 1000 || pm.Messages[1].OriginTimestamp != 900 || pm.Messages[1].Offset != 1 {
		t.Fatalf("%+v", pm.Messages)
	}
	// Each frame checksum covers frame bytes 8..end (§6.3).
	frames := batch[batchHeaderSize:]
	for _, m := range pm.Messages {
		n := messageHeaderSize + len(m.Payload) + len(m.UserHeaders)
		if got := xxh3.Hash(frames[8:n]); got != m.Checksum {
			t.Fatalf("frame checksum %x, want %x", m.Checksum, got)
		}
		frames = frames[n:]
	}
	// The batch checksum covers header bytes 0..40, the message count and
	// the message checksums (§6.3).
	want := append(append([]byte{}, batch[:40]...), batch[48:52]...)
	for _, m := range pm.Messages {
		want = binary.LittleEndian.AppendUint64(want, m.Checksum)
	}
	if got := binary.LittleEndian.Uint64(batch[40:]); got != xxh3.Hash(want) {
		t.Fatalf("batch checksum %x, want %x", got, xxh3.Hash(want))
	}
	// Encoding into a reused buffer (of any size and content) gives the
	// same bytes, in both dialects.
	for _, d := range []Dialect{Current, Legacy} {
		fresh, err := SendMessages(d, NumericID(0), NumericID(0), Balanced(), msgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{0, len(fresh.Body) - 1, len(fresh.Body), len(fresh.Body) + 100} {
			dirty := bytes.Repeat([]byte{0xee}, size)
			again, err := AppendSendMessages(dirty, d, NumericID(0), NumericID(0), Balanced(), msgs)
			if err != nil {
				t.Fatal(err)
			}
			eqBytes(t, fmt.Sprintf("%v body into a buffer of %d bytes", d, size), again.Body, fresh.Body)
		}
	}

	// Invalid inputs.
	for name, f := range map[string]func() error{
		"no messages": func() error { _, err := SendMessages(Current, NumericID(0), NumericID(0), Balanced(), nil); return err },
		"empty payload": func() error {
			_, err := SendMessages(Legacy, NumericID(0), NumericID(0), Balanced(), []Message{{}})
			return err
		},
		"empty key": func() error {
			_, err := SendMessages(Current, NumericID(0), NumericID(0), ByKey(nil), helloMsg())
			return err
		},
		"empty header value": func() error {
			_, err := SendMessages(Current, NumericID(0), NumericID(0), Balanced(), []Message{{Payload: []byte("x"), Headers: []UserHeader{{Key: HeaderValue{2, []byte("k")}, Value: HeaderValue{1, nil}}}}})
			return err
		},
		"ts delta": func() error {
			_, err := SendMessages(Current, NumericID(0), NumericID(0), Balanced(), []Message{{Payload: []byte("x")}, {Payload: []byte("y"), OriginTimestamp: 1 << 33}})
			return err
		},
	} {
		if err := f(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestUserHeadersMalformed(t *testing.T) {
	for _, s := range []string{
		"02 01000000 6b",                      // odd number of TLVs
		"02 00000000 02 01000000 76",          // zero length
		"00 01000000 6b 02 01000000 76",       // kind 0
		"02 01000000 6b 02 ffffffff 76",       // length beyond input
		"02 01000000 6b 02 01000000 76 02 01", // trailing garbage
	} {
		if _, err := DecodeUserHeaders(hx(t, s)); err == nil {
			t.Errorf("%s: want error", s)
		}
	}
}

func TestUserHeadersRoundTrip(t *testing.T) {
	in := []UserHeader{
		{Key: HeaderValue{KindString, []byte("content-type")}, Value: HeaderValue{KindString, []byte("json")}},
		{Key: HeaderValue{KindRaw, []byte{0xff}}, Value: HeaderValue{KindUint64, []byte{1, 0, 0, 0, 0, 0, 0, 0}}},
	}
	b, err := EncodeUserHeaders(in)
	if err != nil {
		t.Fatal(err)
	}
	eqBytes(t, "tlv", b[:22], hx(t, "02 0c000000 636f6e74656e742d74797065 02 04000000"))
	out, err := DecodeUserHeaders(b)
	if err != nil || len(out) != 2 || string(out[0].Value.Value) != "json" || out[1].Value.Kind != KindUint64 {
		t.Fatal(err, out)
	}
}

func TestArgumentValidation(t *testing.T) {
	if _, err := Ping().Frame(Dialect(0), RequestHeader{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	for _, l := range []Login{{Username: "ab", Password: "iggy", SDKName: "gw", SDKVersion: "1"}, {Username: "iggy", Password: "ab", SDKName: "gw", SDKVersion: "1"}} {
		if _, err := LoginUser(Current, l); !errors.Is(err, ErrInvalidArgument) {
			t.Fatal(err)
		}
	}
	if _, err := LoginUser(Current, Login{Username: "iggy", Password: "iggy"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal("current login needs an sdk name/version:", err)
	}
	if _, err := LoginToken(Legacy, "", "", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := GetTopic(NamedID(""), NumericID(0)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestGetStream(t *testing.T) {
	req, err := GetStream(NamedID("kafka"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy", got, hx(t, "0b 00 00 00 c8 00 00 00 02 05 6b 61 66 6b 61"))
	got, _ = req.Frame(Current, RequestHeader{Client: testClient, Request: 3, Session: 7})
	eqBytes(t, "current", got, append(header256(t, map[int]string{
		48: "07 01 00 00", 60: "05", 128: testClientHex, 168: "03", 176: "02", 184: "07", 196: "c8 00 00 00",
	}), hx(t, "02 05 6b 61 66 6b 61")...))

	// Stream id 0 "s" holding one topic "t".
	stream := "00000000 01 00*7 01000000 00*8 00*8 01 73"
	s, topics, found, err := DecodeGetStreamReply(Legacy, hx(t, stream+" "+topicHead+" 01 "+topicTail))
	if err != nil || !found || s.Name != "s" || len(topics) != 1 || topics[0].Name != "t" || topics[0].ReplicationFactor != 1 {
		t.Fatal(err, found, s, topics)
	}
	s, topics, found, err = DecodeGetStreamReply(Current, hx(t, stream+" 00000000 "+topicHead+" "+topicTail+" 00000000 00000000"))
	if err != nil || !found || s.TopicsCount != 1 || len(topics) != 1 || topics[0].MaxTopicSize != math.MaxUint64 {
		t.Fatal(err, found, s, topics)
	}
	if _, _, found, err := DecodeGetStreamReply(Current, nil); found || err != nil {
		t.Fatal("empty body is not found", found, err)
	}
	if _, _, _, err := DecodeGetStreamReply(Current, hx(t, stream+" 00000000 01000000")); !errors.Is(err, ErrTruncated) {
		t.Fatal(err)
	}
}

func TestDeleteStreamAndTopic(t *testing.T) {
	req, _ := DeleteStream(NumericID(2))
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy delete stream", got, hx(t, "0a 00 00 00 cb 00 00 00 01 04 02000000"))
	got, _ = req.Frame(Current, RequestHeader{Client: testClient, Request: 4, Session: 7})
	eqBytes(t, "current delete stream", got, append(header256(t, map[int]string{
		48: "06 01 00 00", 60: "05", 128: testClientHex, 168: "04", 176: "82", 184: "07",
	}), hx(t, "01 04 02000000")...))

	req, _ = DeleteTopic(NamedID("s"), NumericID(1))
	got, _ = req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy delete topic", got, hx(t, "0d 00 00 00 2f 01 00 00 02 01 73 01 04 01000000"))
	got, _ = req.Frame(Current, RequestHeader{Client: testClient, Request: 5, Session: 7})
	eqBytes(t, "current delete topic", got, append(header256(t, map[int]string{
		48: "09 01 00 00", 60: "05", 128: testClientHex, 168: "05", 176: "86", 184: "07",
	}), hx(t, "02 01 73 01 04 01000000")...))
	// Replies: an empty result section is success, an entry is the error.
	if err := DecodeEmptyReply(Current, hx(t, "00000000")); err != nil {
		t.Fatal(err)
	}
	if err := DecodeEmptyReply(Current, hx(t, "01000000 00000000 da070000")); !errors.Is(err, ErrTopicNotFound) {
		t.Fatal(err)
	}
	if err := DecodeEmptyReply(Legacy, nil); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateTopic(t *testing.T) {
	cfg := TopicConfig{Name: "t", Compression: CompressionNone, MessageExpiry: 3_600_000_000, MaxTopicSize: math.MaxUint64, ReplicationFactor: 1}
	req, err := UpdateTopic(Current, NumericID(0), NumericID(1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if req.Operation != OpUpdateTopic || req.Code != CodeUpdateTopic {
		t.Fatal(req.Operation, req.Code)
	}
	eqBytes(t, "current", req.Body, hx(t, `01 04 00000000 01 04 01000000 01 74
02 15000000 636f6d7072657373696f6e5f616c676f726974686d 09 01000000 01
02 0e000000 6d6573736167655f657870697279 0c 08000000 00 a4 93 d6 00 00 00 00
02 0e000000 6d61785f746f7069635f73697a65 0c 08000000 ff ff ff ff ff ff ff ff`))
	req, _ = UpdateTopic(Legacy, NumericID(0), NumericID(1), cfg)
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "legacy", got, hx(t, `24 00 00 00 30 01 00 00
01 04 00000000 01 04 01000000 01 00 a4 93 d6 00 00 00 00 ff ff ff ff ff ff ff ff 01 01 74`))
	if _, err := UpdateTopic(Current, NumericID(0), NumericID(1), TopicConfig{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}

// TestCurrentRepliesTolerateTrailingBytes: like the released 0.11 SDKs
// (decode_from), the current dialect's fixed-shape replies ignore bytes
// after the fields we know, so a server may add fields; legacy replies
// are still consumed exactly.
func TestCurrentRepliesTolerateTrailingBytes(t *testing.T) {
	const extra = " de ad be ef"
	lr, err := DecodeLoginReply(Current, hx(t, "00000000 00000000 07 00*7 00 2c 00 00 01 31"+extra))
	if err != nil || lr.Session != 7 || lr.ServerVersion != "1" {
		t.Fatal(err, lr)
	}
	stream := "03000000 10 00*7 00000000 00*8 00*8 05 6b 67 61 74 65"
	if s, err := DecodeCreateStreamReply(Current, hx(t, "00000000 "+stream+" 00000000"+extra)); err != nil || s.Name != "kgate" {
		t.Fatal(err, s)
	}
	cur := topicHead + " " + topicTail + " 00000000 00000000"
	if td, found, err := DecodeGetTopicReply(Current, hx(t, cur+" "+partition0+extra)); !found || err != nil || len(td.Partitions) != 1 {
		t.Fatal(found, err, td)
	}
	if ts, err := DecodeGetTopicsReply(Current, hx(t, "01000000 "+cur+extra)); err != nil || len(ts) != 1 {
		t.Fatal(err, ts)
	}
	if co, found, err := DecodeGetConsumerOffsetReply(Current, hx(t, "01000000 05 00*7 04 00*7"+extra)); !found || err != nil || co.StoredOffset != 4 {
		t.Fatal(found, err, co)
	}
	if conf, err := DecodeSendMessagesReply(Current, hx(t, "01000000 00000000 00000000 00000000 29 00*7"+extra)); err != nil || len(conf) != 1 || conf[0].BaseOffset != 41 {
		t.Fatal(err, conf)
	}
	// Too short is still an error, and legacy replies must match exactly.
	if _, _, err := DecodeGetTopicReply(Current, hx(t, cur+" 00000000")); err == nil {
		t.Fatal("a partition cut short decoded")
	}
	if _, err := DecodeCreateStreamReply(Legacy, hx(t, stream+extra)); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	leg := topicHead + " 01 " + topicTail
	if _, _, err := DecodeGetTopicReply(Legacy, hx(t, leg+" "+partition0+extra)); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
}
