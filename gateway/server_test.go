package gateway_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/coordinator"
	"github.com/kgate/kgate/coordinator/txn"
	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/embedded"
	"github.com/kgate/kgate/gateway/records"
)

// ioTimeout bounds every single network wait of a test.
const ioTimeout = 20 * time.Second

// testNode is one in-process kgate node: FSM, single-voter Raft, embedded
// backend and Kafka listener on loopback.
type testNode struct {
	addr    string
	dataDir string
	fsm     *fsm.FSM
	node    *cluster.Node
	backend *embedded.Backend
	srv     *gateway.Server
	stop    context.CancelFunc // ends Serve's context (a stopping node)
}

func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startNode starts a node and stops it at test cleanup. mod may adjust the
// gateway config (Addr and Logger are set by the helper).
func startNode(t testing.TB, mod func(*gateway.Config)) *testNode {
	t.Helper()
	return startNodeWith(t, mod, false)
}

// startGroupNode is startNode with the consumer-group APIs served by a
// coordinator.
func startGroupNode(t *testing.T) *testNode {
	t.Helper()
	return startNodeWith(t, nil, true)
}

func startNodeWith(t testing.TB, mod func(*gateway.Config), groups bool) *testNode {
	t.Helper()
	return startNodeAt(t, mod, groups, nil)
}

// startNodeAt is startNodeWith for a node that supports feature levels up
// to maxLevel only (nil: this binary's), as a node of an older release
// would: the cluster stays below the levels above it.
func startNodeAt(t testing.TB, mod func(*gateway.Config), groups bool, maxLevel *fsm.Level) *testNode {
	t.Helper()
	return startNodeOpts(t, mod, groups, nodeOpts{maxLevel: maxLevel})
}

// nodeOpts are the less common settings of a test node.
type nodeOpts struct {
	maxLevel *fsm.Level  // the highest feature level it supports (nil: this binary's)
	txn      *txn.Config // its transaction coordinator, with the expiry service (nil: no expiry)
	// producerExpiry runs the embedded backend's producer expiry service
	// (nil: not run).
	producerExpiry *embedded.ProducerExpiry
	// wrap, if set, gives the backend the gateway serves (the embedded
	// one wrapped).
	wrap func(*embedded.Backend) gateway.Backend
}

func startNodeOpts(t testing.TB, mod func(*gateway.Config), groups bool, o nodeOpts) *testNode {
	t.Helper()
	var lastErr error
	// Free ports are picked by binding and releasing them; retry in the
	// unlikely case another process grabbed one in between.
	for attempt := 0; attempt < 5; attempt++ {
		n, err := tryStartNode(t, mod, filepath.Join(t.TempDir(), "data"), groups, o)
		if err == nil {
			return n
		}
		lastErr = err
	}
	t.Fatalf("start node: %v", lastErr)
	return nil
}

func tryStartNode(t testing.TB, mod func(*gateway.Config), dir string, groups bool, o nodeOpts) (*testNode, error) {
	log := slog.New(slog.DiscardHandler)
	maxLevel := o.maxLevel
	st, err := fsm.Open(fsm.Options{Dir: dir, SegmentBytes: 1 << 20, Logger: log})
	if err != nil {
		return nil, err
	}
	kafkaAddr := freeLoopbackAddr(t)
	node, err := cluster.Start(cluster.Config{
		NodeID:           1,
		DataDir:          dir,
		RaftAddr:         freeLoopbackAddr(t),
		KafkaAddr:        kafkaAddr,
		BootstrapExpect:  1,
		HeartbeatTimeout: 150 * time.Millisecond,
		ElectionTimeout:  150 * time.Millisecond,
		LeaderLease:      100 * time.Millisecond,
		MaxFeatureLevel:  maxLevel,
		Logger:           log,
	}, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	err = node.WaitLeader(ctx)
	cancel()
	if err != nil {
		node.Shutdown()
		st.Close()
		t.Fatalf("node did not become leader: %v", err)
	}
	// The leader raises a new cluster to the latest feature level (or the
	// node's cap) at once; wait for it so tests of level-gated commands do
	// not race it.
	level := fsm.LatestLevel
	if maxLevel != nil {
		level = *maxLevel
	}
	for deadline := time.Now().Add(ioTimeout); st.FeatureLevel() < level; {
		if time.Now().After(deadline) {
			t.Fatalf("feature level %d, want %d", st.FeatureLevel(), level)
		}
		time.Sleep(10 * time.Millisecond)
	}
	backend := embedded.New(node, st, log)
	if o.producerExpiry != nil {
		node.RunWhileLeader("producer expiry", func(ctx context.Context) error {
			backend.RunProducerExpiry(ctx, *o.producerExpiry)
			return nil
		})
	}
	cfg := gateway.Config{Addr: kafkaAddr, AutoCreateTopics: true, Logger: log, Credentials: backend}
	if mod != nil {
		mod(&cfg)
	}
	cfg.Addr = kafkaAddr
	serveCtx, stop := context.WithCancel(context.Background())
	if groups {
		cfg.Groups = coordinator.New(coordinator.Config{InitialRebalanceDelay: time.Millisecond, Logger: log}, node, st)
		node.RunWhileLeader("group coordinator", cfg.Groups.Lead)
		tcfg := txn.Config{MaxTimeout: time.Minute}
		if o.txn != nil {
			tcfg = *o.txn
		}
		tcfg.Logger = log
		cfg.Transactions = txn.New(tcfg, node, st)
		if o.txn != nil {
			node.RunWhileLeader("transaction expiry", cfg.Transactions.ExpireTransactions)
		}
	}
	var gwBackend gateway.Backend = backend
	if o.wrap != nil {
		gwBackend = o.wrap(backend)
	}
	srv := gateway.New(cfg, gwBackend, node)
	if err := srv.Listen(); err != nil {
		stop()
		node.Shutdown()
		st.Close()
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(ioTimeout):
			t.Errorf("Serve did not return after its context ended")
		}
		node.Shutdown()
		st.Close()
	})
	return &testNode{addr: srv.Addr().String(), dataDir: dir, fsm: st, node: node, backend: backend, srv: srv, stop: stop}, nil
}

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t testing.TB, addr, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(testCtx(t), partitions, -1, configs, name); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// rawConn speaks the Kafka protocol over a plain connection so tests pick
// exact versions and bytes.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	corr int32
	// clientID is sent in request headers; "" means testClientID.
	clientID string
}

var testClientID = "kgate-test"

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, corr: 1000}
}

func (c *rawConn) write(b []byte) error {
	c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err := c.nc.Write(b)
	return err
}

