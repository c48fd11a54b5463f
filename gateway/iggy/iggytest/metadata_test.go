package iggytest_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
)

func createStream(t *testing.T, c *client, name string) iggy.Stream {
	t.Helper()
	req := must[iggy.Request](t)(iggy.CreateStream(name))
	return must[iggy.Stream](t)(iggy.DecodeCreateStreamReply(c.d, c.ok(req)))
}

func createTopic(t *testing.T, c *client, stream iggy.Identifier, cfg iggy.TopicConfig) iggy.TopicDetails {
	t.Helper()
	req := must[iggy.Request](t)(iggy.CreateTopic(c.d, stream, cfg))
	return must[iggy.TopicDetails](t)(iggy.DecodeCreateTopicReply(c.d, c.ok(req)))
}

func getTopic(t *testing.T, c *client, s, tp iggy.Identifier) (iggy.TopicDetails, bool) {
	t.Helper()
	req := must[iggy.Request](t)(iggy.GetTopic(s, tp))
	td, found, err := iggy.DecodeGetTopicReply(c.d, c.ok(req))
	if err != nil {
		t.Fatal(err)
	}
	return td, found
}

func TestStreamsAndTopics(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		c := loggedIn(t, srv)

		before := uint64(time.Now().UnixMicro())
		s0 := createStream(t, c, "orders")
		s1 := createStream(t, c, "billing")
		if s0.ID != 0 || s1.ID != 1 || s0.Name != "orders" || s0.TopicsCount != 0 || s0.CreatedAt < before {
			t.Fatalf("streams %+v %+v", s0, s1)
		}
		dup := must[iggy.Request](t)(iggy.CreateStream("orders"))
		if d == iggy.Current {
			// Metadata errors come in the result section, status 0 (§3).
			r := c.do(dup)
			if _, err := iggy.ResultPayload(r.Body); r.Status != 0 || err == nil {
				t.Fatalf("status %d err %v", r.Status, err)
			}
		}
		c.expectCode(dup, 1012)
		ss := must[[]iggy.Stream](t)(iggy.DecodeGetStreamsReply(d, c.ok(iggy.GetStreams())))
		if len(ss) != 2 || ss[0].Name != "orders" || ss[1].Name != "billing" {
			t.Fatalf("streams %+v", ss)
		}

		// Topic with every setting, addressed by stream name.
		cfg := iggy.TopicConfig{Name: "events", PartitionsCount: 3, Compression: iggy.CompressionGzip,
			MessageExpiry: 3_600_000_000, MaxTopicSize: 2 << 30, ReplicationFactor: 0}
		td := createTopic(t, c, iggy.NamedID("orders"), cfg)
		if td.ID != 0 || td.Name != "events" || td.PartitionsCount != 3 || len(td.Partitions) != 3 ||
			td.Compression != iggy.CompressionGzip || td.MessageExpiry != 3_600_000_000 || td.MaxTopicSize != 2<<30 {
			t.Fatalf("topic %+v", td)
		}
		for i, p := range td.Partitions {
			if p.ID != uint32(i) || p.CurrentOffset != 0 || p.MessagesCount != 0 || p.SizeBytes != 0 {
				t.Fatalf("partition %+v", p)
			}
		}
		if d == iggy.Legacy && td.ReplicationFactor != 1 {
			t.Fatalf("replication factor %d", td.ReplicationFactor)
		}
		if d == iggy.Current {
			want := cat(option("compression_algorithm", iggy.KindUint8, []byte{2}),
				option("message_expiry", iggy.KindUint64, u64(3_600_000_000)),
				option("max_topic_size", iggy.KindUint64, u64(2<<30)))
			if !bytes.Equal(td.Options, want) {
				t.Fatalf("explicit options %x", td.Options)
			}
		}
		// Defaults resolve to never / unlimited / none.
		td2 := createTopic(t, c, iggy.NumericID(0), iggy.TopicConfig{Name: "plain", PartitionsCount: 1})
		if td2.ID != 1 || td2.MessageExpiry != math.MaxUint64 || td2.MaxTopicSize != math.MaxUint64 || td2.Compression != iggy.CompressionNone {
			t.Fatalf("defaults %+v", td2)
		}

		// Errors.
		c.expectCode(must[iggy.Request](t)(iggy.CreateTopic(d, iggy.NumericID(0), iggy.TopicConfig{Name: "events"})), 2013)
		c.expectCode(must[iggy.Request](t)(iggy.CreateTopic(d, iggy.NumericID(9), iggy.TopicConfig{Name: "x"})), 1009)
		c.expectCode(must[iggy.Request](t)(iggy.CreateTopic(d, iggy.NamedID("nope"), iggy.TopicConfig{Name: "x"})), 1009)
		c.expectCode(must[iggy.Request](t)(iggy.CreateTopic(d, iggy.NumericID(0), iggy.TopicConfig{Name: "x", MaxTopicSize: 1 << 20})), 1019)
		tooMany := replicated(iggy.CodeCreateTopic, iggy.OpCreateTopic, idNum(0), u32(1001), wireName("x"))
		if d == iggy.Legacy {
			tooMany = replicated(iggy.CodeCreateTopic, 0, idNum(0), u32(1001), []byte{1}, u64(0), u64(0), []byte{1}, wireName("x"))
		}
		c.expectCode(tooMany, 2015)

		// GetTopic by ids and names; missing → empty body.
		for _, ids := range [][2]iggy.Identifier{
			{iggy.NumericID(0), iggy.NumericID(0)}, {iggy.NamedID("orders"), iggy.NamedID("events")},
		} {
			got, found := getTopic(t, c, ids[0], ids[1])
			if !found || got.ID != 0 || got.Name != "events" || len(got.Partitions) != 3 {
				t.Fatalf("GetTopic %+v", got)
			}
		}
		if _, found := getTopic(t, c, iggy.NumericID(0), iggy.NumericID(7)); found {
			t.Fatal("missing topic found")
		}
		if _, found := getTopic(t, c, iggy.NumericID(7), iggy.NumericID(0)); found {
			t.Fatal("topic of a missing stream found")
		}
		topics := must[[]iggy.Topic](t)(iggy.DecodeGetTopicsReply(d, c.ok(must[iggy.Request](t)(iggy.GetTopics(iggy.NumericID(0))))))
		if len(topics) != 2 || topics[0].Name != "events" || topics[1].Name != "plain" {
			t.Fatalf("topics %+v", topics)
		}

		// GetStream (hand-built): Stream + TopicHeader × topics_count.
		body := c.ok(getStream(idName("orders")))
		if s := decodeStreamPrefix(t, body); s.id != 0 || s.topics != 2 || s.name != "orders" {
			t.Fatalf("GetStream %+v", s)
		}
		if body := c.ok(getStream(idNum(42))); len(body) != 0 {
			t.Fatalf("missing stream: %x", body)
		}

		// UpdateTopic: rename and change settings.
		c.ok(updateTopic(d, idNum(0), idNum(0), "events2", 1, 60_000_000, math.MaxUint64))
		got, _ := getTopic(t, c, iggy.NumericID(0), iggy.NamedID("events2"))
		if got.Name != "events2" || got.Compression != iggy.CompressionNone || got.MessageExpiry != 60_000_000 || got.MaxTopicSize != math.MaxUint64 {
			t.Fatalf("updated %+v", got)
		}
		c.expectCode(updateTopic(d, idNum(0), idNum(0), "plain", 1, 0, 0), 2013)
		c.expectCode(updateTopic(d, idNum(0), idNum(5), "zzz", 1, 0, 0), 2010)

		// Partitions: add two, remove the highest one; bounds.
		c.ok(must[iggy.Request](t)(iggy.CreatePartitions(iggy.NumericID(0), iggy.NumericID(0), 2)))
		c.ok(deletePartitions(idNum(0), idNum(0), 1))
		got, _ = getTopic(t, c, iggy.NumericID(0), iggy.NumericID(0))
		if got.PartitionsCount != 4 || got.Partitions[3].ID != 3 {
			t.Fatalf("partitions %+v", got.Partitions)
		}
		c.expectCode(deletePartitions(idNum(0), idNum(0), 0), 2015)
		c.expectCode(deletePartitions(idNum(0), idNum(0), 5), 2019)
		c.expectCode(must[iggy.Request](t)(iggy.CreatePartitions(iggy.NumericID(0), iggy.NumericID(9), 1)), 2010)

		// Deletes; freed ids are reused.
		c.ok(deleteTopic(idNum(0), idNum(0)))
		if _, found := getTopic(t, c, iggy.NumericID(0), iggy.NumericID(0)); found {
			t.Fatal("deleted topic found")
		}
		c.expectCode(deleteTopic(idNum(0), idNum(0)), 2010)
		if td := createTopic(t, c, iggy.NumericID(0), iggy.TopicConfig{Name: "again"}); td.ID != 0 {
			t.Fatalf("topic id %d not reused", td.ID)
		}
		c.ok(deleteStream(idName("billing")))
		c.expectCode(deleteStream(idNum(1)), 1009)
		if s := createStream(t, c, "third"); s.ID != 1 {
			t.Fatalf("stream id %d not reused", s.ID)
		}
	})
}

