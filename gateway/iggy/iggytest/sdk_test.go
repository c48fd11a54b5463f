package iggytest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

// TestOfficialSDK drives the double with Iggy's own Rust SDK, one release
// per dialect, so the double cannot drift into agreeing only with our
// reading of the protocol.
func TestOfficialSDK(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		sdk, err := iggytest.BuildSDKCheck(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		srv := start(t, d)
		if err := sdk.Check(ctx, srv.Addr(), "iggy", "iggy"); err != nil {
			t.Fatal(err)
		}

		// Messages sent by the SDK read back by the SDK, and by our client.
		c := loggedIn(t, srv)
		createStream(t, c, "apps")
		createTopic(t, c, iggy.NamedID("apps"), iggy.TopicConfig{Name: "events", PartitionsCount: 2})
		if err := sdk.Produce(ctx, srv.Addr(), "iggy", "iggy", "apps", "events", 1, 3, "e"); err != nil {
			t.Fatal(err)
		}
		got, err := sdk.Consume(ctx, srv.Addr(), "iggy", "iggy", "apps", "events", 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[e0 e1 e2]" {
			t.Fatalf("SDK read %q", got)
		}

		// Our client reads what the SDK sent, headers included...
		apps, events := iggy.NamedID("apps"), iggy.NamedID("events")
		pm := pollMsgs(t, c, iggy.Poll{Stream: apps, Topic: events, Partition: iggy.Partition(1), Kind: iggy.PollOffset, Count: 10})
		expectOffsets(t, pm, 0, 1, 2)
		hs, err := iggy.DecodeUserHeaders(pm.Messages[2].UserHeaders)
		if err != nil || len(hs) != 1 || string(hs[0].Key.Value) != "source" || string(hs[0].Value.Value) != "iggy-sdk" {
			t.Fatalf("headers of an SDK message: %+v, %v", hs, err)
		}
		// ...and the SDK reads what our client sent, parsing its headers.
		sent := testMessages(1_700_000_000_000_000, 4, "ours")
		req := must[iggy.Request](t)(iggy.SendMessages(d, apps, events, iggy.ToPartition(0), sent))
		c.ok(req)
		got, err = sdk.Consume(ctx, srv.Addr(), "iggy", "iggy", "apps", "events", 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[ours-0 ours-1 ours-2 ours-3]" {
			t.Fatalf("SDK read %q", got)
		}

		// A wrong password is refused.
		if err := sdk.Check(ctx, srv.Addr(), "iggy", "wrong"); err == nil {
			t.Fatal("the SDK logged in with a wrong password")
		}
	})
}