// send writes req at the version it carries and returns its correlation id.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	id := testClientID
	if c.clientID != "" {
		id = c.clientID
	}
	if err := c.write(sizePrefixed(requestFrame(req, c.corr, &id))); err != nil {
		c.t.Fatalf("write %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return c.corr
}

// readFrame reads one response frame: its correlation id and the rest.
func (c *rawConn) readFrame() (int32, []byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return 0, nil, fmt.Errorf("response frame of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// decodeResponse decodes a response body (after the correlation id) as the
// answer to req.
func decodeResponse(req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	if resp.IsFlexible() && resp.Key() != 18 {
		if len(body) == 0 || body[0] != 0 {
			return nil, errors.New("response header has tagged fields or is empty")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *rawConn) recv(corr int32, req kmsg.Request) kmsg.Response {
	c.t.Helper()
	got, body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got != corr {
		c.t.Fatalf("response correlation id %d, want %d", got, corr)
	}
	resp, err := decodeResponse(req, body)
	if err != nil {
		c.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func (c *rawConn) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(c.send(req), req)
}

// expectClosed asserts the server closes the connection without answering.
func expectClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(ioTimeout))
	var buf [512]byte
	n, err := nc.Read(buf[:])
	if n > 0 {
		t.Fatalf("got %d bytes, want the connection closed", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %s", ioTimeout)
	}
	if err == nil {
		t.Fatal("read returned nothing and no error")
	}
}

// expectServing asserts a fresh connection still gets answers.
func expectServing(t *testing.T, addr string) {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kgate-test", "1"
	if resp := c.do(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions error %d", resp.ErrorCode)
	}
}

// --- requests -------------------------------------------------------------

func produceReq(version int16, acks int16, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func produceRaw(t *testing.T, c *rawConn, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := c.do(produceReq(9, -1, topic, 0, batch)).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response shape: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func fetchReq(topic string, partition int32, offset int64, maxWaitMs, minBytes, partMaxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = minBytes
	req.MaxBytes = 50 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = partMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchPartition(t *testing.T, resp *kmsg.FetchResponse) kmsg.FetchResponseTopicPartition {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

func fetchRaw(t *testing.T, c *rawConn, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	return fetchPartition(t, c.do(fetchReq(topic, 0, offset, 0, 0, 1<<20)).(*kmsg.FetchResponse))
}

// decodeBatches splits fetched record data into its records.
func decodeBatches(t *testing.T, data []byte) []records.Record {
	t.Helper()
	var out []records.Record
	for len(data) > 0 {
		h, recs, err := records.Records(data, 64<<20)
		if err != nil {
			t.Fatalf("fetched batch: %v", err)
		}
		out = append(out, recs...)
		data = data[h.Size():]
	}
	return out
}

func listOffset(t *testing.T, c *rawConn, topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(8)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = 0
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("list offsets response shape: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func highWatermark(t *testing.T, c *rawConn, topic string) int64 {
	t.Helper()
	p := listOffset(t, c, topic, -1)
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets latest: error %d", p.ErrorCode)
	}
	return p.Offset
}

func metadataReq(version int16, autoCreate bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	req.AllowAutoTopicCreation = autoCreate
	for _, name := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, mt)
	}
	return req
}

func topicMeta(t *testing.T, c *rawConn, name string) kmsg.MetadataResponseTopic {
	t.Helper()
	resp := c.do(metadataReq(12, false, name)).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("metadata: %d topics", len(resp.Topics))
	}
	return resp.Topics[0]
}

func build(t testing.TB, b records.Builder, recs []records.Record) []byte {
	t.Helper()
	data, err := b.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func plainBuilder() records.Builder {
	return records.Builder{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()}
}

func valueRecords(prefix string, n int) []records.Record {
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i].Value = []byte(prefix + strconv.Itoa(i))
	}
	return recs
}

// --- connection level -----------------------------------------------------

var advertised = map[int16][2]int16{
	0: {0, 12}, 1: {4, 16}, 2: {1, 8}, 3: {0, 12}, 18: {0, 4}, 19: {2, 7}, 20: {1, 6}, 21: {0, 2},
	22: {0, 5}, 23: {2, 4}, 32: {1, 4}, 33: {0, 2}, 35: {1, 4}, 37: {0, 3}, 43: {0, 2}, 44: {0, 1},
	45: {0, 1}, 46: {0, 0}, 48: {0, 1}, 49: {0, 1}, 50: {0, 0}, 51: {0, 0}, 55: {0, 2}, 60: {0, 1}, 61: {0, 0}, 75: {0, 0},
}

func checkAdvertised(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	got := map[int16][2]int16{}
	for _, k := range keys {
		if _, dup := got[k.ApiKey]; dup {
			t.Errorf("api key %d listed twice", k.ApiKey)
		}
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if fmt.Sprint(got) != fmt.Sprint(advertised) {
		t.Errorf("advertised ranges:\n got %v\nwant %v", got, advertised)
	}
}

func TestApiVersionsListsAdvertisedRanges(t *testing.T) {
	n := startNode(t, nil)
	c := dialRaw(t, n.addr)
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kgate-test", "1.0"
		resp := c.do(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		checkAdvertised(t, resp.ApiKeys)
	}
	// kgo's negotiation sees the same table.
	vs, err := kadm.NewClient(newClient(t, n.addr)).ApiVersions(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 {
		t.Fatalf("kadm ApiVersions: %d brokers", len(vs))
	}
	for _, bv := range vs {
		if bv.Err != nil {
			t.Fatalf("kadm ApiVersions: %v", bv.Err)
		}
		checkAdvertised(t, bv.Raw().ApiKeys)
	}
}

func TestApiVersionsUnknownVersionAnswersV0(t *testing.T) {
	n := startNode(t, nil)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "future-client", "9.9"
	frame := requestFrame(req, 77, &testClientID)
	binary.BigEndian.PutUint16(frame[2:], 99) // a version from the future
	if err := c.write(sizePrefixed(frame)); err != nil {
		t.Fatal(err)
	}
	corr, body, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if corr != 77 {
		t.Fatalf("correlation id %d, want 77", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("answer is not an ApiVersions v0 response: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %d, want UNSUPPORTED_VERSION (35)", resp.ErrorCode)
	}
	checkAdvertised(t, resp.ApiKeys)
	// The connection stays usable: the client retries with a version it knows.
	req = kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	if resp := c.do(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("retry at v0: error %d", resp.ErrorCode)
	}
}

func TestUnsupportedVersionClosesConnection(t *testing.T) {
	n := startNode(t, nil)
	cases := map[string]kmsg.Request{
		"fetch v3 (below min)":     func() kmsg.Request { r := fetchReq("x", 0, 0, 0, 0, 1); r.SetVersion(3); return r }(),
		"metadata v13 (above max)": metadataReq(13, false, "x"),
		"join group (not served)":  func() kmsg.Request { r := kmsg.NewPtrJoinGroupRequest(); r.SetVersion(5); return r }(),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, n.addr)
			c.send(req)
			expectClosed(t, c.nc)
		})
	}
	t.Run("unknown api key", func(t *testing.T) {
		c := dialRaw(t, n.addr)
		frame := requestFrame(metadataReq(1, false, "x"), 5, &testClientID)
		binary.BigEndian.PutUint16(frame, 0x7000)
		if err := c.write(sizePrefixed(frame)); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c.nc)
	})
	expectServing(t, n.addr)
}

func TestOversizedFrameClosesConnection(t *testing.T) {
	const maxFrame = 64 << 10
	n := startNode(t, func(c *gateway.Config) { c.MaxFrameBytes = maxFrame })
	c := dialRaw(t, n.addr)
	frame := requestFrame(metadataReq(1, false, "x"), 1, &testClientID)
	frame = append(frame, make([]byte, maxFrame+1-len(frame))...)
	// The server may close before reading everything; the write can fail.
	go c.write(sizePrefixed(frame))
	expectClosed(t, c.nc)

	// A frame of exactly MaxFrameBytes is accepted.
	createTopic(t, n.addr, "edge", 1, nil)
	c = dialRaw(t, n.addr)
	var req *kmsg.ProduceRequest
	for v := maxFrame - 200; v < maxFrame; v++ {
		recs := []records.Record{{Value: make([]byte, v)}}
		req = produceReq(9, -1, "edge", 0, build(t, plainBuilder(), recs))
		if len(requestFrame(req, 0, &testClientID)) == maxFrame {
			break
		}
	}
	if got := len(requestFrame(req, 0, &testClientID)); got != maxFrame {
		t.Fatalf("could not build a %d-byte frame (last: %d)", maxFrame, got)
	}
	if sp := produceRaw(t, c, "edge", req.Topics[0].Partitions[0].Records); sp.ErrorCode != 0 {
		t.Fatalf("produce in a frame of exactly MaxFrameBytes: error %d", sp.ErrorCode)
	}
}

func TestNegativeOrTinyFrameSizeClosesConnection(t *testing.T) {
	n := startNode(t, nil)
	for _, size := range []uint32{0xffffffff, 0, 7} {
		c := dialRaw(t, n.addr)
		if err := c.write(binary.BigEndian.AppendUint32(nil, size)); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c.nc)
	}
	expectServing(t, n.addr)
}

func TestHugeSizePrefixWithFewBytesDoesNotAllocate(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) { c.ReadTimeout = 300 * time.Millisecond })
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c := dialRaw(t, n.addr)
	msg := binary.BigEndian.AppendUint32(nil, 100_000_000)
	msg = append(msg, 0, 3, 0, 1, 0, 0, 0, 1)
	if err := c.write(msg); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c.nc)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// The node is idle apart from this connection; a server that trusted
	// the size prefix would have allocated 100 MB.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Fatalf("server allocated %d MB for a frame that never arrived", grew>>20)
	}
	expectServing(t, n.addr)
}

// TestStalledFrameClosedAfterReadTimeout: a client that starts a frame
// and stalls (part of the size prefix, the prefix alone, or part of the
// body: slowloris) is closed after ReadTimeout, well before the idle
// timeout, and others are served meanwhile.
func TestStalledFrameClosedAfterReadTimeout(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) {
		c.ReadTimeout = 300 * time.Millisecond
		c.IdleTimeout = time.Hour
	})
	frame := requestFrame(metadataReq(1, false, "x"), 3, &testClientID)
	whole := sizePrefixed(frame)
	for _, stall := range []int{1, 3, 4, 4 + 6} {
		c := dialRaw(t, n.addr)
		if err := c.write(whole[:stall]); err != nil {
			t.Fatal(err)
		}
		expectServing(t, n.addr)
		expectClosed(t, c.nc)
	}
}