func TestCurrentTopicOptions(t *testing.T) {
	srv := start(t, iggy.Current)
	c := loggedIn(t, srv)
	createStream(t, c, "s")
	create := func(opts ...[]byte) iggy.Request {
		return replicated(iggy.CodeCreateTopic, iggy.OpCreateTopic, idNum(0), u32(1), wireName("t"), cat(opts...))
	}
	c.expectCode(create(option("no_such_key", iggy.KindUint8, []byte{1})), 4041)
	c.expectCode(create(option("compression_algorithm", iggy.KindUint8, []byte{7})), 4042)
	c.expectCode(create(option("message_expiry", iggy.KindUint8, []byte{7})), 4042)
	c.expectCode(create([]byte{2, 1, 0}), 4) // truncated TLV
	// Humantime strings, and keys UpdateTopic does not accept.
	body := c.ok(create(option("message_expiry", iggy.KindString, []byte("2 days")),
		option("max_topic_size", iggy.KindString, []byte("2 GiB")),
		option("compression_algorithm", iggy.KindString, []byte("gzip")),
		option("segment_size", iggy.KindUint64, u64(1<<20))))
	td := must[iggy.TopicDetails](t)(iggy.DecodeCreateTopicReply(iggy.Current, body))
	if td.MessageExpiry != 2*86_400_000_000 || td.MaxTopicSize != 2<<30 || td.Compression != iggy.CompressionGzip {
		t.Fatalf("topic %+v", td)
	}
	c.expectCode(replicated(codeUpdateTopic, opUpdateTopic, idNum(0), idNum(0), wireName("t"),
		option("segment_size", iggy.KindUint64, u64(1<<20))), 4041)
	// Streams take no options.
	c.expectCode(replicated(iggy.CodeCreateStream, iggy.OpCreateStream, wireName("s2"), option("x", iggy.KindUint8, []byte{1})), 4041)
	// A malformed body is a status, not a result.
	c.expectStatus(replicated(iggy.CodeCreateStream, iggy.OpCreateStream, []byte{9, 'a'}), 3)
}

// TestCurrentDedup: a replayed metadata request id gets the cached reply,
// an older one RequestAlreadyApplied (§2).
func TestCurrentDedup(t *testing.T) {
	srv := start(t, iggy.Current)
	c := loggedIn(t, srv)
	f := c.frame(must[iggy.Request](t)(iggy.CreateStream("once")))
	var replies [][]byte
	for range 2 {
		c.write(f)
		r, err := c.read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, r.Body)
	}
	if !bytes.Equal(replies[0], replies[1]) {
		t.Fatalf("replay differs: %x vs %x", replies[0], replies[1])
	}
	if s := must[iggy.Stream](t)(iggy.DecodeCreateStreamReply(iggy.Current, replies[1])); s.ID != 0 {
		t.Fatalf("stream %+v", s)
	}
	createStream(t, c, "twice")
	c.req = 0 // the next frame goes out with request 1 again: already applied
	c.expectCode(must[iggy.Request](t)(iggy.CreateStream("late")), 59)
	c.req = 5
	createStream(t, c, "later")
	if srv.Requests(iggy.CodeCreateStream) != 5 {
		t.Fatalf("requests %d", srv.Requests(iggy.CodeCreateStream))
	}
}
