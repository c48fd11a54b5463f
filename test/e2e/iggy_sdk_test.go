package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

// startSDKInterop starts a kgate cluster on Iggy (the Iggy tier only),
// builds the official Iggy SDK's check program for the server's dialect
// and creates a topic named prefix-<n>.
func startSDKInterop(t *testing.T, prefix string) (bootstrap, topic string, ib *iggyBackend, sdk *iggytest.SDKCheck) {
	t.Helper()
	if !iggyMode() {
		t.Skipf("runs in the Iggy tier only (%s=iggy; make test runs it there)", envBackend)
	}
	srv := startKgate(t)
	ib = srv.iggy.backend
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sdk, err := iggytest.BuildSDKCheck(ctx, ib.dialect)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap = srv.bootstrap()
	topic = fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
	step(t, "create topic (kadm)", createTimeout, func(ctx context.Context) error {
		return kadmCreateTopic(ctx, bootstrap, topic)
	})
	return bootstrap, topic, ib, sdk
}

// TestIggySDKInterop (Iggy tier): an Iggy application and Kafka clients
// share kgate's topics. Messages sent with the official Iggy SDK are
// consumed through kgate as records (payload as value, no key, Iggy
// headers as Kafka headers); records produced through kgate are polled by
// the SDK with their values as payloads and header blocks it accepts.
func TestIggySDKInterop(t *testing.T) {
	bootstrap, topic, ib, sdk := startSDKInterop(t, "e2e-iggy-sdk")

	// Iggy → Kafka.
	step(t, "send 5 messages with the Iggy SDK to partition 1", createTimeout, func(ctx context.Context) error {
		return sdk.Produce(ctx, ib.addr, ib.user, ib.password, "kafka", topic, 1, 5, "native-")
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {1: kgo.NewOffset().AtStart()}}),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	step(t, "consume them through kgate", createTimeout, func(ctx context.Context) error {
		for len(got) < 5 {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				return err
			}
			got = append(got, fs.Records()...)
		}
		return nil
	})
	for i, r := range got {
		if want := fmt.Sprintf("native-%d", i); string(r.Value) != want || r.Key != nil || r.Offset != int64(i) {
			t.Fatalf("record %d: offset %d key %q value %q, want offset %d, null key, value %q", i, r.Offset, r.Key, r.Value, i, want)
		}
		if len(r.Headers) != 1 || r.Headers[0].Key != "source" || string(r.Headers[0].Value) != "iggy-sdk" {
			t.Fatalf("record %d headers %+v, want source=iggy-sdk", i, r.Headers)
		}
		if age := time.Since(r.Timestamp); age < 0 || age > 10*time.Minute {
			t.Fatalf("record %d timestamp %v", i, r.Timestamp)
		}
	}

	// Kafka → Iggy: every header shape kgate has to encode for Iggy.
	long := make([]byte, 300)
	for i := range long {
		long[i] = byte('a' + i%26)
	}
	recs := []*kgo.Record{
		{Topic: topic, Partition: 0, Key: []byte("k1"), Value: []byte("v1"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Topic: topic, Partition: 0, Value: []byte("v2")},
		{Topic: topic, Partition: 0, Key: []byte{}, Value: []byte("v3"), Headers: []kgo.RecordHeader{
			{Key: "long", Value: long}, {Key: "null"}, {Key: "empty", Value: []byte{}}, {Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}}},
		{Topic: topic, Partition: 0, Key: long, Value: []byte("v4")},
	}
	step(t, "produce 4 records through kgate to partition 0", createTimeout, func(ctx context.Context) error {
		return cl.ProduceSync(ctx, recs...).FirstErr()
	})
	var payloads []string
	step(t, "poll them with the Iggy SDK", createTimeout, func(ctx context.Context) error {
		payloads, err = sdk.Consume(ctx, ib.addr, ib.user, ib.password, "kafka", topic, 0, 4)
		return err
	})
	if fmt.Sprint(payloads) != "[v1 v2 v3 v4]" {
		t.Fatalf("the SDK read payloads %q, want [v1 v2 v3 v4]", payloads)
	}
}