func TestIdleConnectionClosed(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) { c.IdleTimeout = 300 * time.Millisecond })
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	c.do(req)
	expectClosed(t, c.nc)
}

func TestMaxConnections(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) { c.MaxConnections = 2 })
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	a, b := dialRaw(t, n.addr), dialRaw(t, n.addr)
	a.do(req)
	b.do(req)
	expectClosed(t, dialRaw(t, n.addr).nc)
	// The two served connections keep working.
	a.do(req)
	b.do(req)
	// Once one closes, a new connection is taken (the server notices the
	// close asynchronously, so retry, bounded).
	a.nc.Close()
	ctx := testCtx(t)
	for {
		c := dialRaw(t, n.addr)
		c.send(req)
		if _, _, err := c.readFrame(); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no connection accepted after one of the two closed")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dialRawFrom is dialRaw from a chosen loopback address.
func dialRawFrom(t testing.TB, from, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: ioTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, corr: 1000}
}

// Kafka's max.connections.per.ip and its overrides: an address past its
// bound has new connections closed at once while other addresses, and its
// own open connections, are served; an override of 0 refuses an address.
func TestMaxConnectionsPerIP(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) {
		c.MaxConnectionsPerIP = 2
		c.ConnectionsPerIPOverrides = map[netip.Addr]int{
			netip.MustParseAddr("127.0.0.3"): 3,
			netip.MustParseAddr("127.0.0.4"): 0,
		}
	})
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	a, b := dialRawFrom(t, "127.0.0.2", n.addr), dialRawFrom(t, "127.0.0.2", n.addr)
	a.do(req)
	b.do(req)
	expectClosed(t, dialRawFrom(t, "127.0.0.2", n.addr).nc)
	a.do(req)
	for range 3 {
		dialRawFrom(t, "127.0.0.3", n.addr).do(req)
	}
	expectClosed(t, dialRawFrom(t, "127.0.0.3", n.addr).nc)
	expectClosed(t, dialRawFrom(t, "127.0.0.4", n.addr).nc)
	dialRawFrom(t, "127.0.0.5", n.addr).do(req)

	// Kafka's max.connections.per.ip=0 with overrides: only the addresses
	// overridden may connect.
	only := startNode(t, func(c *gateway.Config) {
		c.MaxConnectionsPerIP = -1
		c.ConnectionsPerIPOverrides = map[netip.Addr]int{netip.MustParseAddr("127.0.0.3"): 1}
	})
	dialRawFrom(t, "127.0.0.3", only.addr).do(req)
	expectClosed(t, dialRawFrom(t, "127.0.0.2", only.addr).nc)

	// Once one of 127.0.0.2's closes, it may open another (the server
	// notices the close asynchronously: retry, bounded).
	a.nc.Close()
	ctx := testCtx(t)
	for {
		c := dialRawFrom(t, "127.0.0.2", n.addr)
		c.send(req)
		if _, _, err := c.readFrame(); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no connection from 127.0.0.2 accepted after one of its two closed")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestGarbageBodyClosesConnectionOthersServed(t *testing.T) {
	n := startNode(t, nil)
	other := dialRaw(t, n.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	other.do(req)

	c := dialRaw(t, n.addr)
	frame := requestFrame(metadataReq(1, false, "x"), 3, &testClientID)
	hdrLen := 10 + len(testClientID)
	frame = append(frame[:hdrLen], 0x7f, 0xff, 0xff, 0xff, 'g', 'a', 'r', 'b') // 2^31-1 topics, 4 bytes
	if err := c.write(sizePrefixed(frame)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c.nc)

	// An existing connection and a new one both still get answers.
	if resp := other.do(metadataReq(12, false)).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
		t.Fatalf("metadata after garbage: %d brokers", len(resp.Brokers))
	}
	expectServing(t, n.addr)
}

func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "pipe", 1, nil)
	c := dialRaw(t, n.addr)
	type sent struct {
		corr int32
		req  kmsg.Request
	}
	var all []sent
	for i := 0; i < 60; i++ {
		var req kmsg.Request
		switch i % 5 {
		case 0:
			// A long poll that has to time out holds back the answers
			// of the quick requests pipelined behind it.
			req = fetchReq("pipe", 0, int64(i/5), 100, 1, 1<<20)
		case 1:
			req = produceReq(9, -1, "pipe", 0, build(t, plainBuilder(), valueRecords("p", 1)))
		case 2:
			req = metadataReq(12, false, "pipe")
		case 3:
			r := kmsg.NewPtrApiVersionsRequest()
			r.SetVersion(3)
			req = r
		case 4:
			r := kmsg.NewPtrListOffsetsRequest()
			r.SetVersion(8)
			r.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "pipe"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			req = r
		}
		all = append(all, sent{c.send(req), req})
	}
	var produced []int64
	for _, s := range all {
		resp := c.recv(s.corr, s.req)
		if p, ok := resp.(*kmsg.ProduceResponse); ok {
			sp := p.Topics[0].Partitions[0]
			if sp.ErrorCode != 0 {
				t.Fatalf("pipelined produce: error %d", sp.ErrorCode)
			}
			produced = append(produced, sp.BaseOffset)
		}
	}
	// Pipelined produces on one connection are applied in order.
	for i, off := range produced {
		if off != int64(i) {
			t.Fatalf("pipelined produce %d got base offset %d (all: %v)", i, off, produced)
		}
	}
}

// --- produce and fetch ----------------------------------------------------

func TestProduceFetchRoundTrip(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "round", 2, nil)
	prod := newClient(t, n.addr, kgo.DefaultProduceTopic("round"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var want []*kgo.Record
	for i := 0; i < 20; i++ {
		r := &kgo.Record{
			Key:       []byte("key-" + strconv.Itoa(i)),
			Value:     []byte(strings.Repeat("v", i)),
			Partition: int32(i % 2),
			Headers:   []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}, {Key: "empty", Value: []byte{}}},
			Timestamp: time.UnixMilli(1700000000000 + int64(i)),
		}
		if i == 7 {
			r.Key = nil
		}
		want = append(want, r)
	}
	if err := prod.ProduceSync(testCtx(t), want...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cons := newClient(t, n.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"round": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()},
	}))
	ctx := testCtx(t)
	var got []*kgo.Record
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(got), len(want))
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got = append(got, fs.Records()...)
	}
	if len(got) != len(want) {
		t.Fatalf("consumed %d records, want %d", len(got), len(want))
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Timestamp.Before(got[j].Timestamp) })
	for i, g := range got {
		w := want[i]
		if !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) || !bytes.Equal(g.Value, w.Value) ||
			g.Partition != w.Partition || !g.Timestamp.Equal(w.Timestamp) || fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers) {
			t.Errorf("record %d: got key %q value %q p%d ts %v headers %v; want key %q value %q p%d ts %v headers %v",
				i, g.Key, g.Value, g.Partition, g.Timestamp, g.Headers, w.Key, w.Value, w.Partition, w.Timestamp, w.Headers)
		}
	}
	// Offsets are dense per partition.
	next := map[int32]int64{}
	for _, g := range got {
		if g.Offset != next[g.Partition] {
			t.Errorf("partition %d: offset %d, want %d", g.Partition, g.Offset, next[g.Partition])
		}
		next[g.Partition]++
	}
}

func TestProduceCorruptCRC(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "crc", 1, nil)
	c := dialRaw(t, n.addr)
	batch := build(t, plainBuilder(), valueRecords("x", 3))
	batch[len(batch)-1] ^= 0xff // a flipped payload byte: the CRC no longer matches
	sp := produceRaw(t, c, "crc", batch)
	if sp.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("error %d, want CORRUPT_MESSAGE (2)", sp.ErrorCode)
	}
	if hw := highWatermark(t, c, "crc"); hw != 0 {
		t.Fatalf("high watermark %d after a rejected batch, want 0", hw)
	}
	if got := fetchRaw(t, c, "crc", 0); len(got.RecordBatches) != 0 {
		t.Fatalf("fetched %d bytes after a rejected batch", len(got.RecordBatches))
	}
}

