package iggytest_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
)

var s0, t0 = iggy.NumericID(0), iggy.NumericID(0)

func send(t *testing.T, c *client, p iggy.Partitioning, msgs ...iggy.Message) []iggy.SendConfirmation {
	t.Helper()
	req := must[iggy.Request](t)(iggy.SendMessages(c.d, s0, t0, p, msgs))
	return must[[]iggy.SendConfirmation](t)(iggy.DecodeSendMessagesReply(c.d, c.ok(req)))
}

func pollReq(t *testing.T, p iggy.Poll) iggy.Request {
	t.Helper()
	if p.Consumer.Kind == 0 {
		p.Consumer = iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(1)}
	}
	// (s0 and t0 are the zero Identifier: nothing to default.)
	return must[iggy.Request](t)(iggy.PollMessages(p))
}

func pollMsgs(t *testing.T, c *client, p iggy.Poll) *iggy.PolledMessages {
	t.Helper()
	return must[*iggy.PolledMessages](t)(iggy.DecodePollMessagesReply(c.d, c.ok(pollReq(t, p))))
}

func offsets(pm *iggy.PolledMessages) []uint64 {
	out := []uint64{}
	for _, m := range pm.Messages {
		out = append(out, m.Offset)
	}
	return out
}

func expectOffsets(t *testing.T, pm *iggy.PolledMessages, want ...uint64) {
	t.Helper()
	if want == nil {
		want = []uint64{}
	}
	if got := offsets(pm); !reflect.DeepEqual(got, want) || pm.Count != uint32(len(want)) {
		t.Fatalf("offsets %v (count %d), want %v", got, pm.Count, want)
	}
}

func strHeader(k, v string) iggy.UserHeader {
	return iggy.UserHeader{Key: iggy.HeaderValue{Kind: 2, Value: []byte(k)}, Value: iggy.HeaderValue{Kind: 1, Value: []byte(v)}}
}

func testMessages(base uint64, n int, tag string) []iggy.Message {
	out := make([]iggy.Message, n)
	for i := range out {
		out[i] = iggy.Message{
			ID:              iggy.MessageID(uint64(i+1), 0xfeed),
			OriginTimestamp: base + uint64(i)*1000,
			Payload:         []byte(fmt.Sprintf("%s-%d", tag, i)),
		}
		if i%2 == 1 {
			out[i].Headers = []iggy.UserHeader{strHeader("trace", tag), strHeader("bin", "\x00\x01\xff")}
		}
	}
	return out
}

func checkMessage(t *testing.T, got iggy.PolledMessage, want iggy.Message) {
	t.Helper()
	if got.ID != want.ID || got.OriginTimestamp != want.OriginTimestamp || !bytes.Equal(got.Payload, want.Payload) {
		t.Fatalf("message %d: got id %x origin %d payload %q, want id %x origin %d payload %q",
			got.Offset, got.ID, got.OriginTimestamp, got.Payload, want.ID, want.OriginTimestamp, want.Payload)
	}
	hs, err := iggy.DecodeUserHeaders(got.UserHeaders)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != len(want.Headers) {
		t.Fatalf("message %d: %d headers, want %d", got.Offset, len(hs), len(want.Headers))
	}
	for i := range hs {
		if !reflect.DeepEqual(hs[i], want.Headers[i]) {
			t.Fatalf("message %d header %d: %+v want %+v", got.Offset, i, hs[i], want.Headers[i])
		}
	}
}

