package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

// TestIggySDKInterop (Iggy tier): an Iggy application and Kafka clients
// share kgate's topics. Messages sent with the official Iggy SDK are
// consumed through kgate as records (payload as value, no key, Iggy
// headers as Kafka headers); records produced through kgate are polled by
// the SDK with their values as payloads and header blocks it accepts.
func TestIggySDKInterop(t *testing.T) {
	if !iggyMode() {
		t.Skipf("runs in the Iggy tier only (%s=iggy; make test runs it there)", envBackend)
	}
	srv := startKgate(t)
	ib := srv.iggy.backend
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sdk, err := iggytest.BuildSDKCheck(ctx, ib.dialect)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := srv.bootstrap()
	topic := fmt.Sprintf("e2e-iggy-sdk-%d", time.Now().UnixNano()%1e9)
	step(t, "create topic (kadm)", createTimeout, func(ctx context.Context) error {
		return kadmCreateTopic(ctx, bootstrap, topic)
	})

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
