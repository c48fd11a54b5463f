package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/kgate/kgate/fsm"
)

// Two replicas that applied the same commands print the same digest for
// every window both applied from its start; one that applied another
// command in a window prints another; a window a replica joined partway
// (after a restart or an installed snapshot) is not printed.
func TestApplyDigestWindows(t *testing.T) {
	replica := func(from uint64, data func(uint64) string, opts ...func(i uint64) (any, bool)) []string {
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
			var res any = &fsm.AppendResults{Results: []fsm.AppendResult{{BaseOffset: int64(i) * 10}}}
			skipped := false
			for _, o := range opts {
				res, skipped = o(i)
			}
			d.outcome(res, skipped)
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

	// The same commands answered with another offset at 7: the commands'
	// checksum is the same, the outcomes' is not.
	field := func(line, key string) string {
		for _, f := range strings.Fields(line) {
			if k, v, _ := strings.Cut(f, "="); k == key {
				return v
			}
		}
		return ""
	}
	other := replica(1, same, func(i uint64) (any, bool) {
		off := int64(i) * 10
		if i == 7 {
			off++
		}
		return &fsm.AppendResults{Results: []fsm.AppendResult{{BaseOffset: off}}}, false
	})
	if field(a[0], "outcomes_crc32c") == "" || field(other[0], "crc32c") != field(a[0], "crc32c") ||
		field(other[0], "outcomes_crc32c") == field(a[0], "outcomes_crc32c") || other[1] != a[1] {
		t.Fatalf("replica answering offset 71 at index 7 logged %q; a logged %q", other, a)
	}
	// A replica replaying entries its state already held (index 9, after a
	// restart from its checkpoint) logs no outcomes for that window.
	replayed := replica(1, same, func(i uint64) (any, bool) {
		if i == 9 {
			return nil, true
		}
		return &fsm.AppendResults{Results: []fsm.AppendResult{{BaseOffset: int64(i) * 10}}}, false
	})
	if replayed[0] != a[0] || field(replayed[1], "outcomes_crc32c") != "" || field(replayed[1], "crc32c") != field(a[1], "crc32c") {
		t.Fatalf("replica that skipped index 9 logged %q; a logged %q", replayed, a)
	}
}