func TestSendAndPoll(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		if err := srv.CreateTopic("s", "t", 2); err != nil {
			t.Fatal(err)
		}
		c := loggedIn(t, srv)
		origin := uint64(1_700_000_000_000_000)
		a := testMessages(origin, 3, "a")
		b := testMessages(origin+10_000_000, 2, "b")
		all := append(append([]iggy.Message(nil), a...), b...)

		before := uint64(time.Now().UnixMicro())
		conf := send(t, c, iggy.ToPartition(0), a...)
		time.Sleep(2 * time.Millisecond)
		conf2 := send(t, c, iggy.ToPartition(0), b...)
		if d == iggy.Current {
			if len(conf) != 1 || conf[0] != (iggy.SendConfirmation{StreamID: 0, TopicID: 0, PartitionID: 0, BaseOffset: 0}) ||
				len(conf2) != 1 || conf2[0].BaseOffset != 3 {
				t.Fatalf("confirmations %+v %+v", conf, conf2)
			}
		} else if conf != nil || conf2 != nil {
			t.Fatal("legacy confirmations")
		}

		// Offset 0: everything, intact.
		pm := pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollOffset, Value: 0, Count: 100})
		expectOffsets(t, pm, 0, 1, 2, 3, 4)
		if pm.PartitionID != 0 || pm.CurrentOffset != 4 {
			t.Fatalf("poll header %+v", pm)
		}
		for i, m := range pm.Messages {
			checkMessage(t, m, all[i])
		}
		tsA, tsB := pm.Messages[0].Timestamp, pm.Messages[3].Timestamp
		if tsA < before || pm.Messages[2].Timestamp != tsA || pm.Messages[4].Timestamp != tsB || tsB <= tsA {
			t.Fatalf("append timestamps %d %d (before %d)", tsA, tsB, before)
		}
		// The stored copy matches.
		stored := srv.Messages("s", "t", 0)
		if len(stored) != 5 || stored[3].Offset != 3 || stored[3].Timestamp != tsB || string(stored[4].Payload) != "b-1" ||
			stored[1].OriginTimestamp != origin+1000 || len(stored[1].UserHeaders) == 0 {
			t.Fatalf("stored %+v", stored)
		}

		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollOffset, Value: 3, Count: 1}), 3)
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollTimestamp, Value: tsA + 1, Count: 10}), 3, 4)
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollTimestamp, Value: tsA, Count: 2}), 0, 1)
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollTimestamp, Value: tsB + 1, Count: 2}))
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollFirst, Count: 2}), 0, 1)
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollLast, Count: 2}), 3, 4)
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollLast, Count: 50}), 0, 1, 2, 3, 4)
		// Past the end and count 0: empty, not an error.
		end := pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollOffset, Value: 5, Count: 10})
		expectOffsets(t, end)
		if end.CurrentOffset != 4 {
			t.Fatalf("current offset %d", end.CurrentOffset)
		}
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollFirst, Count: 0}))
		// No partition id: partition 0 for a single consumer.
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Kind: iggy.PollFirst, Count: 1}), 0)
		// The empty partition.
		empty := pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(1), Kind: iggy.PollFirst, Count: 10})
		expectOffsets(t, empty)
		if empty.PartitionID != 1 || empty.CurrentOffset != 0 {
			t.Fatalf("empty poll %+v", empty)
		}

		// Next: from 0 without a stored offset, auto-commit moves it.
		next := iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollNext, Count: 2, AutoCommit: true}
		expectOffsets(t, pollMsgs(t, c, next), 0, 1)
		expectOffsets(t, pollMsgs(t, c, next), 2, 3)
		co, found, err := iggy.DecodeGetConsumerOffsetReply(d, c.ok(must[iggy.Request](t)(iggy.GetConsumerOffset(
			iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(1)}, s0, t0, iggy.Partition(0)))))
		if err != nil || !found || co != (iggy.ConsumerOffset{PartitionID: 0, CurrentOffset: 4, StoredOffset: 3}) {
			t.Fatalf("offset %+v %v %v", co, found, err)
		}
		expectOffsets(t, pollMsgs(t, c, next), 4)
		expectOffsets(t, pollMsgs(t, c, next))

		// The partition structure reports the data.
		td, _ := getTopic(t, c, s0, t0)
		p0 := td.Partitions[0]
		if p0.CurrentOffset != 4 || p0.MessagesCount != 5 || p0.SizeBytes == 0 || td.MessagesCount != 5 || td.SizeBytes != p0.SizeBytes {
			t.Fatalf("topic %+v", td)
		}
	})
}