func TestProduceRejectsBadBatches(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "bad", 1, nil)
	c := dialRaw(t, n.addr)
	good := build(t, plainBuilder(), valueRecords("x", 2))
	magic1 := append([]byte(nil), good...)
	magic1[16] = 1
	cases := []struct {
		name  string
		batch []byte
		want  *kerr.Error
	}{
		{"magic 1", magic1, kerr.InvalidRecord},
		{"two batches", append(append([]byte(nil), good...), good...), kerr.InvalidRecord},
		{"transactional", build(t, records.Builder{ProducerID: 5, ProducerEpoch: 0, BaseSequence: 0, Transactional: true}, valueRecords("t", 1)), kerr.TransactionalIDAuthorizationFailed}, // no transactional id: Kafka's code (TestProduceBatchChecks)
		{"truncated", good[:len(good)-3], kerr.InvalidRecord}, // no whole batch, as Kafka answers
	}
	for _, tc := range cases {
		if sp := produceRaw(t, c, "bad", tc.batch); sp.ErrorCode != tc.want.Code {
			t.Errorf("%s: error %d, want %s (%d)", tc.name, sp.ErrorCode, tc.want.Message, tc.want.Code)
		}
	}
	if hw := highWatermark(t, c, "bad"); hw != 0 {
		t.Fatalf("high watermark %d after rejected batches, want 0", hw)
	}
	// Produce v0-2 (message formats 0 and 1) is advertised but refused.
	resp := c.do(produceReq(2, -1, "bad", 0, good)).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnsupportedVersion.Code {
		t.Errorf("produce v2: error %d, want UNSUPPORTED_VERSION (35)", code)
	}
	// Unknown topic / partition.
	if sp := produceRaw(t, c, "nope", good); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: error %d", sp.ErrorCode)
	}
	resp = c.do(produceReq(9, -1, "bad", 3, good)).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown partition: error %d", code)
	}
	if hw := highWatermark(t, c, "bad"); hw != 0 {
		t.Fatalf("high watermark %d after rejected requests, want 0", hw)
	}
}

func TestProduceMessageTooLarge(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) { c.MaxMessageBytes = 4096 })
	createTopic(t, n.addr, "large", 1, nil)
	c := dialRaw(t, n.addr)
	big := build(t, plainBuilder(), []records.Record{{Value: make([]byte, 5000)}})
	if sp := produceRaw(t, c, "large", big); sp.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("error %d, want MESSAGE_TOO_LARGE (10)", sp.ErrorCode)
	}
	if sp := produceRaw(t, c, "large", build(t, plainBuilder(), valueRecords("small", 1))); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("small batch after a rejected one: error %d offset %d", sp.ErrorCode, sp.BaseOffset)
	}
}

func TestProduceFetchCompressed(t *testing.T) {
	n := startNode(t, nil)
	codecs := map[string]kgo.CompressionCodec{
		"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		topic := "comp-" + name
		createTopic(t, n.addr, topic, 1, nil)
		prod := newClient(t, n.addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec))
		var want []*kgo.Record
		for i := 0; i < 50; i++ {
			want = append(want, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte(name), 20+i)})
		}
		if err := prod.ProduceSync(testCtx(t), want...).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", name, err)
		}
		cons := newClient(t, n.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		ctx := testCtx(t)
		var got []*kgo.Record
		for len(got) < len(want) && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil && ctx.Err() == nil {
				t.Fatalf("%s: fetch: %v", name, err)
			}
			got = append(got, fs.Records()...)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: consumed %d of %d records", name, len(got), len(want))
		}
		for i := range want {
			if got[i].Offset != int64(i) || !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
				t.Fatalf("%s: record %d differs (offset %d)", name, i, got[i].Offset)
			}
		}
	}
}

func TestProduceInvalidAcks(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "acks", 1, nil)
	c := dialRaw(t, n.addr)
	resp := c.do(produceReq(9, 5, "acks", 0, build(t, plainBuilder(), valueRecords("x", 1)))).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("error %d, want INVALID_REQUIRED_ACKS (21)", code)
	}
	if hw := highWatermark(t, c, "acks"); hw != 0 {
		t.Fatalf("high watermark %d, want 0", hw)
	}
}

// refusingBackend fails every produce to the topic "refused" once the
// batch has reached it, as a full disk or a lost leadership fails it.
type refusingBackend struct{ *embedded.Backend }

func (b refusingBackend) Produce(ctx context.Context, batches []gateway.ProduceBatch) func() []gateway.ProduceResult {
	if batches[0].Topic != "refused" {
		return b.Backend.Produce(ctx, batches)
	}
	return func() []gateway.ProduceResult {
		res := make([]gateway.ProduceResult, len(batches))
		for i := range res {
			res[i].Err = kerr.KafkaStorageError
		}
		return res
	}
}

// TestProduceAcksZeroFailureInTheBackendCloses: an acks=0 batch the
// backend fails after the handler has passed it on still closes the
// connection, as Kafka closes it once the append has failed.
func TestProduceAcksZeroFailureInTheBackendCloses(t *testing.T) {
	n := startNodeOpts(t, nil, false, nodeOpts{wrap: func(b *embedded.Backend) gateway.Backend { return refusingBackend{b} }})
	createTopic(t, n.addr, "refused", 1, nil)
	c := dialRaw(t, n.addr)
	c.send(produceReq(9, 0, "refused", 0, build(t, plainBuilder(), valueRecords("a", 2))))
	expectClosed(t, c.nc)
}

func TestProduceAcksZero(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "fire", 1, nil)
	c := dialRaw(t, n.addr)
	for i := 0; i < 3; i++ {
		c.send(produceReq(9, 0, "fire", 0, build(t, plainBuilder(), valueRecords("a", 2))))
	}
	// The next answer on the connection is the metadata's: acks=0 produces
	// get none.
	md := metadataReq(12, false, "fire")
	corr := c.send(md)
	c.recv(corr, md)
	ctx := testCtx(t)
	for hw := highWatermark(t, c, "fire"); hw != 6; hw = highWatermark(t, c, "fire") {
		if hw > 6 {
			t.Fatalf("high watermark %d, want 6", hw)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("acks=0 data did not land: high watermark %d, want 6", hw)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if recs := decodeBatches(t, fetchRaw(t, c, "fire", 0).RecordBatches); len(recs) < 2 || string(recs[0].Value) != "a0" {
		t.Fatalf("fetched %d records", len(recs))
	}
}

// recvAsync reads the answer to req in the background.
func recvAsync(c *rawConn, corr int32, req kmsg.Request) <-chan asyncResult {
	done := make(chan asyncResult, 1)
	go func() {
		got, body, err := c.readFrame()
		if err == nil && got != corr {
			err = fmt.Errorf("correlation id %d, want %d", got, corr)
		}
		var resp kmsg.Response
		if err == nil {
			resp, err = decodeResponse(req, body)
		}
		done <- asyncResult{resp, err}
	}()
	return done
}

type asyncResult struct {
	resp kmsg.Response
	err  error
}

func waitResult(t *testing.T, ch <-chan asyncResult) kmsg.Response {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.resp
	case <-time.After(ioTimeout):
		t.Fatal("no answer")
	}
	return nil
}

// readSignal is a backend that reports each partition read once it has
// returned, so a test knows a long poll found nothing and is parking.
type readSignal struct {
	gateway.Backend
	reads chan int32 // partitions read
}

func (b readSignal) Read(ctx context.Context, topic string, partition int32, offset int64, maxBytes int) (gateway.ReadResult, error) {
	res, err := b.Backend.Read(ctx, topic, partition, offset, maxBytes)
	b.reads <- partition
	return res, err
}

func TestFetchLongPollWokenByProduce(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "poll", 2, nil)
	hooked := readSignal{Backend: n.backend, reads: make(chan int32, 16)}
	c := dialRaw(t, serveGateway(t, hooked, n.node).Addr().String())
	// A long poll at the high watermark of both partitions.
	req := fetchReq("poll", 0, 0, 10000, 1, 1<<20)
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	done := recvAsync(c, c.send(req), req)
	// Produce only once the poll has read both (empty) partitions: the
	// record can then reach it only by waking it.
	for range 2 {
		select {
		case <-hooked.reads:
		case <-time.After(ioTimeout):
			t.Fatal("the fetch did not read")
		}
	}
	prod := newClient(t, n.addr, kgo.DefaultProduceTopic("poll"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("wake up"), Partition: 1}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp := waitResult(t, done).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch answer: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	// Had the produce not woken the poll, it would have run to MaxWait and
	// answered from its last (empty) read.
	sp := resp.Topics[0].Partitions[1]
	recs := decodeBatches(t, sp.RecordBatches)
	if sp.ErrorCode != 0 || len(recs) != 1 || string(recs[0].Value) != "wake up" {
		t.Fatalf("long poll answered error %d with %d records", sp.ErrorCode, len(recs))
	}
}

