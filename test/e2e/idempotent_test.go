package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIdempotentKill9 runs a franz-go idempotent producer (acks=all) flat out,
// kill -9s kgate under it, restarts kgate on the same data and lets the
// producer retry and go on. Every acknowledged value must then be present
// exactly once, no value may appear twice, and each partition must hold its
// values in the order they were produced.
func TestIdempotentKill9(t *testing.T) {
	const (
		beforeKill   = 2 * time.Second
		afterRestart = 2 * time.Second
		flushTimeout = time.Minute
	)
	srv := startKgate(t)
	if srv.external {
		t.Skip("needs to kill -9 the broker; not possible with " + envExternal)
	}
	topic := fmt.Sprintf("e2e-kill9-%d", time.Now().UnixNano()%1e9)
	step(t, "create topic (kadm)", createTimeout, func(ctx context.Context) error {
		return kadmCreateTopic(ctx, srv.bootstrap(), topic)
	})

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(srv.bootstrap()),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(flushTimeout),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	p := newAckLog()
	stop := make(chan struct{})
	loopDone := make(chan struct{})
	// Safety net: unblocks a Produce waiting for buffer space if kgate never
	// comes back. Records failed by it were never acknowledged.
	loopCtx, cancelLoop := context.WithTimeout(context.Background(), beforeKill+afterRestart+startTimeout+flushTimeout)
	defer cancelLoop()
	go func() {
		defer close(loopDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if loopCtx.Err() != nil {
				return
			}
			r := &kgo.Record{Topic: topic, Partition: int32(i % numPartitions), Value: []byte(killValue(i))}
			p.sent(i)
			cl.Produce(loopCtx, r, func(_ *kgo.Record, err error) { p.done(i, err) })
		}
	}()

	time.Sleep(beforeKill)
	acked, _, sent := p.counts()
	t.Logf("before kill -9: %d records sent, %d acknowledged", sent, acked)
	if acked == 0 {
		t.Errorf("no record was acknowledged in the %v before the kill", beforeKill)
	}
	srv.kill9()
	killedAt := time.Now()
	srv.start()
	t.Logf("kgate killed and back (Metadata ok) after %v", time.Since(killedAt).Round(time.Millisecond))
	time.Sleep(afterRestart)
	close(stop)
	<-loopDone

	flushCtx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil {
		t.Fatalf("producer did not flush within %v after the restart: %v (%s)", flushTimeout, err, p.summary())
	}
	t.Logf("producer done: %s", p.summary())
	if acked2, _, _ := p.counts(); acked2 <= acked {
		t.Errorf("no record was acknowledged after the restart (%d before the kill, %d in all)", acked, acked2)
	}

	var seen map[int][]int32
	step(t, "read back", verifyTimeout, func(ctx context.Context) error {
		var err error
		seen, err = readKillValues(ctx, srv.bootstrap(), topic)
		return err
	})
	var lost, dups []string
	for i, parts := range seen {
		if len(parts) > 1 {
			dups = append(dups, fmt.Sprintf("%s x%d (partitions %v)", killValue(i), len(parts), parts))
		}
	}
	for _, i := range p.ackedIndexes() {
		if len(seen[i]) == 0 {
			lost = append(lost, killValue(i))
		}
	}
	sort.Strings(dups)
	t.Logf("read back %d distinct values; %d acknowledged; %d duplicated; %d acknowledged but missing",
		len(seen), len(p.ackedIndexes()), len(dups), len(lost))
	if len(dups) > 0 {
		t.Errorf("%d values appear more than once, e.g. %s", len(dups), firstN(dups, 10))
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged values are missing after kill -9, e.g. %s", len(lost), firstN(lost, 10))
	}
}

func killValue(i int) string { return fmt.Sprintf("kill9-%09d", i) }

// readKillValues reads all partitions up to their high watermarks, returns
// value index -> partitions where it was found (one entry per copy) and
// checks that each partition's values increase.
func readKillValues(ctx context.Context, bootstrap, topic string) (map[int][]int32, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("ListOffsets(latest): %w", err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("ListOffsets(latest): %w", err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	if len(want) != numPartitions {
		return nil, fmt.Errorf("ListOffsets(latest) returned %d partitions, want %d", len(want), numPartitions)
	}
	next := map[int32]int64{}
	last := map[int32]int{}
	seen := map[int][]int32{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %v of high watermarks %v: %w", next, want, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			i, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "kill9-"))
			if err != nil {
				bad = fmt.Errorf("partition %d offset %d: unexpected value %q", r.Partition, r.Offset, r.Value)
				return
			}
			if prev, ok := last[r.Partition]; ok && i <= prev && bad == nil {
				bad = fmt.Errorf("partition %d offset %d: value %s follows %s: order not preserved",
					r.Partition, r.Offset, killValue(i), killValue(prev))
			}
			last[r.Partition] = i
			seen[i] = append(seen[i], r.Partition)
		})
		if bad != nil {
			return seen, bad
		}
	}
	return seen, nil
}

// ackLog records the outcome of every produced record.
type ackLog struct {
	mu     sync.Mutex
	nSent  int
	acked  []int
	failed int
	errs   map[string]int
}

func newAckLog() *ackLog { return &ackLog{errs: map[string]int{}} }

func (a *ackLog) sent(int) {
	a.mu.Lock()
	a.nSent++
	a.mu.Unlock()
}

func (a *ackLog) done(i int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		a.acked = append(a.acked, i)
		return
	}
	a.failed++
	a.errs[err.Error()]++
}

func (a *ackLog) counts() (acked, failed, sent int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked), a.failed, a.nSent
}

func (a *ackLog) ackedIndexes() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.acked...)
}

func (a *ackLog) summary() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := fmt.Sprintf("%d sent, %d acknowledged, %d failed", a.nSent, len(a.acked), a.failed)
	for e, n := range a.errs {
		s += fmt.Sprintf("; %dx %q", n, e)
	}
	return s
}

func firstN(s []string, n int) string {
	if len(s) > n {
		return strings.Join(s[:n], ", ") + ", ..."
	}
	return strings.Join(s, ", ")
}