func TestPartitioning(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		if err := srv.CreateTopic("s", "t", 3); err != nil {
			t.Fatal(err)
		}
		c := loggedIn(t, srv)
		msg := iggy.Message{ID: iggy.MessageID(1, 0), Payload: []byte("x")}
		for range 6 {
			send(t, c, iggy.Balanced(), msg)
		}
		for p := uint32(0); p < 3; p++ {
			if n := len(srv.Messages("s", "t", p)); n != 2 {
				t.Fatalf("balanced: partition %d has %d messages", p, n)
			}
		}
		for range 4 {
			send(t, c, iggy.ByKey([]byte("customer-42")), msg)
		}
		grew := 0
		for p := uint32(0); p < 3; p++ {
			switch n := len(srv.Messages("s", "t", p)); n {
			case 2:
			case 6:
				grew++
			default:
				t.Fatalf("key: partition %d has %d messages", p, n)
			}
		}
		if grew != 1 {
			t.Fatal("one key must map to one partition")
		}
	})
}

func TestSendErrors(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		if err := srv.CreateTopic("s", "t", 1); err != nil {
			t.Fatal(err)
		}
		c := loggedIn(t, srv)
		msg := []iggy.Message{{Payload: []byte("x")}}
		req := func(s, tp iggy.Identifier, p iggy.Partitioning) iggy.Request {
			return must[iggy.Request](t)(iggy.SendMessages(d, s, tp, p, msg))
		}
		// §6.4: Current answers 20 for any unknown target; Legacy 1009/2010/3007.
		want := [3]uint32{20, 20, 20}
		if d == iggy.Legacy {
			want = [3]uint32{1009, 2010, 3007}
		}
		c.expectStatus(req(iggy.NumericID(5), t0, iggy.ToPartition(0)), want[0])
		c.expectStatus(req(s0, iggy.NamedID("nope"), iggy.ToPartition(0)), want[1])
		c.expectStatus(req(s0, t0, iggy.ToPartition(1)), want[2])

		if d == iggy.Current {
			good := req(s0, t0, iggy.ToPartition(0))
			batch := 4 + int(binary.LittleEndian.Uint32(good.Body))
			corrupt := func(off int) iggy.Request {
				b := append([]byte(nil), good.Body...)
				b[off] ^= 0xff
				return iggy.Request{Code: good.Code, Operation: good.Operation, Body: b}
			}
			c.expectStatus(corrupt(batch+256+48), 4027) // payload byte
			c.expectStatus(corrupt(batch+40), 4039)     // batch checksum
			c.expectStatus(corrupt(batch+256+0), 4027)  // message checksum
			c.expectStatus(corrupt(batch+100), 3)       // reserved bytes
			short := iggy.Request{Code: good.Code, Operation: good.Operation, Body: good.Body[:len(good.Body)-1]}
			c.expectStatus(short, 3)
		} else {
			good := req(s0, t0, iggy.ToPartition(0))
			// metadata 22 bytes, then the 16-byte index: end_position at +4.
			b := append([]byte(nil), good.Body...)
			binary.LittleEndian.PutUint32(b[4+22+4:], 1000)
			c.expectStatus(iggy.Request{Code: good.Code, Body: b}, 4036)
			b = append([]byte(nil), good.Body...)
			b[4+22] = 1
			c.expectStatus(iggy.Request{Code: good.Code, Body: b}, 4031)
			b = append([]byte(nil), good.Body...)
			binary.LittleEndian.PutUint32(b[4+18:], 0) // messages_count 0
			c.expectStatus(iggy.Request{Code: good.Code, Body: b}, 4009)
		}
		if n := len(srv.Messages("s", "t", 0)); n != 0 {
			t.Fatalf("%d messages stored by failed sends", n)
		}
		c.ok(req(s0, t0, iggy.ToPartition(0)))

		// Poll errors.
		c.expectStatus(pollReq(t, iggy.Poll{Stream: iggy.NumericID(9), Topic: t0, Kind: iggy.PollFirst, Count: 1}), 1009)
		c.expectStatus(pollReq(t, iggy.Poll{Stream: s0, Topic: iggy.NumericID(9), Kind: iggy.PollFirst, Count: 1}), 2010)
		c.expectStatus(pollReq(t, iggy.Poll{Partition: iggy.Partition(3), Kind: iggy.PollFirst, Count: 1}), 3007)
		bad := pollReq(t, iggy.Poll{Kind: iggy.PollFirst, Count: 1})
		bad.Body = bad.Body[:len(bad.Body)-3]
		if d == iggy.Current {
			// §7: a malformed poll gets an empty poll.
			pm := must[*iggy.PolledMessages](t)(iggy.DecodePollMessagesReply(d, c.ok(bad)))
			if pm.PartitionID != 0 || pm.CurrentOffset != 0 || pm.Count != 0 {
				t.Fatalf("malformed poll %+v", pm)
			}
		} else {
			c.expectStatus(bad, 3)
		}
		// Group consumers are never members of a group in the double.
		group := pollReq(t, iggy.Poll{Consumer: iggy.Consumer{Kind: iggy.ConsumerGroup, ID: iggy.NumericID(1)}, Kind: iggy.PollFirst, Count: 1})
		if d == iggy.Current {
			pm := must[*iggy.PolledMessages](t)(iggy.DecodePollMessagesReply(d, c.ok(group)))
			if pm.PartitionID != math.MaxUint32 || pm.Count != 0 {
				t.Fatalf("group poll %+v", pm)
			}
		} else {
			c.expectStatus(group, 5006)
		}
		c.ok(iggy.Ping())
	})
}