// TestFetchLongPollCountsBytesPerPartition: a long poll over several
// partitions waiting for min_bytes re-reads only the partition an append
// woke it for, counting its bytes, and reads everything once more to
// answer when min_bytes is reached.
func TestFetchLongPollCountsBytesPerPartition(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "minbytes", 2, nil)
	hooked := readSignal{Backend: n.backend, reads: make(chan int32, 64)}
	c := dialRaw(t, serveGateway(t, hooked, n.node).Addr().String())
	one := build(t, plainBuilder(), valueRecords("m", 1))
	// Wait for more than one batch: two appends to partition 1 are needed.
	req := fetchReq("minbytes", 0, 0, 10000, int32(len(one)+1), 1<<20)
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	done := recvAsync(c, c.send(req), req)
	reads := map[int32]int{}
	// awaitReads waits until partition has been read n times in all.
	awaitReads := func(partition int32, n int) {
		t.Helper()
		for reads[partition] < n {
			select {
			case p := <-hooked.reads:
				reads[p]++
			case <-time.After(ioTimeout):
				t.Fatalf("partition %d read %d times, waiting for %d", partition, reads[partition], n)
			}
		}
	}
	awaitReads(0, 1)
	awaitReads(1, 1) // both empty partitions read: the poll waits
	pc := dialRaw(t, n.addr)
	first := produceReq(9, -1, "minbytes", 1, one)
	pc.recv(pc.send(first), first)
	awaitReads(1, 2) // woken: not yet min_bytes
	second := produceReq(9, -1, "minbytes", 1, build(t, plainBuilder(), valueRecords("m", 1)))
	pc.recv(pc.send(second), second)
	resp := waitResult(t, done).(*kmsg.FetchResponse)
	for {
		select {
		case p := <-hooked.reads:
			reads[p]++
			continue
		default:
		}
		break
	}
	if recs := decodeBatches(t, resp.Topics[0].Partitions[1].RecordBatches); len(recs) != 2 {
		t.Fatalf("long poll answered with %d records of partition 1, want 2", len(recs))
	}
	if reads[0] != 2 {
		t.Fatalf("partition 0 was read %d times, want 2 (the first read and the answer's)", reads[0])
	}
}

// TestAnswersNotHeldBehindLongPoll: an answer that is ready goes out even
// while a long poll pipelined behind it on the same connection is parked.
func TestAnswersNotHeldBehindLongPoll(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "held", 1, nil)
	createTopic(t, n.addr, "other", 1, nil)
	c := dialRaw(t, n.addr)
	// A produce (answered after the Raft commit, so the fetch behind it is
	// already queued when its answer is written), then a long poll.
	produce := produceReq(9, -1, "other", 0, build(t, plainBuilder(), valueRecords("first", 1)))
	produceCorr := c.send(produce)
	fetch := fetchReq("held", 0, 0, 10000, 1, 1<<20)
	fetchCorr := c.send(fetch)
	// The produce answer must arrive while the fetch still waits...
	if sp := c.recv(produceCorr, produce).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; sp.ErrorCode != 0 {
		t.Fatalf("produce: error %d", sp.ErrorCode)
	}
	// ...so a produce made only now still wakes that fetch.
	prod := newClient(t, n.addr, kgo.DefaultProduceTopic("held"))
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sp := fetchPartition(t, c.recv(fetchCorr, fetch).(*kmsg.FetchResponse))
	if recs := decodeBatches(t, sp.RecordBatches); len(recs) != 1 {
		t.Fatalf("the fetch answered with %d records: the produce answer was held until the fetch timed out", len(recs))
	}
}

func TestFetchMinBytesWaitsThenReturnsWhatThereIs(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "minb", 1, nil)
	c := dialRaw(t, n.addr)
	if sp := produceRaw(t, c, "minb", build(t, plainBuilder(), valueRecords("small", 2))); sp.ErrorCode != 0 {
		t.Fatalf("produce: error %d", sp.ErrorCode)
	}
	const maxWait = 500
	start := time.Now()
	sp := fetchPartition(t, c.do(fetchReq("minb", 0, 0, maxWait, 1<<20, 1<<20)).(*kmsg.FetchResponse))
	elapsed := time.Since(start)
	if sp.ErrorCode != 0 || sp.HighWatermark != 2 {
		t.Fatalf("error %d, high watermark %d", sp.ErrorCode, sp.HighWatermark)
	}
	if recs := decodeBatches(t, sp.RecordBatches); len(recs) != 2 {
		t.Fatalf("got %d records, want the 2 there are", len(recs))
	}
	// Not a performance check: answering before max_wait with less than
	// min_bytes would be wrong.
	if elapsed < maxWait*time.Millisecond {
		t.Fatalf("answered after %v, before max_wait %dms with less than min_bytes", elapsed, maxWait)
	}
}

func TestFetchReturnsFirstBatchLargerThanLimit(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "kip74", 1, nil)
	c := dialRaw(t, n.addr)
	big := make([]records.Record, 10)
	for i := range big {
		big[i].Value = bytes.Repeat([]byte{byte('a' + i)}, 1000)
	}
	first := build(t, plainBuilder(), big)
	produceRaw(t, c, "kip74", first)
	produceRaw(t, c, "kip74", build(t, plainBuilder(), valueRecords("second", 1)))

	for _, limits := range [][2]int32{{100, 1 << 20}, {1 << 20, 100}, {1, 1}} {
		req := fetchReq("kip74", 0, 0, 0, 1, limits[0])
		req.MaxBytes = limits[1]
		sp := fetchPartition(t, c.do(req).(*kmsg.FetchResponse))
		if sp.ErrorCode != 0 {
			t.Fatalf("limits %v: error %d", limits, sp.ErrorCode)
		}
		if len(sp.RecordBatches) != len(first) {
			t.Fatalf("limits %v: got %d bytes, want exactly the first batch (%d bytes)", limits, len(sp.RecordBatches), len(first))
		}
		if recs := decodeBatches(t, sp.RecordBatches); len(recs) != 10 {
			t.Fatalf("limits %v: got %d records", limits, len(recs))
		}
	}
	// Fetching in the middle of a batch returns the whole batch.
	sp := fetchPartition(t, c.do(fetchReq("kip74", 0, 5, 0, 1, 100)).(*kmsg.FetchResponse))
	if recs := decodeBatches(t, sp.RecordBatches); len(recs) != 10 || recs[0].Offset != 0 {
		t.Fatalf("fetch at 5: %d records", len(recs))
	}
}

// TestFetchBudgetAcrossPartitions: partitions are read in parallel, yet the
// response's max bytes is spent in request order, in whole batches, as if
// they had been read one after another.
func TestFetchBudgetAcrossPartitions(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "budget", 3, nil)
	c := dialRaw(t, n.addr)
	batch := func(tag string) []byte {
		recs := valueRecords(tag, 4)
		for i := range recs {
			recs[i].Value = append(recs[i].Value, bytes.Repeat([]byte{'x'}, 500)...)
		}
		return build(t, plainBuilder(), recs)
	}
	size := len(batch("p0a"))
	for p := int32(0); p < 3; p++ {
		for _, tag := range []string{"a", "b"} {
			resp := c.do(produceReq(9, -1, "budget", p, batch(fmt.Sprintf("p%d%s", p, tag)))).(*kmsg.ProduceResponse)
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("produce to %d: error %d", p, code)
			}
		}
	}
	// Asked in the order 2, 0, 1 with room for three batches and a half.
	req := fetchReq("budget", 2, 0, 0, 1, 1<<20)
	for _, p := range []int32{0, 1} {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	req.MaxBytes = int32(3*size + size/2)
	resp := c.do(req).(*kmsg.FetchResponse)
	want := map[int32]int{2: 2, 0: 1, 1: 0} // batches each partition gets
	for i, sp := range resp.Topics[0].Partitions {
		if sp.ErrorCode != 0 || sp.HighWatermark != 8 {
			t.Fatalf("partition %d: error %d, high watermark %d", sp.Partition, sp.ErrorCode, sp.HighWatermark)
		}
		if got := len(decodeBatches(t, sp.RecordBatches)) / 4; got != want[sp.Partition] || sp.Partition != []int32{2, 0, 1}[i] {
			t.Fatalf("answer %d is partition %d with %d batches, want %d", i, sp.Partition, got, want[sp.Partition])
		}
	}
}

