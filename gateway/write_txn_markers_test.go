package gateway_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

func writeTxnMarker(pid int64, epoch int16, commit bool, topic string, partitions ...int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, commit
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = topic, partitions
	m.Topics = append(m.Topics, rt)
	req.Markers = append(req.Markers, m)
	return req
}

// markerCodes lists the answer's codes as "topic/partition=CODE".
func markerCodes(resp *kmsg.WriteTxnMarkersResponse) string {
	var out []string
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				name := "NONE"
				if p.ErrorCode != 0 {
					name = kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Message
				}
				out = append(out, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, name))
			}
		}
	}
	return fmt.Sprint(out)
}

func openTxnStart(t *testing.T, c *rawConn, topic string, pid int64) int64 {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	p := c.do(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	for _, ap := range p.ActiveProducers {
		if ap.ProducerID == pid {
			return ap.CurrentTxnStartOffset
		}
	}
	t.Fatalf("producer %d not in DescribeProducers: %+v", pid, p)
	return 0
}

// WriteTxnMarkers, as kafka-transactions abort sends it, closes a
// partition's open transaction: read_committed moves past it and its
// records are aborted. The answers are those an Apache Kafka 4.3.2 broker
// gave to the same requests.
func TestWriteTxnMarkersAbortsOpenTransaction(t *testing.T) {
	n := startGroupNode(t)
	createTopic(t, n.addr, "wm", 1, nil)
	c := dialRaw(t, n.addr)
	ip := initTxn(t, c, 4, "tx-w", 60000, -1, -1)
	pid, epoch := ip.ProducerID, ip.ProducerEpoch
	if code := addPartition(c, 3, "tx-w", pid, epoch, "wm", 0); code != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", code)
	}
	if code := produceTxn(t, c, "tx-w", "wm", txnBatch(t, pid, epoch, 0, "open", 2)); code != 0 {
		t.Fatalf("produce: %d", code)
	}
	if s := openTxnStart(t, c, "wm", pid); s != 0 {
		t.Fatalf("open transaction start %d, want 0", s)
	}
	if lso := listOffsetCommitted(t, c, "wm"); lso != 0 {
		t.Fatalf("read_committed end %d, want 0", lso)
	}
	resp := c.do(writeTxnMarker(pid, epoch, false, "wm", 0, 5)).(*kmsg.WriteTxnMarkersResponse)
	if got := markerCodes(resp); got != "[wm/0=NONE wm/5=UNKNOWN_TOPIC_OR_PARTITION]" || resp.Markers[0].ProducerID != pid {
		t.Fatalf("abort: %s", got)
	}
	if s := openTxnStart(t, c, "wm", pid); s != -1 {
		t.Fatalf("open transaction start %d after the abort, want none", s)
	}
	if lso, hw := listOffsetCommitted(t, c, "wm"), highWatermark(t, c, "wm"); lso != 3 || hw != 3 {
		t.Fatalf("after the abort: read_committed end %d, high watermark %d, want 3 3", lso, hw)
	}
	f := fetchCommitted(t, c, "wm")
	if len(f.AbortedTransactions) != 1 || f.AbortedTransactions[0].ProducerID != pid || f.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted transactions %+v", f.AbortedTransactions)
	}
	// No open transaction there any more, as for a producer never seen:
	// Kafka writes the marker and answers NONE.
	for _, req := range []*kmsg.WriteTxnMarkersRequest{writeTxnMarker(pid, epoch, false, "wm", 0), writeTxnMarker(pid+100, 0, true, "wm", 0)} {
		if got := markerCodes(c.do(req).(*kmsg.WriteTxnMarkersResponse)); got != "[wm/0=NONE]" {
			t.Fatalf("marker without an open transaction: %s", got)
		}
	}
	// A newer epoch fences the producer in the partition; an older one is
	// refused.
	if got := markerCodes(c.do(writeTxnMarker(pid, epoch+1, false, "wm", 0)).(*kmsg.WriteTxnMarkersResponse)); got != "[wm/0=NONE]" {
		t.Fatalf("marker at a newer epoch: %s", got)
	}
	if got := markerCodes(c.do(writeTxnMarker(pid, epoch, false, "wm", 0)).(*kmsg.WriteTxnMarkersResponse)); got != "[wm/0=INVALID_PRODUCER_EPOCH]" {
		t.Fatalf("marker at an older epoch: %s", got)
	}
	if code := produceTxn(t, c, "tx-w", "wm", txnBatch(t, pid, epoch, 2, "late", 1)); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("produce at the fenced epoch: %v", kerr.ErrorForCode(code))
	}
	// A marker's coordinator epoch is kept and shown; an older one is
	// fenced.
	withCoord := func(coord int32) string {
		req := writeTxnMarker(pid, epoch+1, false, "wm", 0)
		req.Markers[0].CoordinatorEpoch = coord
		return markerCodes(c.do(req).(*kmsg.WriteTxnMarkersResponse))
	}
	if got := withCoord(3); got != "[wm/0=NONE]" {
		t.Fatalf("marker with coordinator epoch 3: %s", got)
	}
	if ce := coordinatorEpoch(t, c, "wm", pid); ce != 3 {
		t.Fatalf("DescribeProducers coordinator epoch %d, want 3", ce)
	}
	if got := withCoord(2); got != "[wm/0=TRANSACTION_COORDINATOR_FENCED]" {
		t.Fatalf("marker with an older coordinator epoch: %s", got)
	}
	// An empty request gets an empty answer.
	if r := c.do(kmsg.NewPtrWriteTxnMarkersRequest()).(*kmsg.WriteTxnMarkersResponse); len(r.Markers) != 0 {
		t.Fatalf("empty request: %+v", r)
	}
}