func TestConsumerOffsets(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		if err := srv.CreateTopic("s", "t", 2); err != nil {
			t.Fatal(err)
		}
		c := loggedIn(t, srv)
		for _, cons := range []iggy.Consumer{
			{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(7)},
			{Kind: iggy.ConsumerSingle, ID: iggy.NamedID("reporting")},
		} {
			store := func(off uint64) iggy.Request {
				return must[iggy.Request](t)(iggy.StoreConsumerOffset(d, cons, s0, t0, iggy.Partition(1), off, iggy.AckQuorum))
			}
			get := must[iggy.Request](t)(iggy.GetConsumerOffset(cons, s0, t0, iggy.Partition(1)))
			if cons.ID.IsName {
				if _, err := srv.Append("s", "t", 1, testMessages(1, 3, "m")...); err != nil {
					t.Fatal(err)
				}
			} else {
				c.expectStatus(store(0), 4100) // the partition never held a message
			}
			if _, found, _ := iggy.DecodeGetConsumerOffsetReply(d, c.ok(get)); found {
				t.Fatal("offset found before any store")
			}
			if !cons.ID.IsName {
				if _, err := srv.Append("s", "t", 1, testMessages(1, 3, "m")...); err != nil {
					t.Fatal(err)
				}
			}
			current := uint64(len(srv.Messages("s", "t", 1)) - 1)
			c.expectStatus(store(current+1), 4100)
			if err := iggy.DecodeEmptyReply(d, c.ok(store(1))); err != nil {
				t.Fatal(err)
			}
			co, found, err := iggy.DecodeGetConsumerOffsetReply(d, c.ok(get))
			if err != nil || !found || co != (iggy.ConsumerOffset{PartitionID: 1, CurrentOffset: current, StoredOffset: 1}) {
				t.Fatalf("offset %+v %v %v", co, found, err)
			}
			pm := pollMsgs(t, c, iggy.Poll{Consumer: cons, Partition: iggy.Partition(1), Kind: iggy.PollNext, Count: 1})
			expectOffsets(t, pm, 2)
			c.ok(deleteOffsetFor(d, cons, 1))
			if _, found, _ := iggy.DecodeGetConsumerOffsetReply(d, c.ok(get)); found {
				t.Fatal("offset found after delete")
			}
			c.expectCode(deleteOffsetFor(d, cons, 1), 3021)
		}
		// Unknown targets.
		cons := iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(7)}
		c.expectStatus(must[iggy.Request](t)(iggy.StoreConsumerOffset(d, cons, s0, iggy.NumericID(4), iggy.Partition(0), 0, iggy.AckQuorum)), 2010)
		c.expectStatus(must[iggy.Request](t)(iggy.StoreConsumerOffset(d, cons, s0, t0, iggy.Partition(4), 0, iggy.AckQuorum)), 3007)
		getMissing := must[iggy.Request](t)(iggy.GetConsumerOffset(cons, iggy.NumericID(3), t0, iggy.Partition(0)))
		if d == iggy.Current {
			c.expectStatus(getMissing, 1009)
		} else if body := c.ok(getMissing); len(body) != 0 {
			t.Fatalf("legacy get on a missing stream: %x", body)
		}
	})
}

