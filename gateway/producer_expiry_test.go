package gateway_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/embedded"
)

// An idempotent producer idle past --producer-id-expiration leaves
// DescribeProducers, as in Kafka; when it comes back and goes on with its
// sequence, its batches are accepted (Kafka 2.5+ accepts a producer it has
// no state of at any sequence), every record once, in order.
func TestIdleProducerStateExpires(t *testing.T) {
	const expiration = 24 * time.Hour
	// The service's clock runs ahead of the appends' by what the test says.
	var mu sync.Mutex
	var ahead time.Duration
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(ahead) }
	n := startNodeOpts(t, nil, false, nodeOpts{producerExpiry: &embedded.ProducerExpiry{Expiration: expiration,
		Every: 20 * time.Millisecond, Now: clock}})
	createTopic(t, n.addr, "pe", 1, nil)
	ctx := testCtx(t)
	p := newClient(t, n.addr, kgo.DefaultProduceTopic("pe")) // idempotent by default
	produce := func(v string) {
		t.Helper()
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	c := dialRaw(t, n.addr)
	producers := func() []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		t.Helper()
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "pe", Partitions: []int32{0}}}
		ps := c.do(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
		if ps.ErrorCode != 0 {
			t.Fatalf("describe producers: error %d", ps.ErrorCode)
		}
		return ps.ActiveProducers
	}
	for _, v := range []string{"a", "b", "c"} {
		produce(v)
	}
	before := producers()
	if len(before) != 1 || before[0].LastSequence != 2 {
		t.Fatalf("producers before the expiration: %+v, want one at sequence 2", before)
	}
	mu.Lock()
	ahead = expiration
	mu.Unlock()
	for len(producers()) != 0 {
		if ctx.Err() != nil {
			t.Fatalf("producers %+v once idle for the expiration, want none", producers())
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	ahead = 0
	mu.Unlock()
	// The producer comes back, at sequence 3.
	for _, v := range []string{"d", "e"} {
		produce(v)
	}
	after := producers()
	if len(after) != 1 || after[0].ProducerID != before[0].ProducerID || after[0].LastSequence != 4 {
		t.Fatalf("producers after it came back: %+v, want producer %d at sequence 4", after, before[0].ProducerID)
	}
	produce("end")
	if got := consumeUntilEnds(t, n.addr, "pe", 1, kgo.ReadUncommitted()); fmt.Sprint(got) != "[a b c d e]" {
		t.Fatalf("consumed %v, want [a b c d e]", got)
	}
}
