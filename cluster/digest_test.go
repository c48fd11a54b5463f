package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// Two replicas that applied the same commands print the same digest for
// every window both applied from its start; one that applied another
// command in a window prints another; a window a replica joined partway
// (after a restart or an installed snapshot) is not printed.
func TestApplyDigestWindows(t *testing.T) {
	replica := func(from uint64, data func(uint64) string) []string {
		var out bytes.Buffer
		d := &applyDigest{every: 4, log: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}))}
		d.restart()
		for i := from; i <= 13; i++ {
			if i%5 == 0 {
				continue // a no-op: it never reaches the FSM
			}
			d.add(&raft.Log{Index: i, Term: 2, Data: []byte(data(i))})
		}
		return strings.Split(strings.TrimSpace(out.String()), "\n")
	}
	same := func(i uint64) string { return "cmd" + string(rune('a'+i)) }
	a := replica(1, same)
	b := replica(6, same) // restarted at index 6, in the window 5-8
	c := replica(1, func(i uint64) string {
		if i == 11 {
			return "other"
		}
		return same(i)
	})
	// Windows end when the next one begins: 1-4 is not whole (the first
	// seen), 5-8 and 9-12 are; 13's window is still open.
	if len(a) != 2 || !strings.Contains(a[0], "first_index=5") || !strings.Contains(a[1], "first_index=9") {
		t.Fatalf("replica a logged %q", a)
	}
	if len(b) != 1 || b[0] != a[1] {
		t.Fatalf("replica b (from 6) logged %q, want only %q", b, a[1])
	}
	if len(c) != 2 || c[0] != a[0] || c[1] == a[1] {
		t.Fatalf("replica c (another command at 11) logged %q; a logged %q", c, a)
	}
}