func coordinatorEpoch(t *testing.T, c *rawConn, topic string, pid int64) int32 {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	for _, ap := range c.do(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ActiveProducers {
		if ap.ProducerID == pid {
			return ap.CoordinatorEpoch
		}
	}
	t.Fatalf("producer %d not in DescribeProducers", pid)
	return 0
}

func listOffsetCommitted(t *testing.T, c *rawConn, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

func fetchCommitted(t *testing.T, c *rawConn, topic string) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchReq(topic, 0, 0, 0, 1, 1<<20)
	req.IsolationLevel = 1
	return fetchPartition(t, c.do(req).(*kmsg.FetchResponse))
}

// WriteTxnMarkers needs ALTER or CLUSTER_ACTION on the cluster, as in
// Kafka; refused, every partition answers CLUSTER_AUTHORIZATION_FAILED and
// nothing is written.
func TestWriteTxnMarkersAuthorization(t *testing.T) {
	n := aclNode(t, nil)
	admin := kadm.NewClient(userClient(t, n.addr, "admin"))
	ctx := testCtx(t)
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpAll))
	alice := userClient(t, n.addr, "alice")
	bob := userClient(t, n.addr, "bob")
	issue(t, alice, kmsg.NewPtrMetadataRequest())
	issue(t, bob, kmsg.NewPtrMetadataRequest())
	send := func(user string) string {
		t.Helper()
		cl := alice
		if user == "bob" {
			cl = bob
		}
		resp, err := cl.Broker(1).Request(ctx, writeTxnMarker(5, 0, false, "orders", 0))
		if err != nil {
			t.Fatal(err)
		}
		return markerCodes(resp.(*kmsg.WriteTxnMarkersResponse))
	}
	if got := send("alice"); got != "[orders/0=CLUSTER_AUTHORIZATION_FAILED]" {
		t.Fatalf("alice (all on the topic, nothing on the cluster): %s", got)
	}
	end := func() int64 {
		offs, err := admin.ListEndOffsets(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup("orders", 0)
		return o.Offset
	}
	if hw := end(); hw != 0 {
		t.Fatalf("a refused marker was written (end offset %d)", hw)
	}
	grant(t, admin, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpClusterAction))
	grant(t, admin, kadm.NewACLs().Allow("User:bob").Clusters().Operations(kadm.OpAlter))
	for _, user := range []string{"alice", "bob"} {
		if got := send(user); got != "[orders/0=NONE]" {
			t.Fatalf("%s with its cluster ACL: %s", user, got)
		}
	}
	if hw := end(); hw != 2 {
		t.Fatalf("end offset %d, want the two markers", hw)
	}
}

// Below LevelTxnMarkers (a voter still runs an older kgate) WriteTxnMarkers
// is answered UNSUPPORTED_VERSION and writes nothing.
func TestWriteTxnMarkersBelowItsLevel(t *testing.T) {
	held := fsm.LevelIdleExpiry
	n := startNodeAt(t, nil, true, &held)
	createTopic(t, n.addr, "wl", 1, nil)
	c := dialRaw(t, n.addr)
	if got := markerCodes(c.do(writeTxnMarker(5, 0, false, "wl", 0)).(*kmsg.WriteTxnMarkersResponse)); got != "[wl/0=UNSUPPORTED_VERSION]" {
		t.Fatalf("below LevelTxnMarkers: %s", got)
	}
	if hw := highWatermark(t, c, "wl"); hw != 0 {
		t.Fatalf("a marker was written below its level (high watermark %d)", hw)
	}
}
