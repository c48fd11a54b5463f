package gateway_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/records"
)

// FuzzParseRequest feeds arbitrary frames (without the size prefix) to the
// request parser and, when it yields a request, to the body decoder. Neither
// may panic, and what the parser reports must agree with the frame.
func FuzzParseRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, frame []byte) {
		hdr, req, body, err := gateway.ParseRequest(frame)
		if err != nil {
			if req != nil || body != nil {
				t.Fatalf("error %v with a request or body", err)
			}
			return
		}
		if req == nil {
			t.Fatal("no error and no request")
		}
		if len(frame) < 8 {
			t.Fatalf("parsed a %d-byte frame", len(frame))
		}
		if hdr.Key != int16(binary.BigEndian.Uint16(frame)) || hdr.Version != int16(binary.BigEndian.Uint16(frame[2:])) ||
			hdr.CorrelationID != int32(binary.BigEndian.Uint32(frame[4:])) {
			t.Fatalf("header %+v does not match the frame", hdr)
		}
		if req.Key() != hdr.Key || req.GetVersion() != hdr.Version {
			t.Fatalf("request is key %d v%d, header says %d v%d", req.Key(), req.GetVersion(), hdr.Key, hdr.Version)
		}
		if len(body) > len(frame)-10 || !bytes.HasSuffix(frame, body) {
			t.Fatalf("body (%d bytes) is not the tail of the frame (%d bytes)", len(body), len(frame))
		}
		if err := gateway.DecodeBody(req, body); err != nil {
			return
		}
		// A decoded request must also be usable: handlers build their
		// answers from it, and the answer must encode.
		resp := req.ResponseKind()
		_ = gateway.AppendResponse(nil, hdr.CorrelationID, resp)
	})
}

// requestFrame encodes req as a request frame without the size prefix:
// header v1 (v2 with an empty tag section for flexible versions), then body.
func requestFrame(req kmsg.Request, corr int32, clientID *string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// sizePrefixed adds the 4-byte size prefix that goes on the wire.
func sizePrefixed(frame []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
}

func testBatch(t testing.TB, n int) []byte {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{
			Key:     []byte("key-" + strconv.Itoa(i)),
			Value:   []byte("value-" + strconv.Itoa(i)),
			Headers: []records.RecordHeader{{Key: "h", Value: []byte("v")}},
		}
	}
	b, err := records.Builder{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1700000000000}.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fuzzSeeds(t testing.TB) map[string][]byte {
	cid := "fuzz-client"
	seeds := map[string][]byte{}
	add := func(name string, req kmsg.Request, version int16) []byte {
		req.SetVersion(version)
		fr := requestFrame(req, 7, &cid)
		seeds[name] = fr
		return fr
	}

	av := kmsg.NewPtrApiVersionsRequest()
	add("api_versions_v0", av, 0)
	av = kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "kgate-fuzz", "1.0"
	add("api_versions_v3", av, 3)

	md := kmsg.NewPtrMetadataRequest()
	topic := "orders"
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &topic
	md.Topics = append(md.Topics, mt)
	add("metadata_v1", md, 1)
	md = kmsg.NewPtrMetadataRequest()
	mt = kmsg.NewMetadataRequestTopic()
	mt.TopicID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	md.Topics = append(md.Topics, mt)
	md.AllowAutoTopicCreation = true
	add("metadata_v12", md, 12)

	pr := kmsg.NewPtrProduceRequest()
	pr.Acks = -1
	pr.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = testBatch(t, 3)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	produce := add("produce_v9", pr, 9)

	fetch := func(version int16) *kmsg.FetchRequest {
		fr := kmsg.NewPtrFetchRequest()
		fr.ReplicaID = -1
		fr.MaxWaitMillis = 500
		fr.MinBytes = 1
		fr.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		ft.TopicID = [16]byte{0xaa, 0xbb}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset = 42
		fp.PartitionMaxBytes = 1 << 20
		fp.LogStartOffset = -1
		fp.CurrentLeaderEpoch = -1
		ft.Partitions = append(ft.Partitions, fp)
		fr.Topics = append(fr.Topics, ft)
		return fr
	}
	add("fetch_v12", fetch(12), 12)
	add("fetch_v13", fetch(13), 13)

	// Broken ones: every "bad_" seed must fail to parse or decode.
	seeds["bad_truncated_header"] = produce[:9]
	seeds["bad_truncated_client_id"] = produce[:14]
	seeds["bad_truncated_body"] = produce[:len(produce)/2]
	seeds["bad_garbage"] = []byte("\x00\x00\x00\x09\xde\xad\xbe\xef\xff\xfe\x01\x02\x03garbage garbage")
	seeds["bad_unknown_key"] = append(binary.BigEndian.AppendUint16(nil, 0x7fff), produce[2:]...)
	huge := append([]byte(nil), seeds["metadata_v1"]...)
	// Metadata v1 body starts with the topic array length: claim 2^31-1.
	binary.BigEndian.PutUint32(huge[10+len(cid):], 0x7fffffff)
	seeds["bad_huge_array_len"] = huge
	tags := append([]byte(nil), seeds["api_versions_v3"][:10+len(cid)]...)
	tags = append(tags, 0x41, 0x00) // 65 tagged fields
	seeds["bad_too_many_header_tags"] = tags
	null := append([]byte(nil), seeds["fetch_v13"][:8]...)
	null = append(null, 0xff, 0xff)
	null = append(null, seeds["fetch_v13"][10+len(cid):]...)
	seeds["null_client_id"] = null
	return seeds
}

func TestFuzzSeedsParse(t *testing.T) {
	for name, fr := range fuzzSeeds(t) {
		valid := !strings.HasPrefix(name, "bad_")
		hdr, req, body, err := gateway.ParseRequest(fr)
		if err == nil {
			err = gateway.DecodeBody(req, body)
		}
		if valid && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !valid && err == nil {
			t.Errorf("%s: key %d v%d parsed and decoded", name, hdr.Key, hdr.Version)
		}
	}
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzParseRequest seeds")

// TestWriteFuzzCorpus regenerates the committed seed corpus:
//
//	go test -run TestWriteFuzzCorpus -update-corpus ./gateway/
func TestWriteFuzzCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("needs -update-corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParseRequest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range fuzzSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