func deleteOffsetFor(d iggy.Dialect, cons iggy.Consumer, partition uint32) iggy.Request {
	var id []byte
	if cons.ID.IsName {
		id = idName(cons.ID.Name)
	} else {
		id = idNum(cons.ID.ID)
	}
	body := cat([]byte{byte(cons.Kind)}, id, idNum(0), idNum(0), []byte{1}, u32(partition))
	if d == iggy.Current {
		body = append(body, 1)
	}
	return replicated(codeDeleteOffset, iggy.OpDeleteConsumerOffset, body)
}

func TestMessageExpiry(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		c := loggedIn(t, srv)
		createStream(t, c, "s")
		createTopic(t, c, s0, iggy.TopicConfig{Name: "t", PartitionsCount: 1, MessageExpiry: 100_000}) // 100 ms
		send(t, c, iggy.ToPartition(0), testMessages(1, 2, "old")...)
		time.Sleep(150 * time.Millisecond)
		send(t, c, iggy.ToPartition(0), testMessages(2, 1, "new")...)
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollFirst, Count: 10}), 2)
		expectOffsets(t, pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollOffset, Value: 0, Count: 10}), 2)
		td, _ := getTopic(t, c, s0, t0)
		if p := td.Partitions[0]; p.CurrentOffset != 2 || p.MessagesCount != 1 {
			t.Fatalf("partition after expiry %+v", p)
		}
		time.Sleep(150 * time.Millisecond)
		if n := len(srv.Messages("s", "t", 0)); n != 0 {
			t.Fatalf("%d messages left", n)
		}
		base, err := srv.Append("s", "t", 0, testMessages(3, 1, "x")...)
		if err != nil || base != 3 {
			t.Fatalf("append after expiry: %d %v", base, err)
		}
	})
}

