package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quota enforcement, as Kafka's ClientQuotaManager and
// ClientRequestQuotaManager (KIP-13, KIP-55, KIP-124, KIP-219): each node
// measures, per quota entity over sampled windows, the bytes produced and
// fetched and the time requests keep it busy, and when a request takes a
// rate over its quota, answers with throttle_time_ms and holds the
// connection: for versions whose client waits out the throttle itself
// (KIP-219: Produce v6+, Fetch v8+, most others from their next version)
// the answer goes out at once and the connection's next request waits
// ("muted"); for older versions the answer itself is delayed. Like a Kafka
// broker, every node enforces the quota on the traffic it serves.
//
// Request time (request_percentage) is a request's time from its read to
// its answer less its waits on others (package worktime: the Raft log,
// Iggy, another node, long polls, rebalances), plus the time to encode the
// answer; 100 is one core's whole time, as 100 is one Kafka request
// handler thread's.

const (
	quotaSamples = 11 // Kafka's quota.window.num
	// anonymousUser is the principal of an unauthenticated connection, to
	// which user quotas (/users/ANONYMOUS or the default user) apply.
	anonymousUser = "ANONYMOUS"
	// maxQuotaSensors bounds the sensors kept; idle ones go first.
	maxQuotaSensors = 10000
)

// Quota names whose rates kgate measures and enforces.
const (
	producerByteRate  = "producer_byte_rate"
	consumerByteRate  = "consumer_byte_rate"
	requestPercentage = "request_percentage"
)

// quotaUser is the principal user quotas apply to: the authenticated user
// (SASL) or certificate subject (mutual TLS), else ANONYMOUS, as Kafka.
func (s *session) quotaUser() string {
	if s.user == "" {
		return anonymousUser
	}
	return s.user
}

type sensorKey struct{ quota, user, client string }

// rateSensor is Kafka's sampled Rate: quotaSamples windows of quotaWindow.
type rateSensor struct {
	starts  [quotaSamples]time.Time // zero: unused
	values  [quotaSamples]float64
	cur     int
	lastUse time.Time
}

func (r *rateSensor) record(now time.Time, v float64, quotaWindow time.Duration) {
	r.purge(now, quotaWindow)
	if r.starts[r.cur].IsZero() {
		r.starts[r.cur] = now
	} else if now.Sub(r.starts[r.cur]) >= quotaWindow {
		r.cur = (r.cur + 1) % quotaSamples
		r.starts[r.cur], r.values[r.cur] = now, 0
	}
	r.values[r.cur] += v
	r.lastUse = now
}

// purge forgets samples older than the whole window.
func (r *rateSensor) purge(now time.Time, quotaWindow time.Duration) {
	for i := range r.starts {
		if !r.starts[i].IsZero() && now.Sub(r.starts[i]) >= quotaSamples*quotaWindow {
			r.starts[i], r.values[i] = time.Time{}, 0
		}
	}
}

// rate is the recorded total over the sampled window; a window younger
// than all but one sample counts as that long, so a first burst is not
// measured over a few milliseconds.
func (r *rateSensor) rate(now time.Time, quotaWindow time.Duration) (perSecond float64, window time.Duration) {
	var total float64
	oldest := now
	for i, s := range r.starts {
		if s.IsZero() {
			continue
		}
		total += r.values[i]
		if s.Before(oldest) {
			oldest = s
		}
	}
	window = now.Sub(oldest)
	if full := int(window / quotaWindow); full < quotaSamples-1 {
		window += time.Duration(quotaSamples-1-full) * quotaWindow
	}
	return total / window.Seconds(), window
}

// throttler holds this node's quota sensors.
type throttler struct {
	window  time.Duration // one sample (Kafka's quota.window.size.seconds)
	mu      sync.Mutex
	sensors map[sensorKey]*rateSensor
	now     func() time.Time
}

