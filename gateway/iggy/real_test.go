package iggy_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

// TestRealServerKill9KeepsSavedMessages (real-server tier): on a server
// set up to write every batch before answering (StartRealDurable and
// MessagesRequiredToSave 1), every acknowledged message is still there
// after a kill -9 and a restart on the same data directory, and sending
// carries on at the next offset.
func TestRealServerKill9KeepsSavedMessages(t *testing.T) {
	bin := os.Getenv(iggytest.EnvServerBin)
	if bin == "" {
		t.Skipf("real-server tier SKIPPED: set %s to an iggy-server binary", iggytest.EnvServerBin)
	}
	r, err := iggytest.StartRealDurable(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := ctxT(t)
	s, tp := iggy.NamedID("s"), iggy.NamedID("t")
	send := func(cl *iggy.Client, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			msg := iggy.Message{ID: iggy.MessageID(uint64(i+1), 0), OriginTimestamp: 1_700_000_000_000_000, Payload: fmt.Appendf(nil, "m%d", i)}
			if _, _, err := cl.SendMessages(ctx, s, tp, iggy.ToPartition(0), []iggy.Message{msg}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
	}
	cl := iggy.NewClient(iggy.Options{Addr: r.Addr(), Username: r.Username, Password: r.Password}, 1)
	if _, err := cl.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, s, iggy.TopicConfig{Name: "t", PartitionsCount: 1, MessagesRequiredToSave: 1}); err != nil {
		t.Fatal(err)
	}
	send(cl, 0, 100)
	cl.Close()
	r.Kill()
	if err := r.Restart(false); err != nil {
		t.Fatal(err)
	}
	cl = iggy.NewClient(iggy.Options{Addr: r.Addr(), Username: r.Username, Password: r.Password}, 1)
	defer cl.Close()
	send(cl, 100, 110)
	got, err := cl.PollMessages(ctx, iggy.Poll{Consumer: iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(1)},
		Stream: s, Topic: tp, Partition: iggy.Partition(0), Kind: iggy.PollOffset, Count: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 110 {
		t.Fatalf("after kill -9 and restart: %d messages, want 110\n%s", len(got.Messages), r.LogTail(20))
	}
	for i, m := range got.Messages {
		if m.Offset != uint64(i) || string(m.Payload) != fmt.Sprintf("m%d", i) {
			t.Fatalf("message %d: offset %d payload %q", i, m.Offset, m.Payload)
		}
	}
	for _, from := range []uint64{99, 100, 105} {
		got, err := cl.PollMessages(ctx, iggy.Poll{Consumer: iggy.Consumer{Kind: iggy.ConsumerSingle, ID: iggy.NumericID(1)},
			Stream: s, Topic: tp, Partition: iggy.Partition(0), Kind: iggy.PollOffset, Value: from, Count: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) == 0 || got.Messages[0].Offset != from || len(got.Messages) != int(110-from) {
			t.Fatalf("poll from %d after the restart: %d messages %+v", from, len(got.Messages), got)
		}
	}
}