// TestIggySDKInteropAtVolume (Iggy tier): the two kinds of writers at
// volume, with payloads of 8 to 2,007 bytes so Iggy's batches and Kafka's
// end at every kind of boundary. The official Iggy SDK writes one
// partition and Kafka clients read it all through kgate; kgate writes
// another and the SDK reads it all; on the third the two take turns, and
// both read every message back in one order. KGATE_E2E_SDK_VOLUME sets
// the messages per writer and partition (default 20,000).
func TestIggySDKInteropAtVolume(t *testing.T) {
	n := 20000
	if v := os.Getenv("KGATE_E2E_SDK_VOLUME"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 4 {
			t.Fatalf("KGATE_E2E_SDK_VOLUME=%q: want a count of at least 4", v)
		}
	}
	bootstrap, topic, ib, sdk := startSDKInterop(t, "e2e-iggy-sdk-volume")
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(ctx context.Context, partition int32, first, count int, prefix string) error {
		recs := make([]*kgo.Record, count)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: iggytest.VolumePayload(prefix, first+i)}
		}
		return cl.ProduceSync(ctx, recs...).FirstErr()
	}

	// What each partition must hold, offset by offset.
	var want [3][]string
	for i := range n {
		want[0] = append(want[0], string(iggytest.VolumePayload("sdk-", i)))
		want[1] = append(want[1], string(iggytest.VolumePayload("kafka-", i)))
	}
	turn := n / 4
	for r := range 4 {
		for i := range turn {
			want[2] = append(want[2], string(iggytest.VolumePayload("mix-sdk-", r*turn+i)))
		}
		for i := range turn {
			want[2] = append(want[2], string(iggytest.VolumePayload("mix-kafka-", r*turn+i)))
		}
	}

	step(t, fmt.Sprintf("the Iggy SDK sends %d messages to partition 0", n), 5*time.Minute, func(ctx context.Context) error {
		return sdk.ProduceVolume(ctx, ib.addr, ib.user, ib.password, "kafka", topic, 0, 0, n, "sdk-")
	})
	step(t, fmt.Sprintf("kgate takes %d records for partition 1", n), 5*time.Minute, func(ctx context.Context) error {
		return produce(ctx, 1, 0, n, "kafka-")
	})
	step(t, fmt.Sprintf("partition 2: the SDK and kgate take turns, %d messages each a turn", turn), 5*time.Minute, func(ctx context.Context) error {
		for r := range 4 {
			if err := sdk.ProduceVolume(ctx, ib.addr, ib.user, ib.password, "kafka", topic, 2, r*turn, turn, "mix-sdk-"); err != nil {
				return err
			}
			if err := produce(ctx, 2, r*turn, turn, "mix-kafka-"); err != nil {
				return err
			}
		}
		return nil
	})

	step(t, "a Kafka consumer reads every partition through kgate", 5*time.Minute, func(ctx context.Context) error {
		rd, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {
			0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
		if err != nil {
			return err
		}
		defer rd.Close()
		var got [3]int
		for got[0] < len(want[0]) || got[1] < len(want[1]) || got[2] < len(want[2]) {
			fs := rd.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				return err
			}
			for _, r := range fs.Records() {
				p := r.Partition
				if r.Offset != int64(got[p]) || got[p] >= len(want[p]) {
					return fmt.Errorf("partition %d: record at offset %d, want offset %d of %d", p, r.Offset, got[p], len(want[p]))
				}
				if string(r.Value) != want[p][got[p]] || r.Key != nil {
					return fmt.Errorf("partition %d offset %d: key %q value of %d bytes %.20q, want no key and %.20q (%d bytes)",
						p, r.Offset, r.Key, len(r.Value), r.Value, want[p][got[p]], len(want[p][got[p]]))
				}
				got[p]++
			}
		}
		return nil
	})

	for _, p := range []int{1, 2} {
		step(t, fmt.Sprintf("the Iggy SDK polls all of partition %d", p), 5*time.Minute, func(ctx context.Context) error {
			ds, err := sdk.ConsumeVolume(ctx, ib.addr, ib.user, ib.password, "kafka", topic, p, 0, len(want[p]))
			if err != nil {
				return err
			}
			if len(ds) != len(want[p]) {
				return fmt.Errorf("the SDK read %d messages, want %d", len(ds), len(want[p]))
			}
			for i, d := range ds {
				h := fnv.New64a()
				h.Write([]byte(want[p][i]))
				if d.Offset != uint64(i) || d.Len != len(want[p][i]) || d.Hash != h.Sum64() {
					return fmt.Errorf("offset %d: the SDK read offset %d, %d bytes, hash %x; want %d bytes %.20q, hash %x",
						i, d.Offset, d.Len, d.Hash, len(want[p][i]), want[p][i], h.Sum64())
				}
			}
			return nil
		})
	}
}