func TestListOffsets(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "lo", 1, nil)
	c := dialRaw(t, n.addr)
	ts := func(vals ...int64) []records.Record {
		recs := make([]records.Record, len(vals))
		for i, v := range vals {
			recs[i] = records.Record{Timestamp: v, Value: []byte(strconv.FormatInt(v, 10))}
		}
		return recs
	}
	// offsets:      0     1       2     3       4
	// timestamps: 1000  1100    5000  2000    3000
	produceRaw(t, c, "lo", build(t, plainBuilder(), ts(1000, 1100)))
	produceRaw(t, c, "lo", build(t, plainBuilder(), ts(5000, 2000)))
	produceRaw(t, c, "lo", build(t, plainBuilder(), ts(3000)))
	cases := []struct {
		ts, off, at int64
	}{
		{-2, 0, -1},     // earliest
		{-1, 5, -1},     // latest
		{-3, 2, 5000},   // max timestamp
		{0, 0, 1000},    // before everything
		{1000, 0, 1000}, // exact
		{1050, 1, 1100},
		{1500, 2, 5000}, // first offset whose timestamp is >= 1500
		{5000, 2, 5000},
		{5001, -1, -1}, // none
	}
	for _, tc := range cases {
		p := listOffset(t, c, "lo", tc.ts)
		if p.ErrorCode != 0 || p.Offset != tc.off || p.Timestamp != tc.at {
			t.Errorf("timestamp %d: error %d offset %d timestamp %d, want offset %d timestamp %d",
				tc.ts, p.ErrorCode, p.Offset, p.Timestamp, tc.off, tc.at)
		}
	}
	// An empty partition and an unknown one.
	createTopic(t, n.addr, "lo-empty", 1, nil)
	if p := listOffset(t, c, "lo-empty", -3); p.ErrorCode != 0 || p.Offset != -1 {
		t.Errorf("max timestamp of an empty partition: error %d offset %d", p.ErrorCode, p.Offset)
	}
	if p := listOffset(t, c, "lo-missing", -1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: error %d", p.ErrorCode)
	}
}

// --- idempotence and producer ids ---------------------------------------

func initProducerID(t *testing.T, c *rawConn, txnID *string) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID = txnID
	req.TransactionTimeoutMillis = 60000
	return c.do(req).(*kmsg.InitProducerIDResponse)
}

func TestIdempotentProducerDeduplicates(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "idem", 1, nil)
	c := dialRaw(t, n.addr)
	ip := initProducerID(t, c, nil)
	if ip.ErrorCode != 0 || ip.ProducerID < 0 {
		t.Fatalf("InitProducerId: error %d id %d", ip.ErrorCode, ip.ProducerID)
	}
	bld := records.Builder{ProducerID: ip.ProducerID, ProducerEpoch: ip.ProducerEpoch, BaseSequence: 0, BaseTimestamp: time.Now().UnixMilli()}
	first := build(t, bld, valueRecords("once", 3))
	a := produceRaw(t, c, "idem", first)
	b := produceRaw(t, c, "idem", first) // a retry of the same batch
	if a.ErrorCode != 0 || b.ErrorCode != 0 || a.BaseOffset != b.BaseOffset {
		t.Fatalf("first: error %d offset %d; retry: error %d offset %d", a.ErrorCode, a.BaseOffset, b.ErrorCode, b.BaseOffset)
	}
	if hw := highWatermark(t, c, "idem"); hw != 3 {
		t.Fatalf("high watermark %d after a duplicate, want 3", hw)
	}
	if recs := decodeBatches(t, fetchRaw(t, c, "idem", 0).RecordBatches); len(recs) != 3 {
		t.Fatalf("fetched %d records, want 3", len(recs))
	}

	bld.BaseSequence = 3
	if sp := produceRaw(t, c, "idem", build(t, bld, valueRecords("next", 2))); sp.ErrorCode != 0 || sp.BaseOffset != 3 {
		t.Fatalf("next batch: error %d offset %d", sp.ErrorCode, sp.BaseOffset)
	}
	bld.BaseSequence = 10 // expected 5
	if sp := produceRaw(t, c, "idem", build(t, bld, valueRecords("gap", 1))); sp.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER (45)", sp.ErrorCode)
	}
	if hw := highWatermark(t, c, "idem"); hw != 5 {
		t.Fatalf("high watermark %d after a rejected gap, want 5", hw)
	}

	// A second producer gets another id.
	if ip2 := initProducerID(t, c, nil); ip2.ErrorCode != 0 || ip2.ProducerID == ip.ProducerID {
		t.Fatalf("second InitProducerId: error %d id %d (first %d)", ip2.ErrorCode, ip2.ProducerID, ip.ProducerID)
	}
}

// Without a transaction coordinator (the Iggy backend) a transactional
// producer is refused with a fatal error.
func TestInitProducerIDTransactionalRefused(t *testing.T) {
	n := startNode(t, nil)
	c := dialRaw(t, n.addr)
	ip := initProducerID(t, c, kmsg.StringPtr("my-txn"))
	if ip.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || ip.ProducerID != -1 {
		t.Fatalf("error %d id %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) and -1", ip.ErrorCode, ip.ProducerID)
	}
}

// --- topic admin ----------------------------------------------------------

func createTopicsReq(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 10000
	req.ValidateOnly = validateOnly
	req.Topics = topics
	return req
}

func newTopic(name string, partitions int32, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = name
	t.NumPartitions = partitions
	t.ReplicationFactor = -1
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = configs[i]
		c.Value = kmsg.StringPtr(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func TestCreateTopics(t *testing.T) {
	n := startNode(t, nil)
	c := dialRaw(t, n.addr)
	resp := c.do(createTopicsReq(false,
		newTopic("ct-ok", 3, "retention.ms", "1000"),
		newTopic("ct-dup", 1),
		newTopic("ct-dup", 1),
		newTopic("bad name!", 1),
		newTopic("ct-zero", 0),
		newTopic("ct-rf", 1),
		newTopic("ct-cfg", 1, "no.such.config", "1"),
		newTopic("ct-badval", 1, "retention.ms", "soon"),
		newTopic("ct-default", -1),
	)).(*kmsg.CreateTopicsResponse)
	want := []struct {
		name string
		code int16
	}{
		{"ct-ok", 0},
		{"ct-dup", kerr.InvalidRequest.Code}, // given twice, answered once (as Kafka does)
		{"bad name!", kerr.InvalidTopicException.Code},
		{"ct-zero", kerr.InvalidPartitions.Code},
		{"ct-rf", 0},
		{"ct-cfg", kerr.InvalidConfig.Code},
		{"ct-badval", kerr.InvalidConfig.Code},
		{"ct-default", 0},
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d topics in the answer, want %d", len(resp.Topics), len(want))
	}
	for i, w := range want {
		got := resp.Topics[i]
		if got.Topic != w.name || got.ErrorCode != w.code {
			t.Errorf("topic %d: %q error %d, want %q error %d", i, got.Topic, got.ErrorCode, w.name, w.code)
		}
	}
	if ok := resp.Topics[0]; ok.NumPartitions != 3 || ok.TopicID == [16]byte{} {
		t.Errorf("ct-ok: %d partitions, id %x", ok.NumPartitions, ok.TopicID)
	}
	for name, parts := range map[string]int{"ct-ok": 3, "ct-rf": 1, "ct-default": 1} {
		if mt := topicMeta(t, c, name); mt.ErrorCode != 0 || len(mt.Partitions) != parts {
			t.Errorf("%s: metadata error %d, %d partitions, want %d", name, mt.ErrorCode, len(mt.Partitions), parts)
		}
	}
	for _, name := range []string{"ct-dup", "ct-zero", "ct-cfg", "ct-badval"} {
		if mt := topicMeta(t, c, name); mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("%s was created (metadata error %d)", name, mt.ErrorCode)
		}
	}

	// Already exists.
	resp = c.do(createTopicsReq(false, newTopic("ct-ok", 1))).(*kmsg.CreateTopicsResponse)
	if code := resp.Topics[0].ErrorCode; code != kerr.TopicAlreadyExists.Code {
		t.Errorf("existing topic: error %d, want TOPIC_ALREADY_EXISTS (36)", code)
	}
	// A replication factor beyond the one node.
	rf := newTopic("ct-rf3", 1)
	rf.ReplicationFactor = 3
	resp = c.do(createTopicsReq(false, rf)).(*kmsg.CreateTopicsResponse)
	if code := resp.Topics[0].ErrorCode; code != kerr.InvalidReplicationFactor.Code {
		t.Errorf("replication factor 3: error %d, want INVALID_REPLICATION_FACTOR (38)", code)
	}

	// validate_only checks but creates nothing.
	resp = c.do(createTopicsReq(true, newTopic("ct-validate", 2), newTopic("ct-validate-bad", 1, "cleanup.policy", "shrink"))).(*kmsg.CreateTopicsResponse)
	if code := resp.Topics[0].ErrorCode; code != 0 || resp.Topics[0].NumPartitions != 2 {
		t.Errorf("validate only: error %d, %d partitions", code, resp.Topics[0].NumPartitions)
	}
	if code := resp.Topics[1].ErrorCode; code != kerr.InvalidConfig.Code {
		t.Errorf("validate only, bad config: error %d", code)
	}
	if mt := topicMeta(t, c, "ct-validate"); mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("validate_only created the topic (metadata error %d)", mt.ErrorCode)
	}
}