func TestHelpers(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		if err := srv.CreateTopic("s", "t", 1); err != nil {
			t.Fatal(err)
		}
		if err := srv.CreateTopic("s", "t", 1); !errors.Is(err, iggy.ErrTopicAlreadyExists) {
			t.Fatal(err)
		}
		if err := srv.CreateTopic("s", "u", 2); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Append("nope", "t", 0, iggy.Message{Payload: []byte("x")}); !errors.Is(err, iggy.ErrStreamNotFound) {
			t.Fatal(err)
		}
		if _, err := srv.Append("s", "nope", 0, iggy.Message{Payload: []byte("x")}); !errors.Is(err, iggy.ErrTopicNotFound) {
			t.Fatal(err)
		}
		if _, err := srv.Append("s", "t", 1, iggy.Message{Payload: []byte("x")}); !errors.Is(err, iggy.ErrPartitionNotFound) {
			t.Fatal(err)
		}
		if srv.Messages("s", "t", 5) != nil || srv.Messages("x", "t", 0) != nil {
			t.Fatal("Messages of a missing partition")
		}
		want := testMessages(42, 4, "h")
		want[0].ID = [16]byte{}
		for i := range want {
			base, err := srv.Append("s", "t", 0, want[i])
			if err != nil || base != uint64(i) {
				t.Fatalf("append %d: %d %v", i, base, err)
			}
		}
		c := loggedIn(t, srv)
		pm := pollMsgs(t, c, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollFirst, Count: 10})
		expectOffsets(t, pm, 0, 1, 2, 3)
		// Zero ids: Current keeps them, Legacy assigns a UUID.
		if got := pm.Messages[0].ID; (got == [16]byte{}) != (d == iggy.Current) {
			t.Fatalf("id %x", got)
		}
		want[0].ID = pm.Messages[0].ID
		for i, m := range pm.Messages {
			checkMessage(t, m, want[i])
		}
		// Each Append is its own batch: one record per batch in Current polls.
		if pm.Messages[0].Timestamp == pm.Messages[1].Timestamp {
			t.Fatal("appends share a timestamp")
		}
		ss := must[[]iggy.Stream](t)(iggy.DecodeGetStreamsReply(d, c.ok(iggy.GetStreams())))
		if len(ss) != 1 || ss[0].TopicsCount != 2 || ss[0].MessagesCount != 4 {
			t.Fatalf("streams %+v", ss)
		}
	})
}

// TestSendDedup: the current dialect dedups SendMessages by request id, as
// the released 0.9 server does: a replay (an id at or below the session's
// last send) gets an empty body and appends nothing.
func TestSendDedup(t *testing.T) {
	srv := start(t, iggy.Current)
	c := loggedIn(t, srv)
	createStream(t, c, "s")
	createTopic(t, c, s0, iggy.TopicConfig{Name: "t", PartitionsCount: 1})
	sendID := func(id uint64, tag string) *iggy.Reply {
		req := must[iggy.Request](t)(iggy.SendMessages(iggy.Current, s0, t0, iggy.ToPartition(0), testMessages(1, 1, tag)))
		f := must[[]byte](t)(req.Frame(iggy.Current, iggy.RequestHeader{Client: c.id, Request: id, Session: c.session}))
		c.write(f)
		r, err := c.read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 0 {
			t.Fatalf("send %d: status %d", id, r.Status)
		}
		return r
	}
	if r := sendID(10, "a"); len(r.Body) == 0 {
		t.Fatal("first send: empty reply")
	}
	for _, id := range []uint64{10, 9} {
		if r := sendID(id, "dup"); len(r.Body) != 0 {
			t.Fatalf("replayed id %d: reply of %d bytes, want the empty duplicate reply", id, len(r.Body))
		}
	}
	if r := sendID(11, "b"); len(r.Body) == 0 {
		t.Fatal("next send: empty reply")
	}
	expectOffsets(t, pollMsgs(t, c, iggy.Poll{Stream: s0, Topic: t0, Partition: iggy.Partition(0), Kind: iggy.PollOffset, Count: 10}), 0, 1)

	// A send applied but answered 57, replayed: one copy.
	srv.FailSendsAfterCommit(1)
	req := must[iggy.Request](t)(iggy.SendMessages(iggy.Current, s0, t0, iggy.ToPartition(0), testMessages(1, 1, "c")))
	f := must[[]byte](t)(req.Frame(iggy.Current, iggy.RequestHeader{Client: c.id, Request: 12, Session: c.session}))
	for i, want := range []uint32{57, 0} {
		c.write(f)
		r, err := c.read(5 * time.Second)
		if err != nil || r.Status != want || len(r.Body) != 0 {
			t.Fatalf("attempt %d: status %d, %d bytes, %v; want status %d, empty", i, r.Status, len(r.Body), err, want)
		}
	}
	expectOffsets(t, pollMsgs(t, c, iggy.Poll{Stream: s0, Topic: t0, Partition: iggy.Partition(0), Kind: iggy.PollOffset, Count: 10}), 0, 1, 2)
}
