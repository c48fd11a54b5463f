package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kgate/kgate/gateway"
)

func requestQuota(entityType, name string, percent float64) kmsg.AlterClientQuotasRequestEntry {
	return kmsg.AlterClientQuotasRequestEntry{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: entityType, Name: kmsg.StringPtr(name)}},
		Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "request_percentage", Value: percent}},
	}
}

func setQuota(t *testing.T, c *rawConn, e kmsg.AlterClientQuotasRequestEntry) {
	t.Helper()
	resp := c.do(alterQuotaReq(false, e)).(*kmsg.AlterClientQuotasResponse)
	if code := resp.Entries[0].ErrorCode; code != 0 {
		t.Fatalf("set quota %+v: error %d", e.Entity, code)
	}
}

// TestRequestQuotaThrottles: a client id over its request_percentage quota
// (KIP-124) is told throttle_time_ms, its connection waits the throttle out
// (Metadata v6+: the client throttles itself, KIP-219) and it gets far
// fewer requests through than a client id without a quota; for a version
// whose client does not throttle itself (Metadata v5) the answer itself is
// held for the throttle it carries.
func TestRequestQuotaThrottles(t *testing.T) {
	n := startNode(t, func(c *gateway.Config) { c.QuotaWindow = 25 * time.Millisecond })
	createTopic(t, n.addr, "rq", 32, nil)
	setQuota(t, dialRaw(t, n.addr), requestQuota("client-id", "busy", 1)) // 10 ms of work a second

	type tally struct {
		requests, throttled int
		longest             time.Duration
	}
	hammer := func(clientID string, d time.Duration) tally {
		c := dialRaw(t, n.addr)
		c.clientID = clientID
		var got tally
		for start := time.Now(); time.Since(start) < d; {
			resp := c.do(metadataReq(12, false)).(*kmsg.MetadataResponse)
			got.requests++
			if resp.ThrottleMillis > 0 {
				got.throttled++
				got.longest = max(got.longest, time.Duration(resp.ThrottleMillis)*time.Millisecond)
			}
		}
		return got
	}
	free := hammer("free", time.Second)
	busy := hammer("busy", time.Second)
	t.Logf("requests in 1 s: %d without a quota (%d throttled), %d at 1 %% (%d throttled, longest %v)",
		free.requests, free.throttled, busy.requests, busy.throttled, busy.longest)
	if free.throttled != 0 {
		t.Errorf("a client id without a quota was throttled %d times", free.throttled)
	}
	if busy.throttled == 0 {
		t.Fatal("the client id over its request quota was never told throttle_time_ms")
	}
	if busy.requests*4 > free.requests {
		t.Errorf("%d requests under a 1 %% request quota against %d without: not held back", busy.requests, free.requests)
	}

	// Metadata v5 carries the throttle but its client does not wait it
	// out: the answer is held instead.
	c := dialRaw(t, n.addr)
	c.clientID = "busy"
	for i := 0; ; i++ {
		start := time.Now()
		resp := c.do(metadataReq(5, false)).(*kmsg.MetadataResponse)
		took := time.Since(start)
		if d := time.Duration(resp.ThrottleMillis) * time.Millisecond; d > 0 {
			if took < d-time.Millisecond {
				t.Errorf("v5 answer throttled %v came after %v: not held", d, took)
			}
			break
		}
		if i == 1000 {
			t.Fatal("1,000 Metadata v5 requests over the quota, none throttled")
		}
	}
}

// TestUserQuotaAppliesToSASLUser: a user quota applies to the connections
// that authenticated as that user, not to other users.
func TestUserQuotaAppliesToSASLUser(t *testing.T) {
	n := startNodeWith(t, func(c *gateway.Config) {
		c.QuotaWindow = 25 * time.Millisecond
		c.SASL = &gateway.SASL{Mechanisms: []string{"PLAIN"}, PlainUsers: func(u string) (string, bool) {
			return u + "-pw", u == "alice" || u == "bob"
		}}
	}, true)
	admin := newClient(t, n.addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()))
	req := alterQuotaReq(false, requestQuota("user", "alice", 1))
	resp, err := req.RequestWith(context.Background(), admin)
	if err != nil || resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("set alice's quota: %v %+v", err, resp)
	}

	throttles := func(user string) int64 {
		var hook throttleHook
		cl := newClient(t, n.addr, kgo.SASL(plain.Auth{User: user, Pass: user + "-pw"}.AsMechanism()), kgo.WithHooks(&hook))
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		for start := time.Now(); time.Since(start) < time.Second; {
			if _, err := metadataReq(12, false).RequestWith(ctx, cl); err != nil {
				t.Fatalf("%s: metadata: %v", user, err)
			}
		}
		return hook.n.Load()
	}
	if n := throttles("bob"); n != 0 {
		t.Errorf("bob, without a quota, was throttled %d times", n)
	}
	if n := throttles("alice"); n == 0 {
		t.Error("alice was never throttled under her 1 % request quota")
	}
}
