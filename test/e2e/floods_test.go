package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFloods: floods and bad input against a three-node cluster while a
// healthy idempotent producer and a three-member consumer group (franz-go)
// run (docs/reliability.md, "Floods and bad input"). In turn:
//
//   - a connection flood on the leader's Kafka port past --max-connections:
//     the extra connections are closed at once, the clients already
//     connected keep being served, followers still forward to the leader,
//     and a new client is served once the flood ends;
//   - slowloris on every node: connections that send part of a frame and
//     stall or trickle are closed within --request-read-timeout, while new
//     clients are served;
//   - size prefixes past --max-frame-bytes (up to 2^31-1, and negative):
//     closed before a stalled frame is, without the node allocating them; a
//     Produce frame of exactly --max-frame-bytes gets MESSAGE_TOO_LARGE for
//     its oversized batch, and a large batch within the limits is written;
//   - random bytes (seeded) on every node's Kafka, Raft, gossip TCP and UDP
//     and admin HTTP ports: no node exits or panics, the cluster keeps a
//     leader and every voter; so it does with hundreds of connections to
//     every Raft port that open as Raft's and stall;
//   - groups and members past the caps: a group past --max-group-members
//     (GROUP_MAX_SIZE_REACHED), 10,000 first joins of new groups (KIP-394
//     member ids, bounded by --max-members) and thousands of offset commits
//     to new groups (bounded by --max-groups).
//
// Throughout, the producer's and the group's requests keep completing
// (checked during each flood), and at the end every acknowledged record
// was consumed, the group kept its members and generation, and each
// node's peak RSS (VmHWM) stayed under a ceiling.
//
// KGATE_E2E_FLOODS=long runs the longer form (ten times the connections,
// frames, random inputs and commits); KGATE_E2E_FLOODS_SEED replays the
// random bytes of a seed the test printed.
func TestFloods(t *testing.T) {
	scale := 1
	if os.Getenv("KGATE_E2E_FLOODS") == "long" {
		scale = 10
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KGATE_E2E_FLOODS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KGATE_E2E_FLOODS_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("floods: scale %d, random-bytes seed %d (KGATE_E2E_FLOODS_SEED=%d replays it)", scale, seed, seed)

	begin := time.Now()
	c := startClusterWith(t, func(c *kgateCluster) {
		for _, n := range c.nodes {
			n.args = append(n.args, floodFlags(scale)...)
		}
	})
	suffix := time.Now().UnixNano() % 1e9
	topic := fmt.Sprintf("floods-%d", suffix)
	probeTopic := fmt.Sprintf("floods-probe-%d", suffix)
	group := fmt.Sprintf("floods-group-%d", suffix)
	createClusterTopic(t, c, topic)
	createClusterTopic(t, c, probeTopic)

	prod := startClusterProducer(t, c, topic)
	w := newClGroupWatch()
	_, names := clFranzGoMembers.startMembers(t, c, topic, group, "floods-member", w, clMemberOpts{})
	_, adm := c.adminClient()
	before := clWaitGroupStable(t, c, adm, group, topic, names, w)
	w.arm()
	t.Logf("group stable %v after start: %s", time.Since(begin).Round(time.Millisecond), before)
	f := &floods{t: t, c: c, prod: prod, w: w, names: names, probeTopic: probeTopic, scale: scale,
		rng: rand.New(rand.NewPCG(seed, 0x6b67617465))}
	baseline := f.peakRSS()

	f.connectionFlood()
	f.slowloris()
	f.oversizeFrames()
	f.framesAtTheLimit()
	f.randomBytes()
	f.groupsPastCaps()

	// The workload's verdict: nothing acknowledged lost, no member lost.
	_, adm = clDrain(t, c, prod, w, group, topic)
	after := clDescribeGroupWithin(t, c, adm, group, topic, 30*time.Second)
	if after.state != "Stable" || fmt.Sprint(after.members) != fmt.Sprint(before.members) || after.generation != before.generation {
		t.Errorf("group changed across the floods:\nbefore %s\nafter  %s", before, after)
	}
	w.report(t) // fails on any rebalance callback (a member lost or revoked) since arming

	peak := f.peakRSS()
	// Each node's peak RSS must stay under about three times the largest
	// measured (docs/reliability.md, "Floods and bad input"): 71 MiB in
	// the short form, 213 MiB in the long one (10,000 one-member groups,
	// 20,000 groups with offsets, 40,000 members and pending ids).
	floodRSSCeiling := int64(192 << 20)
	if scale > 1 {
		floodRSSCeiling = 640 << 20
	}
	for i, n := range c.nodes {
		t.Logf("node %d peak RSS (VmHWM): %d MiB before the floods, %d MiB after (ceiling %d MiB)",
			n.id, baseline[i]>>20, peak[i]>>20, floodRSSCeiling>>20)
		if peak[i] > floodRSSCeiling {
			t.Errorf("node %d peak RSS %d MiB, over the ceiling of %d MiB", n.id, peak[i]>>20, floodRSSCeiling>>20)
		}
	}
	for _, n := range c.nodes {
		if !n.running() {
			t.Errorf("node %d exited (%s)", n.id, n.exitStatus())
		}
		if lines := panicLines(n.logPath); len(lines) > 0 {
			t.Errorf("node %d logged a panic: %s", n.id, firstN(lines, 3))
		}
	}
	t.Logf("floods done in %v", time.Since(begin).Round(time.Millisecond))
}

// The limits the floods push past, low so the test reaches them quickly.
const (
	floodMaxConns       = 64
	floodReadTimeout    = 2 * time.Second
	floodMaxFrame       = 1_100_000
	floodMaxMessage     = 1048588 // the default
	floodMaxGroupMember = 20
)

// floodCaps are the group caps: low in the short form, so it reaches them
// quickly; in the long form high enough for 10,000 groups with a member
// each besides.
func floodCaps(scale int) (maxGroups, maxMembers int) {
	if scale > 1 {
		return 20_000, 40_000
	}
	return 200, 400
}

func floodFlags(scale int) []string {
	maxGroups, maxMembers := floodCaps(scale)
	flags := []string{
		"--max-connections", strconv.Itoa(floodMaxConns),
		"--request-read-timeout", floodReadTimeout.String(),
		"--max-frame-bytes", strconv.Itoa(floodMaxFrame),
		"--max-groups", strconv.Itoa(maxGroups),
		"--max-group-members", strconv.Itoa(floodMaxGroupMember),
		"--max-members", strconv.Itoa(maxMembers),
	}
	if scale > 1 {
		// The 10,000 one-member groups of the long form join at once.
		flags = append(flags, "--group-initial-rebalance-delay", "1ms")
	}
	return flags
}

type floods struct {
	t          *testing.T
	c          *kgateCluster
	prod       *clusterProducer
	w          *clGroupWatch
	names      []string
	probeTopic string
	scale      int
	rng        *rand.Rand
}

// consumed is the number of records the group's members have polled.
func (f *floods) consumed() int {
	n := 0
	for _, name := range f.names {
		n += f.w.recordsOf(name)
	}
	return n
}

// served waits (bounded) until the producer has had records acknowledged
// and the group has polled records since the call: run while a flood holds,
// it shows the healthy clients kept being served through it.
func (f *floods) served(what string) {
	f.t.Helper()
	acked, polled := f.prod.acked(), f.consumed()
	step(f.t, "producer and group served "+what, 30*time.Second, func(ctx context.Context) error {
		for {
			a, p := f.prod.acked(), f.consumed()
			if a > acked && p > polled {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("acknowledged %d -> %d, polled %d -> %d (%s)", acked, a, polled, p, f.prod.acks.summary())
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// newClient checks that a new client, bootstrapped with node n alone, is
// served: it produces a record (acks=all) to the probe topic.
func (f *floods) newClient(ctx context.Context, n *clusterNode) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafka()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequestRetries(2), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.ProduceSync(pctx, &kgo.Record{Topic: f.probeTopic, Value: []byte("probe")}).FirstErr()
}

// newClientServed retries newClient until it succeeds (the node notices
// closed connections asynchronously), bounded.
func (f *floods) newClientServed(what string, n *clusterNode) {
	f.t.Helper()
	step(f.t, fmt.Sprintf("a new client of node %d served %s", n.id, what), 45*time.Second, func(ctx context.Context) error {
		return retry(ctx, 200*time.Millisecond, func() error { return f.newClient(ctx, n) })
	})
}

// apiVersionsV0 is a whole ApiVersions v0 request frame.
var apiVersionsV0 = []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}

// answered reports whether nc gets an answer to ApiVersions (false: the
// node closed it).
func answered(nc net.Conn) bool {
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := nc.Write(apiVersionsV0); err != nil {
		return false
	}
	var size [4]byte
	_, err := io.ReadFull(nc, size[:])
	return err == nil
}

// connectionFlood opens far more connections than --max-connections to the
// leader's Kafka port and holds them while the healthy clients must keep
// being served.
func (f *floods) connectionFlood() {
	t := f.t
	n := f.c.node(f.c.leader())
	total := 4 * floodMaxConns * f.scale
	conns := make([]net.Conn, 0, total)
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for range total {
		nc, err := net.DialTimeout("tcp", n.kafka(), 10*time.Second)
		if err != nil {
			t.Fatalf("dialling node %d: %v", n.id, err)
		}
		conns = append(conns, nc)
	}
	var mu sync.Mutex
	open := 0
	var wg sync.WaitGroup
	for _, nc := range conns {
		wg.Go(func() {
			if answered(nc) {
				mu.Lock()
				open++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("connection flood: %d connections to node %d (the leader), %d served, %d closed at once", total, n.id, open, total-open)
	if open > floodMaxConns {
		t.Fatalf("%d of %d flood connections served, want at most --max-connections %d", open, total, floodMaxConns)
	}
	f.served("while the connection flood holds")
	f.forwardedThrough(n)
	if err := f.c.ready(context.Background(), n); err != nil {
		t.Fatalf("node %d not ready during the flood: %v", n.id, err)
	}
	for _, nc := range conns {
		nc.Close()
	}
	conns = nil
	f.newClientServed("after the connection flood", n)
}

// forwardedThrough sends InitProducerID, which only the leader answers, on
// several connections at once to each follower: each forwards it to the
// flooded leader over links of its own (more than it keeps idle), which a
// client flood must not crowd out.
func (f *floods) forwardedThrough(leader *clusterNode) {
	t := f.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range f.c.nodes {
		if n == leader {
			continue
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var bad []string
		for range 8 {
			wg.Go(func() {
				fc, err := dialFlood(n.kafka())
				var code int16
				if err == nil {
					defer fc.nc.Close()
					req := kmsg.NewPtrInitProducerIDRequest()
					req.Version = 4
					req.TransactionTimeoutMillis = 60000
					var resp kmsg.Response
					if resp, err = fc.do(ctx, req); err == nil {
						code = resp.(*kmsg.InitProducerIDResponse).ErrorCode
					}
				}
				if err != nil || code != 0 {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("error %v, code %d", err, code))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(bad) > 0 {
			t.Fatalf("InitProducerID through node %d during the flood on the leader: %s", n.id, firstN(bad, 3))
		}
	}
	t.Logf("InitProducerID forwarded through both followers to the flooded leader, 8 at once each: ok")
}

// slowloris opens connections to every node that start a frame and stall
// or trickle; each must be closed within --request-read-timeout (bounded
// here by a generous multiple), and new clients must be served meanwhile.
func (f *floods) slowloris() {
	t := f.t
	const perNode = 32 // below --max-connections: they must not crowd out new clients
	frame := []byte{0, 0, 0, 200, 0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff}
	type result struct {
		after time.Duration
		err   error
	}
	results := make(chan result, perNode*len(f.c.nodes))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for _, n := range f.c.nodes {
		for i := range perNode {
			nc, err := net.DialTimeout("tcp", n.kafka(), 10*time.Second)
			if err != nil {
				t.Fatalf("dialling node %d: %v", n.id, err)
			}
			var first []byte
			switch i % 4 {
			case 0:
				first = frame[:1] // part of the size prefix
			case 1:
				first = frame[:4] // the size prefix alone
			case 2:
				first = frame[:10] // part of the header
			case 3:
				first = frame[:5] // then a byte every 200 ms
			}
			wg.Go(func() {
				defer nc.Close()
				at := time.Now()
				if _, err := nc.Write(first); err != nil {
					results <- result{err: fmt.Errorf("write: %w", err)}
					return
				}
				if i%4 == 3 {
					go func() {
						for k := 5; k < len(frame); k++ {
							select {
							case <-ctx.Done():
								return
							case <-time.After(200 * time.Millisecond):
							}
							if _, err := nc.Write(frame[k : k+1]); err != nil {
								return
							}
						}
					}()
				}
				// The node must close it long before this.
				nc.SetReadDeadline(time.Now().Add(15 * floodReadTimeout))
				var buf [64]byte
				nr, err := nc.Read(buf[:])
				var ne net.Error
				switch {
				case nr > 0:
					results <- result{err: fmt.Errorf("got %d bytes", nr)}
				case errors.As(err, &ne) && ne.Timeout():
					results <- result{err: fmt.Errorf("still open after %v", 15*floodReadTimeout)}
				default:
					results <- result{after: time.Since(at)}
				}
			})
		}
	}
	for _, n := range f.c.nodes {
		f.newClientServed("during slowloris", n)
	}
	f.served("during slowloris")
	wg.Wait()
	close(results)
	var closed []time.Duration
	for r := range results {
		if r.err != nil {
			t.Errorf("slowloris connection: %v", r.err)
			continue
		}
		closed = append(closed, r.after)
	}
	slices.Sort(closed)
	if len(closed) > 0 {
		t.Logf("slowloris: %d stalled or trickling connections (%d per node) closed after %v (first) to %v (last), with --request-read-timeout %v; all done %v after start",
			len(closed), perNode, closed[0].Round(time.Millisecond), closed[len(closed)-1].Round(time.Millisecond),
			floodReadTimeout, time.Since(start).Round(time.Millisecond))
	}
}

// oversizeFrames sends size prefixes past --max-frame-bytes to every node:
// each connection must be closed before one that stalled a frame at the
// same time (which waits out --request-read-timeout), that is, at once and
// without reading or allocating what the prefix claims.
func (f *floods) oversizeFrames() {
	t := f.t
	sizes := []uint32{floodMaxFrame + 1, 1<<31 - 1, 1 << 31, 0xffffffff}
	per := 8 * f.scale
	for _, n := range f.c.nodes {
		sentinel, err := net.DialTimeout("tcp", n.kafka(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sentinel.Write(apiVersionsV0[:8]); err != nil {
			t.Fatal(err)
		}
		sentinelDone := make(chan error, 1)
		var sentinelAt time.Time
		go func() {
			sentinel.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := sentinel.Read(make([]byte, 16))
			sentinelAt = time.Now()
			sentinelDone <- err
		}()
		var mu sync.Mutex
		var closedAt []time.Time
		var errs []string
		var all sync.WaitGroup
		for _, size := range sizes {
			for range per {
				all.Go(func() {
					nc, err := net.DialTimeout("tcp", n.kafka(), 10*time.Second)
					if err != nil {
						mu.Lock()
						errs = append(errs, err.Error())
						mu.Unlock()
						return
					}
					defer nc.Close()
					msg := binary.BigEndian.AppendUint32(nil, size)
					msg = append(msg, 0, 0, 0, 0, 0, 0, 0, 1) // a header's worth: then nothing more
					nc.Write(msg)
					nc.SetReadDeadline(time.Now().Add(30 * time.Second))
					got, err := nc.Read(make([]byte, 16))
					mu.Lock()
					defer mu.Unlock()
					var ne net.Error
					switch {
					case got > 0:
						errs = append(errs, fmt.Sprintf("size %d: answered", size))
						return
					case errors.As(err, &ne) && ne.Timeout():
						errs = append(errs, fmt.Sprintf("size %d: still open after 30s", size))
						return
					}
					closedAt = append(closedAt, time.Now())
				})
			}
		}
		all.Wait()
		err = <-sentinelDone
		sentinel.Close()
		if len(errs) > 0 {
			t.Fatalf("node %d, oversize frames: %s", n.id, firstN(errs, 5))
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("node %d: a stalled frame still open after 30s", n.id)
		}
		for _, at := range closedAt {
			if !at.Before(sentinelAt) {
				t.Fatalf("node %d: an oversize size prefix was closed only after a stalled frame timed out", n.id)
			}
		}
		t.Logf("node %d: %d connections with size prefixes %v closed before a stalled frame was", n.id, len(closedAt), sizes)
	}
	f.served("after oversize frames")
}

// framesAtTheLimit sends the probe topic's partition 0 leader a Produce
// frame of exactly --max-frame-bytes, whose batch is past
// --max-message-bytes (MESSAGE_TOO_LARGE, the connection kept), then a
// batch just within --max-message-bytes (written).
func (f *floods) framesAtTheLimit() {
	t := f.t
	_, adm := f.c.adminClient()
	var leader *clusterNode
	step(t, "find partition 0's leader of the probe topic", 30*time.Second, func(ctx context.Context) error {
		md, err := adm.Metadata(ctx, f.probeTopic)
		if err != nil {
			return err
		}
		p, ok := md.Topics[f.probeTopic].Partitions[0]
		if !ok || p.Leader < 1 {
			return fmt.Errorf("no leader: %+v", md.Topics[f.probeTopic])
		}
		leader = f.c.node(p.Leader)
		return nil
	})
	nc, err := net.DialTimeout("tcp", leader.kafka(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	produce := func(frameBytes int, corr int32) int16 {
		t.Helper()
		frame := produceFrameOf(f.probeTopic, corr, frameBytes)
		if len(frame)-4 != frameBytes {
			t.Fatalf("built a %d-byte frame, want %d", len(frame)-4, frameBytes)
		}
		nc.SetDeadline(time.Now().Add(60 * time.Second))
		if _, err := nc.Write(frame); err != nil {
			t.Fatalf("writing a %d-byte frame: %v", frameBytes, err)
		}
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			t.Fatalf("no answer to a %d-byte Produce frame: %v", frameBytes, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(body)); got != corr {
			t.Fatalf("correlation id %d, want %d", got, corr)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = produceFrameVersion
		if err := resp.ReadFrom(body[4:]); err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("produce response %+v", resp)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(floodMaxFrame, 1); code != kerr.MessageTooLarge.Code {
		t.Fatalf("a batch past --max-message-bytes in a frame of exactly --max-frame-bytes: error %d, want MESSAGE_TOO_LARGE", code)
	}
	// The batch of a frame 100 bytes under the message limit fits it.
	if code := produce(floodMaxMessage, 2); code != 0 {
		t.Fatalf("a %d-byte frame with a batch within --max-message-bytes: error %d (%v)", floodMaxMessage, code, kerr.ErrorForCode(code))
	}
	t.Logf("node %d: a Produce frame of exactly --max-frame-bytes (%d) got MESSAGE_TOO_LARGE, one of %d was written", leader.id, floodMaxFrame, floodMaxMessage)
}

const produceFrameVersion = 7 // not flexible: a v1 request header

// produceFrameOf is a size-prefixed Produce v7 frame of exactly frameBytes
// (after the prefix) carrying one batch of one record to partition 0.
func produceFrameOf(topic string, corr int32, frameBytes int) []byte {
	build := func(valueLen int) []byte {
		rec := []byte{0}                  // attributes
		rec = binary.AppendVarint(rec, 0) // timestamp delta
		rec = binary.AppendVarint(rec, 0) // offset delta
		rec = binary.AppendVarint(rec, -1)
		rec = binary.AppendVarint(rec, int64(valueLen))
		rec = append(rec, make([]byte, valueLen)...)
		rec = binary.AppendVarint(rec, 0) // headers
		records := binary.AppendVarint(nil, int64(len(rec)))
		records = append(records, rec...)
		now := time.Now().UnixMilli()
		rb := kmsg.RecordBatch{Magic: 2, FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1,
			FirstSequence: -1, NumRecords: 1, Records: records}
		batch := rb.AppendTo(nil)
		binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-12))
		binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
		req := kmsg.NewPtrProduceRequest()
		req.Version = produceFrameVersion
		req.Acks, req.TimeoutMillis = -1, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		frame := []byte{0, 0, 0, 0, 0, 0, 0, produceFrameVersion}
		frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
		frame = append(frame, 0xff, 0xff) // null client id
		frame = req.AppendTo(frame)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		return frame
	}
	valueLen := frameBytes - (len(build(0)) - 4)
	for range 4 { // varint lengths grow with the value
		got := len(build(valueLen)) - 4
		if got == frameBytes {
			break
		}
		valueLen -= got - frameBytes
	}
	return build(valueLen)
}

// randomBytes writes seeded random bytes to every port of every node:
// Kafka, Raft and gossip (TCP), gossip (UDP) and the admin HTTP API.
func (f *floods) randomBytes() {
	t := f.t
	conns := 16 * f.scale
	datagrams := 200 * f.scale
	for _, n := range f.c.nodes {
		// One schedule per node and port, drawn in order from the seed.
		type job struct {
			addr string
			data [][]byte
		}
		var jobs []job
		for _, port := range []string{"kafka-addr", "raft-addr", "gossip-addr", "admin-addr"} {
			j := job{addr: n.addrs[port]}
			for range conns {
				b := make([]byte, 1+f.rng.IntN(16<<10))
				for i := range b {
					b[i] = byte(f.rng.Uint32())
				}
				j.data = append(j.data, b)
			}
			jobs = append(jobs, j)
		}
		var wg sync.WaitGroup
		for _, j := range jobs {
			for _, b := range j.data {
				wg.Go(func() {
					nc, err := net.DialTimeout("tcp", j.addr, 10*time.Second)
					if err != nil {
						t.Errorf("dialling %s: %v", j.addr, err)
						return
					}
					defer nc.Close()
					nc.SetDeadline(time.Now().Add(3 * time.Second))
					nc.Write(b)
					// Read what comes (an HTTP 400, nothing) until the node
					// closes or the deadline: either is fine.
					io.Copy(io.Discard, nc)
				})
			}
		}
		udp, err := net.Dial("udp", n.addrs["gossip-addr"])
		if err != nil {
			t.Fatal(err)
		}
		for range datagrams {
			b := make([]byte, 1+f.rng.IntN(1400))
			for i := range b {
				b[i] = byte(f.rng.Uint32())
			}
			udp.Write(b)
		}
		udp.Close()
		wg.Wait()
	}
	t.Logf("random bytes: %d TCP connections to each of the Kafka, Raft, gossip and admin ports of every node, %d gossip UDP datagrams each", conns, datagrams)
	for _, n := range f.c.nodes {
		if !n.running() {
			t.Fatalf("node %d exited after random bytes (%s)\nlog tail:\n%s", n.id, n.exitStatus(), tailFile(n.logPath, 40))
		}
	}
	leader := f.c.waitFormed(f.c.ids()...)
	t.Logf("after random bytes: node %d leads, every node an alive voter", leader)

	// Connections that open as Raft's (an RPC type byte) and stall: Raft
	// reads each through a 256 KiB buffer with no deadline; the node holds
	// a bounded number and closes the rest.
	stalled := 256 * f.scale
	var held []net.Conn
	defer func() {
		for _, nc := range held {
			nc.Close()
		}
	}()
	for _, n := range f.c.nodes {
		for range stalled {
			nc, err := net.DialTimeout("tcp", n.addrs["raft-addr"], 10*time.Second)
			if err != nil {
				t.Fatalf("dialling node %d's Raft port: %v", n.id, err)
			}
			held = append(held, nc)
			nc.Write([]byte{byte(f.rng.IntN(4))})
		}
	}
	f.served("while stalled connections are open to every Raft port")
	if got, err := f.c.formed(context.Background(), f.c.ids()...); err != nil || got != leader {
		t.Fatalf("with stalled Raft connections: leader %d, %v (node %d led before)", got, err, leader)
	}
	for _, nc := range held {
		nc.Close()
	}
	held = nil
	t.Logf("%d stalled connections to each node's Raft port: the cluster kept its leader and served", stalled)
	f.served("after random bytes")
	for _, n := range f.c.nodes {
		f.newClientServed("after random bytes", n)
	}
}

// groupsPastCaps pushes the leader past the group caps: members of one
// group past --max-group-members, 10,000 first joins of new groups (each a
// KIP-394 pending member id) past --max-members, and offset commits to new
// groups past --max-groups.
func (f *floods) groupsPastCaps() {
	t := f.t
	maxGroups, maxMembers := floodCaps(f.scale)
	leader := f.c.node(f.c.leader())
	cl, _ := f.c.adminClient()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Each worker has its own connection to the leader (the coordinator),
	// so a parked JoinGroup holds back no other.
	codes := func(n, workers int, req func(i int) kmsg.Request, code func(kmsg.Response) int16) map[int16]int {
		var mu sync.Mutex
		out := map[int16]int{}
		next := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			fc, err := dialFlood(leader.kafka())
			if err != nil {
				t.Fatalf("dialling the leader: %v", err)
			}
			wg.Go(func() {
				defer fc.nc.Close()
				for i := range next {
					resp, err := fc.do(ctx, req(i))
					mu.Lock()
					if err != nil {
						out[-2]++
						t.Errorf("request %d: %v", i, err)
					} else {
						out[code(resp)]++
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		return out
	}
	join := func(group, client string, version int16, session int32) *kmsg.JoinGroupRequest {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Version = version
		r.Group, r.ProtocolType = group, "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = session, 6000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", (&kmsg.ConsumerMemberMetadata{Topics: []string{f.probeTopic}}).AppendTo(nil)
		r.Protocols = append(r.Protocols, p)
		return r
	}
	joinCode := func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }

	// Members past --max-group-members (JoinGroup v3: no pending ids).
	big := fmt.Sprintf("floods-big-%d", time.Now().UnixNano()%1e9)
	n := floodMaxGroupMember + 5
	got := codes(n, n, func(i int) kmsg.Request { return join(big, fmt.Sprintf("big-%d", i), 3, 6000) }, joinCode)
	t.Logf("%d members joining one group with --max-group-members %d: %v", n, floodMaxGroupMember, got)
	if got[0] != floodMaxGroupMember || got[kerr.GroupMaxSizeReached.Code] != n-floodMaxGroupMember {
		t.Errorf("joins of %d members: codes %v, want %d joined and %d GROUP_MAX_SIZE_REACHED", n, got, floodMaxGroupMember, n-floodMaxGroupMember)
	}

	// The long form: 10,000 groups with a member each (JoinGroup v3; the
	// members never sync and time out after 6 s).
	memberGroups := 0
	if f.scale > 1 {
		memberGroups = 10_000
		got = codes(memberGroups, 32, func(i int) kmsg.Request {
			return join(fmt.Sprintf("floods-one-%d", i), "one", 3, 6000)
		}, joinCode)
		t.Logf("%d groups joined by one member each: %v", memberGroups, got)
		if got[0] != memberGroups {
			t.Errorf("%d groups joined by one member each: codes %v, want all joined", memberGroups, got)
		}
	}

	// 10,000 first joins of new groups (v5: KIP-394): each would leave a
	// pending member id for the session timeout, 5 minutes: longer than
	// the rest of the test, so none expires to make room.
	n = 10_000 * f.scale
	got = codes(n, 16, func(i int) kmsg.Request {
		return join(fmt.Sprintf("floods-new-%d", i), "new", 5, int32((5 * time.Minute).Milliseconds()))
	}, joinCode)
	t.Logf("%d first joins of new groups with --max-members %d: %v", n, maxMembers, got)
	pending := got[kerr.MemberIDRequired.Code]
	// The healthy group's members take their places; the others' may have
	// timed out.
	if pending == 0 || pending+clusterMembers > maxMembers || pending+got[kerr.CoordinatorNotAvailable.Code] != n {
		t.Errorf("first joins of %d new groups: codes %v, want at most %d MEMBER_ID_REQUIRED, the rest COORDINATOR_NOT_AVAILABLE",
			n, got, maxMembers-clusterMembers)
	}

	// Offset commits to new groups (each a group of its own while it has
	// offsets) past --max-groups: the healthy group (which has offsets)
	// takes one place, the big group and the one-member groups one each if
	// their members have not yet timed out.
	n = max(2*maxGroups, 2_000)
	got = codes(n, 16, func(i int) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version = 8
		r.Group, r.Generation = fmt.Sprintf("floods-commit-%d", i), -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = f.probeTopic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 0
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}, func(r kmsg.Response) int16 {
		resp := r.(*kmsg.OffsetCommitResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return -1
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	})
	t.Logf("%d offset commits to new groups with --max-groups %d: %v", n, maxGroups, got)
	if got[0] < maxGroups-2-memberGroups || got[0] > maxGroups-1 || got[0]+got[kerr.CoordinatorNotAvailable.Code] != n {
		t.Errorf("offset commits to %d new groups: codes %v, want %d to %d accepted, the rest COORDINATOR_NOT_AVAILABLE",
			n, got, maxGroups-2-memberGroups, maxGroups-1)
	}
	var listed int
	step(t, "the leader lists the groups", 30*time.Second, func(ctx context.Context) error {
		groups, err := kadm.NewClient(cl).ListGroups(ctx)
		if err != nil {
			return err
		}
		listed = len(groups)
		return nil
	})
	t.Logf("groups listed after the group floods: %d (--max-groups %d)", listed, maxGroups)
	if listed > maxGroups {
		t.Errorf("%d groups listed, over --max-groups %d", listed, maxGroups)
	}
	f.served("after the group floods")
}

// floodConn is a plain Kafka connection sending one request at a time.
type floodConn struct {
	nc   net.Conn
	br   *bufio.Reader
	corr int32
}

func dialFlood(addr string) (*floodConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &floodConn{nc: nc, br: bufio.NewReader(nc)}, nil
}

// do sends req (with a null client id) and reads its answer.
func (c *floodConn) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.corr++
	frame := []byte{0, 0, 0, 0}
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(c.corr))
	frame = append(frame, 0xff, 0xff)
	if req.IsFlexible() {
		frame = append(frame, 0) // no header tags
	}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	c.nc.SetDeadline(deadline)
	if _, err := c.nc.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, c.corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body = body[4:]
	if resp.IsFlexible() {
		body = body[1:] // no header tags
	}
	return resp, resp.ReadFrom(body)
}

// peakRSS is each node's peak resident set size (VmHWM), in bytes.
func (f *floods) peakRSS() []int64 {
	f.t.Helper()
	var out []int64
	for _, n := range f.c.nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
		if err != nil {
			f.t.Fatalf("node %d: %v", n.id, err)
		}
		var kb int64 = -1
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					f.t.Fatalf("node %d VmHWM %q: %v", n.id, rest, err)
				}
			}
		}
		if kb < 0 {
			f.t.Fatalf("node %d: no VmHWM in /proc/%d/status", n.id, n.cmd.Process.Pid)
		}
		out = append(out, kb<<10)
	}
	return out
}

// panicLines are the lines of a node's log that show a Go panic.
func panicLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") || strings.Contains(line, "goroutine ") && strings.Contains(line, "[running]") {
			out = append(out, line)
		}
	}
	return out
}
