package iggytest_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

var dialects = []iggy.Dialect{iggy.Current, iggy.Legacy}

// forEach runs f as a subtest per dialect.
func forEach(t *testing.T, f func(t *testing.T, d iggy.Dialect)) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) { f(t, d) })
	}
}

const testToken = "pat-0123456789"

// start runs a double for the test; Close and a goroutine-leak check run
// at cleanup.
func start(t *testing.T, d iggy.Dialect) *iggytest.Server {
	t.Helper()
	srv, err := iggytest.Start(iggytest.Config{Dialect: d, Tokens: []string{testToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		checkNoLeaks(t)
	})
	return srv
}

// checkNoLeaks fails if a goroutine of the double is still alive.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	var stacks string
	for i := 0; i < 100; i++ {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "iggy/iggytest.(*Server)") && !strings.Contains(stacks, "iggy/iggytest.(*conn)") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("goroutines of the double leaked:\n%s", stacks)
}

// client is a minimal lockstep client built on the gateway/iggy codec.
type client struct {
	t       *testing.T
	d       iggy.Dialect
	nc      net.Conn
	br      *bufio.Reader
	id      [16]byte
	session uint64
	req     uint64
}

func dial(t *testing.T, srv *iggytest.Server) *client {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &client{t: t, d: srv.Dialect(), nc: nc, br: bufio.NewReader(nc)}
	_, _ = rand.Read(c.id[:])
	c.id[0] |= 1
	return c
}

// loggedIn dials and logs in as iggy/iggy.
func loggedIn(t *testing.T, srv *iggytest.Server) *client {
	t.Helper()
	c := dial(t, srv)
	c.login("iggy", "iggy")
	return c
}

// frame encodes req the way kgate's client does: every replicated op takes
// a new request id; non-replicated ops carry the current one.
func (c *client) frame(req iggy.Request) []byte {
	c.t.Helper()
	var id uint64
	switch req.Operation {
	case iggy.OpRegister:
	case iggy.OpNonReplicated:
		id = max(c.req, 1)
	default:
		c.req++
		id = c.req
	}
	f, err := req.Frame(c.d, iggy.RequestHeader{Client: c.id, Request: id, Session: c.session})
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

func (c *client) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) read(timeout time.Duration) (*iggy.Reply, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	return iggy.ReadReply(c.d, c.br)
}

// do sends req and returns its reply (a status or eviction is not an error here).
func (c *client) do(req iggy.Request) *iggy.Reply {
	c.t.Helper()
	c.write(c.frame(req))
	r, err := c.read(5 * time.Second)
	if err != nil {
		c.t.Fatalf("reading reply to code %d: %v", req.Code, err)
	}
	return r
}

// ok sends req, requires success and returns the body (Current
// result-framed bodies still hold their result section).
func (c *client) ok(req iggy.Request) []byte {
	c.t.Helper()
	r := c.do(req)
	if err := r.Err(); err != nil {
		c.t.Fatalf("code %d: %v", req.Code, err)
	}
	if c.d == iggy.Current && resultFramed(req.Operation) {
		if _, err := iggy.ResultPayload(r.Body); err != nil {
			c.t.Fatalf("code %d: %v", req.Code, err)
		}
	}
	return r.Body
}

func resultFramed(op uint8) bool {
	return op == iggy.OpRegister || (op >= 128 && op < 160) || op == iggy.OpStoreConsumerOffset || op == iggy.OpDeleteConsumerOffset
}

// code returns the error code of the reply to req, from the status or
// (Current) the result section; 0 on success.
func (c *client) code(req iggy.Request) uint32 {
	c.t.Helper()
	r := c.do(req)
	if r.Eviction != nil {
		c.t.Fatalf("code %d: unexpected eviction %v", req.Code, r.Err())
	}
	if r.Status != 0 {
		return r.Status
	}
	if c.d == iggy.Current && resultFramed(req.Operation) {
		_, err := iggy.ResultPayload(r.Body)
		var ie *iggy.Error
		if errors.As(err, &ie) {
			return ie.Code
		}
		if err != nil {
			c.t.Fatal(err)
		}
	}
	return 0
}

func (c *client) expectCode(req iggy.Request, want uint32) {
	c.t.Helper()
	if got := c.code(req); got != want {
		c.t.Fatalf("code %d: got error code %d, want %d", req.Code, got, want)
	}
}

// expectStatus checks the reply-status channel specifically.
func (c *client) expectStatus(req iggy.Request, want uint32) {
	c.t.Helper()
	r := c.do(req)
	if r.Eviction != nil || r.Status != want {
		c.t.Fatalf("code %d: got status %d (eviction %v), want %d", req.Code, r.Status, r.Eviction, want)
	}
}

// expectEviction checks that the reply is an eviction with reason, then
// that the connection is closed.
func (c *client) expectEviction(req iggy.Request, reason iggy.EvictionReason) {
	c.t.Helper()
	r := c.do(req)
	if r.Eviction == nil || r.Eviction.Reason != reason {
		c.t.Fatalf("code %d: got %+v, want eviction %v", req.Code, r, reason)
	}
	if r.Eviction.Client != c.id || r.Eviction.ServerProtocolVersion != iggy.ProtocolVersion {
		c.t.Fatalf("eviction header %+v", r.Eviction)
	}
	c.expectClosed()
}

