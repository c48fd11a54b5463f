package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/records"
)

// TestIggyOutage (Iggy tier): with Iggy down (a real server killed with
// SIGKILL, or the double closed), Produce gets retriable errors, the
// consumer group keeps its members and generation, and service resumes by
// itself when Iggy is back on the same data, with every acknowledged record
// consumed.
func TestIggyOutage(t *testing.T) {
	if !iggyMode() {
		t.Skipf("runs in the Iggy tier only (%s=iggy; make test runs it there)", envBackend)
	}
	srv := startGroupKgate(t)
	ib := srv.iggy.backend
	bootstrap := srv.bootstrap()
	topic := fmt.Sprintf("e2e-iggy-outage-%d", time.Now().UnixNano()%1e9)
	group := topic + "-group"
	step(t, "create topic (kadm)", createTimeout, func(ctx context.Context) error {
		return kadmCreateTopic(ctx, bootstrap, topic)
	})

	var mu sync.Mutex
	seen := map[string]bool{}
	assigned := 0
	consumer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			mu.Lock()
			assigned++
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	consumeCtx, stopConsume := context.WithCancel(context.Background())
	defer stopConsume()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for consumeCtx.Err() == nil {
			fs := consumer.PollFetches(consumeCtx)
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)] = true
				mu.Unlock()
			})
			if consumeCtx.Err() == nil {
				_ = consumer.CommitUncommittedOffsets(consumeCtx)
			}
		}
	}()

	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produce := func(ctx context.Context, from, to int) error {
		for i := from; i < to; i++ {
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
				return err
			}
		}
		return nil
	}
	waitSeen := func(ctx context.Context, n int) error {
		for {
			mu.Lock()
			got := len(seen)
			mu.Unlock()
			if got >= n {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("consumed %d of %d records", got, n)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	step(t, "produce 0..99 and consume them in the group", time.Minute, func(ctx context.Context) error {
		if err := produce(ctx, 0, 100); err != nil {
			return err
		}
		return waitSeen(ctx, 100)
	})
	adm := kadm.NewClient(producer)
	describe := func(ctx context.Context) (kadm.DescribedGroup, error) {
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return kadm.DescribedGroup{}, err
		}
		return dg[group], dg.Error()
	}
	before, err := describe(context.Background())
	if err != nil || before.State != "Stable" || len(before.Members) != 1 {
		t.Fatalf("group before the outage: %+v, %v", before, err)
	}
	mu.Lock()
	assignedBefore := assigned
	mu.Unlock()

	ib.kill(t)
	outageStart := time.Now()
	step(t, "with Iggy down, Produce answers a retriable error", 30*time.Second, func(ctx context.Context) error {
		return expectRetriableProduce(ctx, producer, topic)
	})
	// Longer than the session timeout: heartbeats must keep the member.
	time.Sleep(max(0, 4*time.Second-time.Since(outageStart)))
	step(t, "with Iggy down, the group keeps its member", 10*time.Second, func(ctx context.Context) error {
		during, err := describe(ctx)
		if err != nil {
			return err
		}
		if during.State != "Stable" || len(during.Members) != 1 || during.Members[0].MemberID != before.Members[0].MemberID {
			return fmt.Errorf("group during the outage: %+v", during)
		}
		return nil
	})

	ib.restart(t)
	step(t, "Iggy back: produce 100..199 and consume everything", time.Minute, func(ctx context.Context) error {
		if err := produce(ctx, 100, 200); err != nil {
			return err
		}
		return waitSeen(ctx, 200)
	})
	mu.Lock()
	defer mu.Unlock()
	if assigned != assignedBefore {
		t.Fatalf("the group rebalanced during the outage (%d assignments, %d before)", assigned, assignedBefore)
	}
	for i := range 200 {
		if !seen[fmt.Sprintf("v%d", i)] {
			t.Fatalf("acknowledged record v%d was not consumed", i)
		}
	}
}

// expectRetriableProduce sends one Produce straight to partition 0's
// leader and checks the answer is a retriable storage or timeout error.
func expectRetriableProduce(ctx context.Context, cl *kgo.Client, topic string) error {
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	leader := md.Topics[topic].Partitions[0].Leader
	recs, err := records.Builder{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}.Build(
		[]records.Record{{Value: []byte("during-outage"), Timestamp: time.Now().UnixMilli()}})
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, recs
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return err
	}
	code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	kerrv := kerr.ErrorForCode(code)
	var ke *kerr.Error
	if !errors.As(kerrv, &ke) || !ke.Retriable || code == 0 {
		return fmt.Errorf("produce during the outage answered %v, want a retriable error", kerrv)
	}
	return nil
}