func TestDeleteTopics(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "del-name", 1, nil)
	createTopic(t, n.addr, "del-id", 2, nil)
	c := dialRaw(t, n.addr)
	produceRaw(t, c, "del-name", build(t, plainBuilder(), valueRecords("x", 1)))
	id := topicMeta(t, c, "del-id").TopicID

	byName := kmsg.NewPtrDeleteTopicsRequest()
	byName.SetVersion(5)
	byName.TimeoutMillis = 10000
	byName.TopicNames = []string{"del-name", "del-missing"}
	resp := c.do(byName).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete by name: %+v", resp.Topics)
	}

	byID := kmsg.NewPtrDeleteTopicsRequest()
	byID.SetVersion(6)
	byID.TimeoutMillis = 10000
	for _, tid := range [][16]byte{id, {9, 9, 9}} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.TopicID = tid
		byID.Topics = append(byID.Topics, dt)
	}
	resp = c.do(byID).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("delete by id: %d answers", len(resp.Topics))
	}
	if got := resp.Topics[0]; got.ErrorCode != 0 || got.Topic == nil || *got.Topic != "del-id" || got.TopicID != id {
		t.Errorf("delete by id: %+v", got)
	}
	if got := resp.Topics[1]; got.ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("delete unknown id: error %d, want UNKNOWN_TOPIC_ID (100)", got.ErrorCode)
	}
	for _, name := range []string{"del-name", "del-id"} {
		if mt := topicMeta(t, c, name); mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("%s still exists (metadata error %d)", name, mt.ErrorCode)
		}
	}
	entries, err := os.ReadDir(filepath.Join(n.dataDir, "topics"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("partition directories left after delete: %d", len(entries))
	}
	// A topic re-created under the name is empty.
	createTopic(t, n.addr, "del-name", 1, nil)
	if hw := highWatermark(t, c, "del-name"); hw != 0 {
		t.Errorf("re-created topic has high watermark %d", hw)
	}
}

func TestCreatePartitions(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "grow", 1, nil)
	c := dialRaw(t, n.addr)
	req := func(count int32, validateOnly bool) int16 {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.SetVersion(3)
		r.TimeoutMillis = 10000
		r.ValidateOnly = validateOnly
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic = "grow"
		rt.Count = count
		r.Topics = append(r.Topics, rt)
		return c.do(r).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
	}
	if code := req(5, true); code != 0 {
		t.Fatalf("validate only grow: error %d", code)
	}
	if parts := len(topicMeta(t, c, "grow").Partitions); parts != 1 {
		t.Fatalf("validate only changed the topic: %d partitions", parts)
	}
	if code := req(3, false); code != 0 {
		t.Fatalf("grow to 3: error %d", code)
	}
	if parts := len(topicMeta(t, c, "grow").Partitions); parts != 3 {
		t.Fatalf("after growing: %d partitions, want 3", parts)
	}
	for _, count := range []int32{2, 3} {
		if code := req(count, false); code != kerr.InvalidPartitions.Code {
			t.Errorf("count %d: error %d, want INVALID_PARTITIONS (37)", count, code)
		}
	}
	if parts := len(topicMeta(t, c, "grow").Partitions); parts != 3 {
		t.Fatalf("after rejected changes: %d partitions, want 3", parts)
	}
	// A new partition takes data.
	resp := c.do(produceReq(9, -1, "grow", 2, build(t, plainBuilder(), valueRecords("p2", 1)))).(*kmsg.ProduceResponse)
	if sp := resp.Topics[0].Partitions[0]; sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("produce to new partition: error %d offset %d", sp.ErrorCode, sp.BaseOffset)
	}
}

func TestDescribeConfigs(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "conf", 1, map[string]*string{"retention.ms": kmsg.StringPtr("123456")})
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeTopic
	res.ResourceName = "conf"
	req.Resources = append(req.Resources, res)
	missing := res
	missing.ResourceName = "conf-missing"
	req.Resources = append(req.Resources, missing)
	resp := c.do(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe configs: %+v", resp.Resources)
	}
	if code := resp.Resources[1].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: error %d", code)
	}
	cfgs := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, cf := range resp.Resources[0].Configs {
		cfgs[cf.Name] = cf
	}
	ret, ok := cfgs["retention.ms"]
	if !ok || ret.Value == nil || *ret.Value != "123456" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig || ret.IsDefault {
		t.Errorf("retention.ms: %+v", ret)
	}
	seg, ok := cfgs["segment.bytes"]
	if !ok || seg.Value == nil || seg.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.bytes: %+v", seg)
	}

	// kadm sees the same.
	rcs, err := kadm.NewClient(newClient(t, n.addr)).DescribeTopicConfigs(testCtx(t), "conf")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("conf", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cf := range rc.Configs {
		if cf.Key == "retention.ms" {
			found = cf.MaybeValue() == "123456" && cf.Source == kmsg.ConfigSourceDynamicTopicConfig
		}
	}
	if !found {
		t.Errorf("kadm: retention.ms not reported as a dynamic topic config of 123456")
	}
}

func TestDescribeCluster(t *testing.T) {
	n := startNode(t, nil)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.SetVersion(1)
	resp := c.do(req).(*kmsg.DescribeClusterResponse)
	md := c.do(metadataReq(12, false)).(*kmsg.MetadataResponse)
	if resp.ErrorCode != 0 || resp.ClusterID == "" || md.ClusterID == nil || resp.ClusterID != *md.ClusterID {
		t.Fatalf("cluster id %q (metadata %v), error %d", resp.ClusterID, md.ClusterID, resp.ErrorCode)
	}
	if resp.ControllerID != 1 || md.ControllerID != 1 {
		t.Errorf("controller %d (metadata %d), want 1", resp.ControllerID, md.ControllerID)
	}
	host, port, _ := net.SplitHostPort(n.addr)
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != host || strconv.Itoa(int(resp.Brokers[0].Port)) != port {
		t.Errorf("brokers: %+v, want node 1 at %s", resp.Brokers, n.addr)
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	n := startNode(t, nil)
	c := dialRaw(t, n.addr)
	mt := c.do(metadataReq(12, false, "auto-no")).(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("allow_auto_topic_creation=false: error %d", mt.ErrorCode)
	}
	if mt := topicMeta(t, c, "auto-no"); mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("topic created although the client did not allow it (error %d)", mt.ErrorCode)
	}
	mt = c.do(metadataReq(12, true, "auto-yes")).(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != 0 || len(mt.Partitions) != 1 || mt.Partitions[0].Leader != 1 {
		t.Fatalf("auto-create: error %d, %d partitions", mt.ErrorCode, len(mt.Partitions))
	}
	if mt := c.do(metadataReq(12, true, "bad name")).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("invalid name: error %d", mt.ErrorCode)
	}
	// Metadata v12 by topic id.
	id := topicMeta(t, c, "auto-yes").TopicID
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, tid := range [][16]byte{id, {1, 2, 3}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = tid
		req.Topics = append(req.Topics, rt)
	}
	resp := c.do(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("by id: %d topics", len(resp.Topics))
	}
	if got := resp.Topics[0]; got.ErrorCode != 0 || got.Topic == nil || *got.Topic != "auto-yes" || got.TopicID != id {
		t.Errorf("by id: %+v", got)
	}
	if got := resp.Topics[1]; got.ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("unknown id: error %d, want UNKNOWN_TOPIC_ID (100)", got.ErrorCode)
	}
}