// expectClosed waits for EOF (or a reset) from the server.
func (c *client) expectClosed() {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c.br)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		c.t.Fatalf("expected the server to close, got %v", err)
	}
	if len(b) != 0 && !(c.d == iggy.Legacy && bytes.Equal(b, []byte{8, 0, 0, 0, 0, 0, 0, 0})) {
		c.t.Fatalf("unexpected bytes before close: %x", b)
	}
}

// expectSilence checks that nothing arrives within d.
func (c *client) expectSilence(d time.Duration) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	b := make([]byte, 1)
	n, err := c.br.Read(b)
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("expected silence, got %d bytes, err %v", n, err)
	}
}

func (c *client) login(user, pass string) iggy.LoginReply {
	c.t.Helper()
	req, err := iggy.LoginUser(c.d, iggy.Login{Username: user, Password: pass, SDKName: "kgate-test", SDKVersion: "0.1.0"})
	if err != nil {
		c.t.Fatal(err)
	}
	lr, err := iggy.DecodeLoginReply(c.d, c.ok(req))
	if err != nil {
		c.t.Fatal(err)
	}
	c.session = lr.Session
	c.req = 0
	return lr
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// ---- hand-built requests for commands the codec does not encode ----

func idNum(id uint32) []byte {
	return binary.LittleEndian.AppendUint32([]byte{1, 4}, id)
}

func idName(s string) []byte { return append([]byte{2, byte(len(s))}, s...) }

func wireName(s string) []byte { return append([]byte{byte(len(s))}, s...) }

func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func nonReplicated(code uint32, body ...[]byte) iggy.Request {
	return iggy.Request{Code: code, Operation: iggy.OpNonReplicated, Body: cat(body...)}
}

func replicated(code uint32, op uint8, body ...[]byte) iggy.Request {
	return iggy.Request{Code: code, Operation: op, Body: cat(body...)}
}

const (
	codeGetStream        = 200
	codeDeleteStream     = 203
	codeDeleteTopic      = 303
	codeUpdateTopic      = 304
	codeDeletePartitions = 403
	codeDeleteOffset     = 122
	opDeleteStream       = 130
	opUpdateTopic        = 133
	opDeleteTopic        = 134
	opDeletePartitions   = 137
)

func getStream(id []byte) iggy.Request { return nonReplicated(codeGetStream, id) }
func deleteStream(id []byte) iggy.Request {
	return replicated(codeDeleteStream, opDeleteStream, id)
}
func deleteTopic(s, t []byte) iggy.Request { return replicated(codeDeleteTopic, opDeleteTopic, s, t) }
func deletePartitions(s, t []byte, n uint32) iggy.Request {
	return replicated(codeDeletePartitions, opDeletePartitions, s, t, u32(n))
}

// option encodes one Current options TLV entry with a String key.
func option(key string, kind uint8, val []byte) []byte {
	return cat([]byte{2}, u32(uint32(len(key))), []byte(key), []byte{kind}, u32(uint32(len(val))), val)
}

// updateTopic: Current = stream + topic + WireName + options;
// Legacy = stream + topic + §13.6 fixed fields + name.
func updateTopic(d iggy.Dialect, s, t []byte, name string, compression uint8, expiry, maxSize uint64) iggy.Request {
	if d == iggy.Legacy {
		return replicated(codeUpdateTopic, opUpdateTopic, s, t, []byte{compression}, u64(expiry), u64(maxSize), []byte{1}, wireName(name))
	}
	var opts []byte
	if compression != 0 {
		opts = append(opts, option("compression_algorithm", iggy.KindUint8, []byte{compression})...)
	}
	if expiry != 0 {
		opts = append(opts, option("message_expiry", iggy.KindUint64, u64(expiry))...)
	}
	if maxSize != 0 {
		opts = append(opts, option("max_topic_size", iggy.KindUint64, u64(maxSize))...)
	}
	return replicated(codeUpdateTopic, opUpdateTopic, s, t, wireName(name), opts)
}

func deleteOffset(d iggy.Dialect, consumerID uint32, s, t []byte, partition uint32) iggy.Request {
	body := cat([]byte{1}, idNum(consumerID), s, t, []byte{1}, u32(partition))
	if d == iggy.Current {
		body = append(body, 1) // ack
	}
	return replicated(codeDeleteOffset, iggy.OpDeleteConsumerOffset, body)
}

// streamSummary hand-decodes the Stream prefix of a GetStream reply.
type streamSummary struct {
	id, topics uint32
	size, msgs uint64
	name       string
}

func decodeStreamPrefix(t *testing.T, b []byte) streamSummary {
	t.Helper()
	if len(b) < 33 || len(b) < 33+int(b[32]) {
		t.Fatalf("stream of %d bytes", len(b))
	}
	return streamSummary{
		id: binary.LittleEndian.Uint32(b), topics: binary.LittleEndian.Uint32(b[12:]),
		size: binary.LittleEndian.Uint64(b[16:]), msgs: binary.LittleEndian.Uint64(b[24:]),
		name: string(b[33 : 33+int(b[32])]),
	}
}
