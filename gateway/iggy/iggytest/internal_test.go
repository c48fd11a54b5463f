package iggytest

import (
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/kgate/kgate/gateway/iggy"
)

func TestXXH32(t *testing.T) {
	seq := make([]byte, 100)
	for i := range seq {
		seq[i] = byte(i)
	}
	// Reference values from libxxhash 0.8.1.
	for in, want := range map[string]uint32{
		"":            0x02cc5d05,
		"a":           0x550d7456,
		"abc":         0x32d153ff,
		"customer-42": 0xdb669110,
		"Nobody inspects the spammish repetition": 0xe2293b2f,
		string(seq): 0x7f89ba44,
	} {
		if got := xxh32([]byte(in), 0); got != want {
			t.Errorf("xxh32(%q) = %#x, want %#x", in, got, want)
		}
	}
}

func TestParseHuman(t *testing.T) {
	for in, want := range map[string]uint64{
		"7 days": 7 * 86_400_000_000, "1h 30m": 5_400_000_000, "15s": 15_000_000, "250ms": 250_000,
		"none": never, "1 week": 7 * 86_400_000_000,
	} {
		if got, ok := parseDuration(in); !ok || got != want {
			t.Errorf("parseDuration(%q) = %d %v", in, got, ok)
		}
	}
	for in, want := range map[string]uint64{
		"1 GiB": 1 << 30, "512MB": 512e6, "unlimited": never, "4096": 4096, "2 kib": 2048,
	} {
		if got, ok := parseSize(in); !ok || got != want {
			t.Errorf("parseSize(%q) = %d %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "days", "5 parsecs", "99999999999999999999 s", "18446744073709551615 TiB"} {
		if _, ok := parseDuration(bad); ok {
			t.Errorf("parseDuration(%q) accepted", bad)
		}
		if _, ok := parseSize(bad); ok && bad != "" {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

// offline builds a Server without a listener, with a logged-in conn, to
// drive the handlers directly.
func offline(d iggy.Dialect) (*Server, *conn) {
	s := &Server{
		cfg: Config{Dialect: d, Username: "iggy", Password: "iggy"}, dialect: d,
		log: slog.New(slog.DiscardHandler), tokens: map[string]bool{"tok": true},
		conns: map[*conn]struct{}{}, requests: map[uint32]int{}, data: newStore(d),
	}
	c := &conn{s: s, session: 1}
	st, _ := s.data.createStream("s")
	tp, _ := s.data.createTopic(st, &topic{name: "t", compression: 1, expiry: 1, maxSize: never}, 2)
	s.data.appendMsgs(tp.partitions[0], []StoredMessage{{Payload: []byte("p"), UserHeaders: []byte{1}}})
	return s, c
}

var fuzzCodes = []uint32{
	cPing, cLegacyLoginUser, cLogout, cLegacyLoginPAT, cPollMessages, cSendMessages, cGetConsumerOffset,
	cStoreConsumerOffset, cDeleteConsumerOffset, cGetStream, cGetStreams, cCreateStream, cDeleteStream,
	cGetTopic, cGetTopics, cCreateTopic, cDeleteTopic, cUpdateTopic, cCreatePartitions, cDeletePartitions, cFlushUnsavedBuffer, 7,
}

var fuzzOps = []uint8{1, 2, 3, 128, 129, 130, 132, 133, 134, 136, 137, 160, 161, 162, 200}

// feed runs one input through both dialects' handlers.
func feed(data []byte) {
	if len(data) < 2 {
		return
	}
	sel, body := data[0], data[1:]
	ls, lc := offline(iggy.Legacy)
	ls.handleLegacy(lc, fuzzCodes[int(sel)%len(fuzzCodes)], body)

	cs, cc := offline(iggy.Current)
	hdr := make([]byte, headerSize)
	hdr[60] = frameRequest
	hdr[128] = 1
	op := fuzzOps[int(sel)%len(fuzzOps)]
	hdr[176] = op
	if op != opRegister {
		binary.LittleEndian.PutUint64(hdr[168:], 1)
		binary.LittleEndian.PutUint64(hdr[184:], 1)
	}
	binary.LittleEndian.PutUint32(hdr[196:], fuzzCodes[int(sel)%len(fuzzCodes)])
	cs.handleCurrent(cc, hdr, body)
}

func FuzzHandlers(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{5, 1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 2, 4, 0, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) { feed(data) })
}

// TestHandlersNeverPanic feeds random and truncated bodies to every
// command of both dialects.
func TestHandlersNeverPanic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Valid-looking prefixes: identifiers, consumers, partitioning.
	prefixes := [][]byte{
		{1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0},
		{1, 1, 4, 1, 0, 0, 0, 1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0},
		{22, 0, 0, 0, 1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 2, 4, 0, 0, 0, 0, 1, 0, 0, 0},
		{0, 0x2c, 0, 0, 1, 'x', 1, 'y', 4, 'i', 'g', 'g', 'y'},
		{2, 1, 's', 2, 1, 't'},
	}
	for i := 0; i < 20000; i++ {
		n := rng.IntN(400)
		b := make([]byte, 1+n)
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		if rng.IntN(2) == 0 {
			p := prefixes[rng.IntN(len(prefixes))]
			b = append(append([]byte{b[0]}, p[:rng.IntN(len(p)+1)]...), b[1:]...)
		}
		if rng.IntN(3) == 0 {
			for j := 1; j < len(b); j++ {
				if rng.IntN(2) == 0 {
					b[j] = 0
				}
			}
		}
		feed(b)
	}
}