// record counts v (bytes, or percent-seconds of request time) against the
// quota named quota for a connection of user and clientID and returns how
// long that client must now wait: 0 within its quota or when no quota
// applies.
func (t *throttler) record(store QuotaStore, quota, user, clientID string, v float64) time.Duration {
	if store == nil {
		return 0
	}
	limit, perUser, perClient, ok := store.QuotaFor(user, clientID, quota)
	if !ok {
		return 0
	}
	key := sensorKey{quota, perUser, perClient}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	s := t.sensors[key]
	if s == nil {
		if t.sensors == nil {
			t.sensors = map[sensorKey]*rateSensor{}
		}
		if len(t.sensors) >= maxQuotaSensors {
			t.evictLocked(now)
		}
		s = &rateSensor{}
		t.sensors[key] = s
	}
	s.record(now, v, t.window)
	rate, window := s.rate(now, t.window)
	if rate <= limit {
		return 0
	}
	// Kafka's throttle: long enough that the rate over the window falls
	// back to the quota.
	d := time.Duration((rate - limit) / limit * float64(window))
	return min(d, quotaSamples*t.window) // at most the whole sampled window
}

// evictLocked drops sensors idle for a whole window, or else the least
// recently used.
func (t *throttler) evictLocked(now time.Time) {
	var lru sensorKey
	var lruAt time.Time
	for k, s := range t.sensors {
		if now.Sub(s.lastUse) >= quotaSamples*t.window {
			delete(t.sensors, k)
			continue
		}
		if lruAt.IsZero() || s.lastUse.Before(lruAt) {
			lru, lruAt = k, s.lastUse
		}
	}
	if len(t.sensors) >= maxQuotaSensors {
		delete(t.sensors, lru)
	}
}

// quotaThrottle records v against quota for the request's user and client
// id and, when mute (the client waits out a throttle itself), mutes the
// connection for the throttle it returns.
func (c *conn) quotaThrottle(hdr Header, user, quota string, v float64, mute bool) time.Duration {
	clientID := ""
	if hdr.ClientID != nil {
		clientID = *hdr.ClientID
	}
	if c.peer {
		return 0 // kgate's own traffic between nodes
	}
	d := c.s.throttle.record(c.s.quotas, quota, user, clientID, v)
	if d > 0 && mute {
		until := time.Now().Add(d).UnixNano()
		for {
			cur := c.mutedUntil.Load()
			if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
				break
			}
		}
	}
	return d
}

// waitUnmuted waits out a running throttle; false when ctx ends first.
func (c *conn) waitUnmuted(ctx context.Context) bool {
	d := time.Until(time.Unix(0, c.mutedUntil.Load()))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// percentSeconds converts request time to the unit of request_percentage
// rates: a rate of 100 is one second of work each second.
func percentSeconds(d time.Duration) float64 { return d.Seconds() * 100 }

// recordRequestTime counts d of request time against the request quota
// without throttling this request (an acks=0 produce, which gets no
// answer): it weighs on the requests that follow.
func (c *conn) recordRequestTime(p pending, d time.Duration) {
	c.quotaThrottle(p.hdr, p.user, requestPercentage, percentSeconds(d), false)
}

// applyThrottle, on the writer, measures an answer against the request
// quota and a fetch answer against the consumer quota, puts the longest
// throttle into the response and holds the connection for it: the next
// request when the client waits out the throttle itself (KIP-219), this
// answer otherwise. False when ctx ends first.
func (c *conn) applyThrottle(ctx context.Context, p pending, resp kmsg.Response) bool {
	clientThrottles := false
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		_, clientThrottles = tr.Throttle()
	}
	d := p.throttle
	if fr, ok := resp.(*kmsg.FetchResponse); ok {
		n := 0
		for _, t := range fr.Topics {
			for _, pt := range t.Partitions {
				n += len(pt.RecordBatches)
			}
		}
		d = max(d, c.quotaThrottle(p.hdr, p.user, consumerByteRate, float64(n), clientThrottles))
	}
	busy := p.busy(time.Now()) + c.encoding // the last answer's encoding too
	d = max(d, c.quotaThrottle(p.hdr, p.user, requestPercentage, percentSeconds(busy), clientThrottles))
	if d <= 0 {
		return true
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		ms := int32(d / time.Millisecond)
		if tr, ok := resp.(kmsg.ThrottleResponse); ok {
			cur, _ := tr.Throttle()
			ms = max(ms, cur)
		}
		st.SetThrottle(ms)
	}
	if clientThrottles {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
