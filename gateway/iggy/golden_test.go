package iggy

import (
	"errors"
	"testing"
)

// ---- §9 worked examples (current dialect) ----

func TestGoldenCurrentPing(t *testing.T) {
	want := header256(t, map[int]string{
		48: "00 01 00 00", 60: "05", 128: testClientHex,
		168: "01 00 00 00 00 00 00 00", 176: "02", 196: "01 00 00 00",
	})
	got, err := Ping().Frame(Current, RequestHeader{Client: testClient, Request: 1})
	if err != nil {
		t.Fatal(err)
	}
	eqBytes(t, "ping", got, want)

	reply := header256(t, map[int]string{
		48: "00 01 00 00", 60: "08", 160: testClientHex,
		200: "01 00 00 00 00 00 00 00", 208: "02", 216: "00 00 00 00",
	})
	r, err := DecodeReply(Current, reply)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != FrameReply || r.Request != 1 || r.Operation != 2 || r.Status != 0 || len(r.Body) != 0 || r.Client != testClient {
		t.Fatalf("bad reply %+v", r)
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
}

func TestGoldenCurrentLogin(t *testing.T) {
	body := hx(t, "00 2c 00 00 | 02 67 77 | 05 30 2e 31 2e 30 | 04 69 67 67 79 | 04 69 67 67 79 | 00 00 00 00")
	want := append(header256(t, map[int]string{
		48: "1b 01 00 00", 60: "05", 128: testClientHex, 176: "01",
	}), body...)
	req, err := LoginUser(Current, Login{Username: "iggy", Password: "iggy", SDKName: "gw", SDKVersion: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	// Request/session are forced to 0 for Register.
	got, err := req.Frame(Current, RequestHeader{Client: testClient, Request: 9, Session: 9})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 283 {
		t.Fatalf("len %d", len(got))
	}
	eqBytes(t, "login", got, want)

	// Derived reply: RF ok, user 0, session 7, protocol 0x2C00, "0.9.0-edge.5".
	rb := hx(t, "00000000 | 00000000 | 07 00 00 00 00 00 00 00 | 00 2c 00 00 | 0c 30 2e 39 2e 30 2d 65 64 67 65 2e 35")
	r, err := DecodeReply(Current, replyFrame(t, 0, OpRegister, 0, rb))
	if err != nil {
		t.Fatal(err)
	}
	lr, err := DecodeLoginReply(Current, r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if lr != (LoginReply{UserID: 0, Session: 7, ServerProtocolVersion: 0x2C00, ServerVersion: "0.9.0-edge.5"}) {
		t.Fatalf("%+v", lr)
	}
	// Transient result entry 57.
	_, err = DecodeLoginReply(Current, hx(t, "01000000 00000000 39000000"))
	var ie *Error
	if !errors.As(err, &ie) || !ie.Transient() || !errors.Is(err, ErrTransient) {
		t.Fatalf("want transient, got %v", err)
	}
}

func TestGoldenCurrentLoginPAT(t *testing.T) {
	body := hx(t, "00 2c 00 00 | 02 67 77 | 05 30 2e 31 2e 30 | 03 61 62 63 | 00 00 00 00")
	req, err := LoginToken(Current, "abc", "gw", "0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	eqBytes(t, "pat body", req.Body, body)
	if req.Operation != OpRegister {
		t.Fatal(req.Operation)
	}
}

const sendBodyCurrent = `
16 00 00 00
01 04 00 00 00 00  01 04 00 00 00 00
02 04 00 00 00 00  01 00 00 00
00*24
00 40 1e 18 24 0a 06 00
35 01 00 00 00 00 00 00
c3 0f 94 7c 3d c3 37 89
01 00 00 00
00*204
8e 5c a5 9e db bd bf b9
01 00*15
00 00 00 00  00 00 00 00  00 00 00 00  05 00 00 00
00*8
68 65 6c 6c 6f`

func helloMsg() []Message {
	return []Message{{ID: MessageID(1, 0), OriginTimestamp: 1_700_000_000_000_000, Payload: []byte("hello")}}
}

func TestGoldenCurrentSendMessages(t *testing.T) {
	body := hx(t, sendBodyCurrent)
	if len(body) != 335 {
		t.Fatalf("fixture len %d", len(body))
	}
	want := append(header256(t, map[int]string{
		48: "4f 02 00 00", 60: "05", 128: testClientHex,
		168: "01 00 00 00 00 00 00 00", 176: "a0", 184: "07 00 00 00 00 00 00 00",
	}), body...)
	req, err := SendMessages(Current, NumericID(0), NumericID(0), ToPartition(0), helloMsg())
	if err != nil {
		t.Fatal(err)
	}
	got, err := req.Frame(Current, RequestHeader{Client: testClient, Request: 1, Session: 7})
	if err != nil {
		t.Fatal(err)
	}
	eqBytes(t, "send", got, want)

	// Derived reply: one confirmation stream 0 topic 0 partition 0 base 41.
	conf, err := DecodeSendMessagesReply(Current, hx(t, "01000000 00000000 00000000 00000000 29 00 00 00 00 00 00 00"))
	if err != nil || len(conf) != 1 || conf[0].BaseOffset != 41 {
		t.Fatalf("%v %+v", err, conf)
	}
	// An empty body answers a replay of a committed request: no
	// confirmations (iggy_binary_protocol 0.11.0, SendMessagesResponse).
	if conf, err := DecodeSendMessagesReply(Current, nil); err != nil || conf != nil {
		t.Fatalf("empty reply: %v %+v", err, conf)
	}
	// Partition-plane miss: status 20 with an empty body.
	r, err := DecodeReply(Current, replyFrame(t, 1, OpSendMessages, 20, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); !errors.Is(err, ErrResourceNotFound) || !errors.Is(err, ErrServer) {
		t.Fatal(err)
	}
}

// ---- §13.12 worked examples (legacy dialect) ----

func TestGoldenLegacyPing(t *testing.T) {
	got, err := Ping().Frame(Legacy, RequestHeader{})
	if err != nil {
		t.Fatal(err)
	}
	eqBytes(t, "ping", got, hx(t, "04 00 00 00 01 00 00 00"))
	r, err := DecodeReply(Legacy, hx(t, "00*8"))
	if err != nil || r.Status != 0 || len(r.Body) != 0 {
		t.Fatal(err, r)
	}
}

func TestGoldenLegacyLogin(t *testing.T) {
	req, err := LoginUser(Legacy, Login{Username: "iggy", Password: "iggy", SDKVersion: "0.8.0"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "login", got, hx(t, "1b 00 00 00 | 26 00 00 00 | 04 69 67 67 79 | 04 69 67 67 79 | 05 00 00 00 30 2e 38 2e 30 | 00 00 00 00"))

	r, err := DecodeReply(Legacy, hx(t, "00 00 00 00 04 00 00 00 00 00 00 00"))
	if err != nil {
		t.Fatal(err)
	}
	lr, err := DecodeLoginReply(Legacy, r.Body)
	if err != nil || lr.UserID != 0 {
		t.Fatal(err, lr)
	}
	r, err = DecodeReply(Legacy, hx(t, "2a 00 00 00 00 00 00 00"))
	if err != nil {
		t.Fatal(err)
	}
	var ie *Error
	if err := r.Err(); !errors.Is(err, ErrInvalidCredentials) || !errors.As(err, &ie) || ie.Code != 42 || ie.Name != "InvalidCredentials" {
		t.Fatal(err)
	}
}

func TestGoldenLegacyLoginPAT(t *testing.T) {
	req, err := LoginToken(Legacy, "abc", "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "pat", got, hx(t, "08 00 00 00 2c 00 00 00 03 61 62 63"))
	// Unknown token gives 20 on legacy.
	r, _ := DecodeReply(Legacy, hx(t, "14 00 00 00 00 00 00 00"))
	if !errors.Is(r.Err(), ErrResourceNotFound) {
		t.Fatal(r.Err())
	}
}

func TestGoldenLegacySendMessages(t *testing.T) {
	want := hx(t, `
73 00 00 00  65 00 00 00
16 00 00 00
01 04 00 00 00 00  01 04 00 00 00 00
02 04 00 00 00 00  01 00 00 00
00 00 00 00  45 00 00 00  00*8
00*8  01 00*15
00*8  00*8  00 40 1e 18 24 0a 06 00
00 00 00 00  05 00 00 00  00*8
68 65 6c 6c 6f`)
	if len(want) != 119 {
		t.Fatalf("fixture len %d", len(want))
	}
	req, err := SendMessages(Legacy, NumericID(0), NumericID(0), ToPartition(0), helloMsg())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := req.Frame(Legacy, RequestHeader{})
	eqBytes(t, "send", got, want)
	r, err := DecodeReply(Legacy, hx(t, "00*8"))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := DecodeSendMessagesReply(Legacy, r.Body); err != nil || c != nil {
		t.Fatal(err, c)
	}
}