func TestMetadataTopicLists(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "list-a", 1, nil)
	createTopic(t, n.addr, "list-b", 2, nil)
	c := dialRaw(t, n.addr)
	names := func(resp *kmsg.MetadataResponse) []string {
		var out []string
		for _, mt := range resp.Topics {
			if mt.ErrorCode != 0 || mt.Topic == nil {
				t.Fatalf("metadata topic error %d", mt.ErrorCode)
			}
			out = append(out, *mt.Topic)
		}
		sort.Strings(out)
		return out
	}
	for _, v := range []int16{1, 4, 9, 12} {
		all := metadataReq(v, false) // null list: every topic
		if got := names(c.do(all).(*kmsg.MetadataResponse)); fmt.Sprint(got) != "[list-a list-b]" {
			t.Errorf("v%d null list: %v", v, got)
		}
		none := metadataReq(v, false)
		none.Topics = []kmsg.MetadataRequestTopic{} // empty list: brokers only
		resp := c.do(none).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 0 || len(resp.Brokers) != 1 {
			t.Errorf("v%d empty list: %d topics, %d brokers", v, len(resp.Topics), len(resp.Brokers))
		}
	}
	// v0: an empty list means every topic.
	v0 := metadataReq(0, false)
	v0.Topics = []kmsg.MetadataRequestTopic{}
	if got := names(c.do(v0).(*kmsg.MetadataResponse)); fmt.Sprint(got) != "[list-a list-b]" {
		t.Errorf("v0 empty list: %v", got)
	}
}

func TestMetadataAutoCreateDisabledOnServer(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) { c.AutoCreateTopics = false })
	c := dialRaw(t, n.addr)
	for _, v := range []int16{1, 12} {
		if mt := c.do(metadataReq(v, true, "never")).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("v%d: error %d", v, mt.ErrorCode)
		}
	}
}

// --- retention ------------------------------------------------------------

func segmentFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			n++
		}
	}
	return n
}

func TestRetentionBytesDeletesOldSegments(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n.addr, "ret", 1, map[string]*string{
		"internal.segment.bytes": kmsg.StringPtr("2048"),
		"retention.bytes":        kmsg.StringPtr("4096"),
	})
	// A compact-only topic (Kafka Streams' changelogs) is never trimmed:
	// kgate does not compact, and retention applies with "delete" only.
	createTopic(t, n.addr, "cmp", 1, map[string]*string{
		"internal.segment.bytes": kmsg.StringPtr("2048"),
		"retention.bytes":        kmsg.StringPtr("4096"),
		"cleanup.policy":         kmsg.StringPtr("compact"),
	})
	c := dialRaw(t, n.addr)
	for i := 0; i < 40; i++ {
		recs := []records.Record{{Value: bytes.Repeat([]byte{byte(i)}, 400)}}
		for _, topic := range []string{"ret", "cmp"} {
			if sp := produceRaw(t, c, topic, build(t, plainBuilder(), recs)); sp.ErrorCode != 0 {
				t.Fatalf("produce %d to %s: error %d", i, topic, sp.ErrorCode)
			}
		}
	}
	id := topicMeta(t, c, "ret").TopicID
	dir := filepath.Join(n.dataDir, "topics", fmt.Sprintf("%x-0", id))
	before := segmentFiles(t, dir)
	if before < 5 {
		t.Fatalf("only %d segment files after 40 batches of 400 bytes with internal.segment.bytes=2048", before)
	}
	if p := listOffset(t, c, "ret", -2); p.Offset != 0 {
		t.Fatalf("log start %d before retention ran", p.Offset)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.backend.RunRetention(ctx, 50*time.Millisecond)
	}()
	t.Cleanup(func() { stop(); wg.Wait() })

	deadline := testCtx(t)
	var start int64
	for {
		p := listOffset(t, c, "ret", -2)
		if p.ErrorCode != 0 {
			t.Fatalf("list offsets earliest: error %d", p.ErrorCode)
		}
		if start = p.Offset; start > 0 {
			break
		}
		select {
		case <-deadline.Done():
			t.Fatal("retention never moved the log start offset")
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Retention visits topics in name order: the pass that trimmed "ret"
	// has been through "cmp".
	if p := listOffset(t, c, "cmp", -2); p.ErrorCode != 0 || p.Offset != 0 {
		t.Errorf("compact-only topic: log start %d (error %d), want 0: retention must not trim it", p.Offset, p.ErrorCode)
	}
	if sp := fetchRaw(t, c, "ret", 0); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch below log start: error %d, want OFFSET_OUT_OF_RANGE", sp.ErrorCode)
	}
	if sp := fetchRaw(t, c, "ret", start); sp.ErrorCode != 0 || len(sp.RecordBatches) == 0 {
		t.Errorf("fetch at log start %d: error %d, %d bytes", start, sp.ErrorCode, len(sp.RecordBatches))
	} else if recs := decodeBatches(t, sp.RecordBatches); recs[0].Offset != start || recs[0].Value[0] != byte(start) {
		t.Errorf("fetch at log start %d: first record offset %d value %d", start, recs[0].Offset, recs[0].Value[0])
	}
	if hw := highWatermark(t, c, "ret"); hw != 40 {
		t.Errorf("high watermark %d after retention, want 40", hw)
	}
	after := segmentFiles(t, dir)
	if after >= before {
		t.Errorf("%d segment files after retention, %d before", after, before)
	}
	// What is kept fits retention.bytes (plus the active segment).
	var kept int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".log") {
			kept += info.Size()
		}
	}
	if kept > 4096+2048 {
		t.Errorf("%d bytes kept with retention.bytes=4096 and internal.segment.bytes=2048", kept)
	}
	checkRetentionMetrics(t, n.backend, dir, before)
}

// checkRetentionMetrics: the backend's metrics count the segments
// retention deleted and the ones left.
func checkRetentionMetrics(t *testing.T, b prometheus.Collector, dir string, before int) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(b)
	deadline := testCtx(t)
	for {
		after := segmentFiles(t, dir)
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var deletedSegs, deletedBytes, segs float64
		deleted := 0 // series of the deleted-segments counter
		for _, f := range fams {
			for _, m := range f.Metric {
				switch f.GetName() {
				case "kgate_retention_deleted_segments_total":
					deletedSegs = m.Counter.GetValue()
					deleted++
				case "kgate_retention_deleted_bytes_total":
					deletedBytes = m.Counter.GetValue()
				case "kgate_partition_segments":
					segs = m.Gauge.GetValue()
				}
			}
		}
		if deleted == 1 && int(deletedSegs) == before-after && int(segs) == after && deletedBytes > float64(deletedSegs)*400 {
			return
		}
		select {
		case <-deadline.Done():
			t.Fatalf("metrics: %v segments (%v bytes) deleted, %v left; files: %d before, %d now", deletedSegs, deletedBytes, segs, before, after)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Fetches read into pooled buffers (readArena) that go back once each answer
// is encoded: many connections fetching different partitions at once must
// each get exactly their own partition's batches, intact.
func TestConcurrentFetchesGetTheirOwnBytes(t *testing.T) {
	n := startNode(t, nil)
	const parts = 4
	createTopic(t, n.addr, "pooled", parts, nil)
	c := dialRaw(t, n.addr)
	for p := int32(0); p < parts; p++ {
		for i := 0; i < 20; i++ {
			// Batches of different sizes, so buffers of several classes.
			recs := valueRecords(fmt.Sprintf("p%d-", p), 50+200*(i%4))
			for j := range recs {
				recs[j].Value = append(recs[j].Value, bytes.Repeat([]byte{byte('a' + p)}, 100*int(p+1))...)
			}
			resp := c.do(produceReq(9, -1, "pooled", p, build(t, plainBuilder(), recs))).(*kmsg.ProduceResponse)
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("produce to %d: code %d", p, code)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, parts*2)
	for w := 0; w < parts*2; w++ {
		p := int32(w % parts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fc := dialRaw(t, n.addr)
			for round := 0; round < 30; round++ {
				offset := int64(0)
				for {
					resp := fc.do(fetchReq("pooled", p, offset, 0, 0, 64<<10)).(*kmsg.FetchResponse)
					sp := resp.Topics[0].Partitions[0]
					if sp.ErrorCode != 0 {
						errs <- fmt.Errorf("partition %d at %d: code %d", p, offset, sp.ErrorCode)
						return
					}
					if len(sp.RecordBatches) == 0 {
						break
					}
					for data := sp.RecordBatches; len(data) > 0; {
						h, recs, err := records.Records(data, 1<<20)
						if err != nil {
							errs <- fmt.Errorf("partition %d at %d: %v", p, offset, err)
							return
						}
						if h.BaseOffset != offset {
							errs <- fmt.Errorf("partition %d: batch at %d, want %d", p, h.BaseOffset, offset)
							return
						}
						for _, r := range recs {
							if !bytes.HasPrefix(r.Value, []byte(fmt.Sprintf("p%d-", p))) || !bytes.HasSuffix(r.Value, []byte{byte('a' + p)}) {
								errs <- fmt.Errorf("partition %d at %d: a record of another partition: %.20q", p, offset, r.Value)
								return
							}
						}
						offset = h.LastOffset() + 1
						data = data[h.Size():]
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
