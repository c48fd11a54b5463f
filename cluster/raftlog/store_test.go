package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

var quiet = slog.New(slog.DiscardHandler)

// data is the payload of entry index written in term: its bytes name both,
// and its length varies, so that a misplaced, stale or damaged entry shows.
func data(index, term uint64) []byte {
	n := 1 + int((index*7919+term*104729)%6000)
	if index%5 == 3 {
		n += directBody // written from its own buffer, not copied into the batch's
	}
	tag := fmt.Sprintf("%d/%d;", index, term)
	return bytes.Repeat([]byte(tag), n/len(tag)+1)[:n]
}

func batch(first, n, term uint64) []*raft.Log {
	var logs []*raft.Log
	for i := first; i < first+n; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data(i, term)})
	}
	return logs
}

func open(t testing.TB, dir string, segSize int64) *Store {
	t.Helper()
	s, err := Open(dir, Options{Fsync: true, SegmentSize: segSize, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustStore(t testing.TB, s *Store, logs []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

func mustDelete(t testing.TB, s *Store, min, max uint64) {
	t.Helper()
	if err := s.DeleteRange(min, max); err != nil {
		t.Fatal(err)
	}
}

// expect checks that s holds exactly the entries first..last, entry i in
// term terms(i), and nothing outside.
func expect(t testing.TB, s *Store, first, last uint64, terms func(uint64) uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("log holds %d..%d, want %d..%d", f, l, first, last)
	}
	var e raft.Log
	if first > 1 {
		if err := s.GetLog(first-1, &e); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("entry %d below the first: %v, want ErrLogNotFound", first-1, err)
		}
	}
	if err := s.GetLog(last+1, &e); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry %d after the last: %v, want ErrLogNotFound", last+1, err)
	}
	if last == 0 {
		return
	}
	for i := first; i <= last; i++ {
		if err := s.GetLog(i, &e); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		term := terms(i)
		if e.Index != i || e.Term != term || !bytes.Equal(e.Data, data(i, term)) {
			t.Fatalf("entry %d: got index %d term %d (%d bytes), want term %d", i, e.Index, e.Term, len(e.Data), term)
		}
	}
}

func term(t uint64) func(uint64) uint64 { return func(uint64) uint64 { return t } }

func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(segs)
	return segs
}

// Every field of raft.Log comes back as it was stored.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	at := time.Date(2026, 12, 4, 3, 30, 0, 123456789, time.UTC)
	logs := []*raft.Log{
		{Index: 1, Term: 3, Type: raft.LogConfiguration, Data: []byte("conf"), Extensions: []byte("ext"), AppendedAt: at},
		{Index: 2, Term: 3, Type: raft.LogNoop},
		{Index: 3, Term: 4, Type: raft.LogCommand, Data: bytes.Repeat([]byte{0xff}, 1<<20), AppendedAt: at.Add(time.Second)},
	}
	mustStore(t, s, logs)
	check := func(s *Store) {
		for _, want := range logs {
			var got raft.Log
			if err := s.GetLog(want.Index, &got); err != nil {
				t.Fatal(err)
			}
			if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
				!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
				!got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero() {
				t.Fatalf("entry %d: got %+v, want %+v", want.Index, got, want)
			}
		}
	}
	check(s)
	s.Close()
	s = open(t, dir, 0)
	defer s.Close()
	check(s)
}

// StoreLogs refuses a batch that would leave a gap or overlap; DeleteRange
// refuses to punch a hole in the middle.
func TestRefusesGaps(t *testing.T) {
	s := open(t, t.TempDir(), 0)
	defer s.Close()
	mustStore(t, s, batch(5, 10, 1)) // an empty log starts anywhere (after a snapshot)
	if err := s.StoreLogs(batch(16, 1, 1)); err == nil {
		t.Fatal("appending 16 after 14 succeeded")
	}
	if err := s.StoreLogs(batch(10, 1, 1)); err == nil {
		t.Fatal("appending 10 after 14 succeeded")
	}
	if err := s.StoreLogs([]*raft.Log{{Index: 15}, {Index: 17}}); err == nil {
		t.Fatal("a batch 15, 17 succeeded")
	}
	if err := s.DeleteRange(8, 10); err == nil {
		t.Fatal("deleting 8..10 of 5..14 succeeded")
	}
	expect(t, s, 5, 14, term(1))
}

// The scenario that broke raft-wal: a follower truncates an uncommitted
// suffix after a leader change, appends the new leader's entries, and
// crashes; it must reopen with exactly the new log. Also across a segment
// boundary, and with the truncation reaching back to a segment's first entry.
func TestTailTruncationThenReopen(t *testing.T) {
	for _, tc := range []struct {
		name string
		from uint64 // first entry deleted
	}{
		{"inside the last segment", 95},
		{"across segment boundaries", 40},
		{"at a segment's first entry", 0}, // filled in below
		{"all but the first entry", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 64<<10)
			for i := uint64(1); i <= 100; i += 5 {
				mustStore(t, s, batch(i, 5, 1))
			}
			segs := segFiles(t, dir)
			if len(segs) < 3 {
				t.Fatalf("%d segments, want several", len(segs))
			}
			from := tc.from
			if from == 0 {
				from, _ = parseSegName(filepath.Base(segs[1]))
			}
			mustDelete(t, s, from, 100)
			mustStore(t, s, batch(from, 30, 2))
			terms := func(i uint64) uint64 {
				if i >= from {
					return 2
				}
				return 1
			}
			expect(t, s, 1, from+29, terms)
			s.Close()

			s = open(t, dir, 64<<10)
			expect(t, s, 1, from+29, terms)
			// And again: truncate part of the new entries, append, reopen.
			mustDelete(t, s, from+10, from+29)
			mustStore(t, s, batch(from+10, 3, 3))
			s.Close()
			s = open(t, dir, 64<<10)
			defer s.Close()
			expect(t, s, 1, from+12, func(i uint64) uint64 {
				switch {
				case i >= from+10:
					return 3
				case i >= from:
					return 2
				}
				return 1
			})
		})
	}
}

// Compaction drops whole segments below the new first index and records
// it, so a reopened log starts there, though entries below it are still in
// the first remaining file.
func TestHeadCompactionThenReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 64<<10)
	for i := uint64(1); i <= 200; i += 10 {
		mustStore(t, s, batch(i, 10, 1))
	}
	before := len(segFiles(t, dir))
	mustDelete(t, s, 1, 125)
	expect(t, s, 126, 200, term(1))
	after := segFiles(t, dir)
	if len(after) >= before {
		t.Fatalf("%d segment files before compaction and %d after", before, len(after))
	}
	if base, _ := parseSegName(filepath.Base(after[0])); base == 126 {
		t.Fatal("want a test where the first kept segment starts below the new first index")
	}
	s.Close()
	s = open(t, dir, 64<<10)
	expect(t, s, 126, 200, term(1))
	mustStore(t, s, batch(201, 5, 2))
	mustDelete(t, s, 126, 150)
	s.Close()
	s = open(t, dir, 64<<10)
	defer s.Close()
	expect(t, s, 151, 205, func(i uint64) uint64 { return 1 + i/201 })
}

// After a snapshot install Raft empties the log and continues after the
// snapshot's index; a reopened log holds only the new entries.
func TestDeleteAllThenAppendElsewhere(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 64<<10)
	mustStore(t, s, batch(1, 50, 1))
	mustDelete(t, s, 1, 50)
	expect(t, s, 0, 0, nil)
	if n := len(segFiles(t, dir)); n != 0 {
		t.Fatalf("%d segment files in an empty log", n)
	}
	s.Close()
	s = open(t, dir, 64<<10)
	expect(t, s, 0, 0, nil)
	mustStore(t, s, batch(500, 10, 4))
	s.Close()
	// A crash between creating a segment for a batch and writing it:
	// the empty file does not decide where the next batch goes.
	s = open(t, dir, 64<<10)
	expect(t, s, 500, 509, term(4))
	mustDelete(t, s, 500, 509)
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, segName(700)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, 64<<10)
	expect(t, s, 0, 0, nil)
	mustStore(t, s, batch(500, 10, 4))
	s.Close()
	s = open(t, dir, 64<<10)
	expect(t, s, 500, 509, term(4))
	// Back below the recorded first index (an older snapshot installed):
	// the new entries must not be hidden on reopen.
	mustDelete(t, s, 500, 509)
	mustStore(t, s, batch(300, 3, 5))
	s.Close()
	s = open(t, dir, 64<<10)
	defer s.Close()
	expect(t, s, 300, 302, term(5))
}

// writeTwoBatches leaves a closed log of entries 1..10 and 11..20 in one
// segment and returns the segment file's bytes and the offset of each entry.
func writeTwoBatches(t *testing.T, dir string) ([]byte, []int64) {
	s := open(t, dir, 0)
	mustStore(t, s, batch(1, 10, 1))
	mustStore(t, s, batch(11, 10, 1))
	offs := append([]int64{0}, s.segs[0].offs...)
	s.Close()
	b, err := os.ReadFile(segFiles(t, dir)[0])
	if err != nil {
		t.Fatal(err)
	}
	return b, offs
}

// A crash while the last batch was being written leaves any part of it on
// disk, its pages in any order: open cuts the whole batch, and appends
// continue after the one before.
func TestCutsTornTail(t *testing.T) {
	dir := t.TempDir()
	orig, offs := writeTwoBatches(t, dir)
	seg := segFiles(t, dir)[0]
	damage := map[string]func([]byte) []byte{
		"a byte of entry 15 flipped": func(b []byte) []byte { b[offs[15]+headerSize+3] ^= 1; return b },
		"entry 11's header zeroed":   func(b []byte) []byte { clear(b[offs[11] : offs[11]+headerSize]); return b },
		"entry 20 cut short":         func(b []byte) []byte { return b[:len(b)-5] },
		"cut inside a header":        func(b []byte) []byte { return b[:offs[17]+10] },
		"cut after entry 18":         func(b []byte) []byte { return b[:offs[19]] },
		"zeroes appended":            func(b []byte) []byte { return append(b[:offs[12]], make([]byte, 9000)...) },
	}
	for name, f := range damage {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(seg, f(bytes.Clone(orig)), 0o644); err != nil {
				t.Fatal(err)
			}
			s := open(t, dir, 0)
			defer s.Close()
			expect(t, s, 1, 10, term(1))
			mustStore(t, s, batch(11, 5, 2))
			expect(t, s, 1, 15, func(i uint64) uint64 { return 1 + i/11 })
		})
	}
	t.Run("zeroes after the last batch", func(t *testing.T) {
		if err := os.WriteFile(seg, append(bytes.Clone(orig), make([]byte, 4096)...), 0o644); err != nil {
			t.Fatal(err)
		}
		s := open(t, dir, 0)
		defer s.Close()
		expect(t, s, 1, 20, term(1))
	})
}

// Damage to an entry that a later batch was written after was acknowledged:
// open reports it instead of cutting the log back.
func TestReportsCorruptionInTheMiddle(t *testing.T) {
	t.Run("last segment", func(t *testing.T) {
		dir := t.TempDir()
		b, offs := writeTwoBatches(t, dir)
		b[offs[5]+headerSize+100] ^= 0x40
		if err := os.WriteFile(segFiles(t, dir)[0], b, 0o644); err != nil {
			t.Fatal(err)
		}
		if s, err := Open(dir, Options{Fsync: true, Logger: quiet}); err == nil || !strings.Contains(err.Error(), "not a torn write") {
			if s != nil {
				s.Close()
			}
			t.Fatalf("open of a log damaged in entry 5 of 20: %v", err)
		}
	})
	t.Run("earlier segment", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir, 64<<10)
		for i := uint64(1); i <= 100; i += 5 {
			mustStore(t, s, batch(i, 5, 1))
		}
		s.Close()
		segs := segFiles(t, dir)
		// A damaged header is found on open; a damaged body when read.
		b, err := os.ReadFile(segs[0])
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x10
		if err := os.WriteFile(segs[0], b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err = Open(dir, Options{Fsync: true, SegmentSize: 64 << 10, Logger: quiet})
		if err == nil {
			defer s.Close()
			var e raft.Log
			var bad bool
			for i := uint64(1); i <= 100; i++ {
				if err := s.GetLog(i, &e); err != nil {
					bad = true
					if !strings.Contains(err.Error(), "damaged") {
						t.Fatalf("entry %d: %v", i, err)
					}
				}
			}
			if !bad {
				t.Fatal("a damaged byte in the first segment went unnoticed")
			}
		} else if !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("open: %v", err)
		}
	})
	t.Run("missing segment", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir, 64<<10)
		for i := uint64(1); i <= 100; i += 5 {
			mustStore(t, s, batch(i, 5, 1))
		}
		s.Close()
		if err := os.Remove(segFiles(t, dir)[1]); err != nil {
			t.Fatal(err)
		}
		if s, err := Open(dir, Options{Fsync: true, Logger: quiet}); err == nil {
			s.Close()
			t.Fatal("a log with a segment missing opened")
		}
	})
}

func TestStableStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v, want \"not found\" (which raft recognises)", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 10); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, 0)
	defer s.Close()
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 10 {
		t.Fatalf("CurrentTerm %d (%v)", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
		t.Fatalf("LastVoteCand %q (%v)", v, err)
	}
}

// Raft reads entries (replication, applying) while the leader appends and a
// follower truncates; run under -race.
func TestConcurrentReads(t *testing.T) {
	s := open(t, t.TempDir(), 32<<10)
	defer s.Close()
	mustStore(t, s, batch(1, 10, 1))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			var e raft.Log
			for {
				select {
				case <-stop:
					return
				default:
				}
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if last == 0 {
					continue
				}
				i := first + rng.Uint64N(last-first+1)
				err := s.GetLog(i, &e)
				if errors.Is(err, raft.ErrLogNotFound) {
					continue // deleted meanwhile
				}
				if err != nil {
					errs <- err
					return
				}
				if e.Index != i || !bytes.Equal(e.Data, data(i, e.Term)) {
					errs <- fmt.Errorf("entry %d: read index %d term %d", i, e.Index, e.Term)
					return
				}
			}
		})
	}
	next, tm := uint64(11), uint64(1)
	for n := range 400 {
		switch {
		case n%50 == 49:
			first, _ := s.FirstIndex()
			mustDelete(t, s, first, first+20)
		case n%20 == 19:
			tm++
			next -= 5
			mustDelete(t, s, next, next+4)
		}
		mustStore(t, s, batch(next, 3, tm))
		next += 3
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// Random sequences of appends, compactions, truncations and reopens,
// against raft.InmemStore as the reference. With References, compacted
// entries stay readable through ReadData as long as the pin (set now and
// then) says a reference may name them.
func TestRandomAgainstInmem(t *testing.T) {
	for _, refs := range []bool{false, true} {
		t.Run(fmt.Sprintf("references=%v", refs), func(t *testing.T) { randomAgainstInmem(t, refs) })
	}
}

func randomAgainstInmem(t *testing.T, refs bool) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RAFTLOG_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (RAFTLOG_SEED=%d to repeat)", seed, seed)
	defer func() {
		if t.Failed() {
			t.Logf("failed with seed %d (RAFTLOG_SEED=%d to repeat)", seed, seed)
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	segSize := int64(16<<10) + rng.Int64N(64<<10)
	openLog := func() *Store {
		s, err := Open(dir, Options{Fsync: true, SegmentSize: segSize, Logger: quiet, References: refs})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := openLog()
	defer func() { s.Close() }()
	ref := raft.NewInmemStore()
	var tm uint64 = 1
	// compacted: entries Raft compacted that a reference may still name
	// (those at or above the pin), by index.
	compacted := map[uint64][]byte{}
	var pin uint64
	pinKnown := !refs
	mayName := func(i uint64) bool { return refs && (!pinKnown || pin != 0 && i >= pin) }
	compare := func(step int, what string) {
		t.Helper()
		rf, _ := ref.FirstIndex()
		rl, _ := ref.LastIndex()
		f, _ := s.FirstIndex()
		l, _ := s.LastIndex()
		if f != rf || l != rl {
			t.Fatalf("step %d (%s): log %d..%d, reference %d..%d", step, what, f, l, rf, rl)
		}
		for i, want := range compacted {
			if !mayName(i) {
				continue
			}
			if rl != 0 && i >= rf {
				t.Fatalf("step %d (%s): entry %d counted compacted in the log %d..%d", step, what, i, rf, rl)
			}
			got := make([]byte, len(want))
			if err := s.ReadData(i, 0, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("step %d (%s): compacted entry %d, pinned from %d: %v, %.20q..., want %.20q...", step, what, i, pin, err, got, want)
			}
		}
		if rl == 0 {
			return
		}
		for _, i := range []uint64{rf, rl, rf + rng.Uint64N(rl-rf+1), rf + rng.Uint64N(rl-rf+1)} {
			var a, b raft.Log
			if err := ref.GetLog(i, &a); err != nil {
				t.Fatalf("step %d: reference entry %d: %v", step, i, err)
			}
			if err := s.GetLog(i, &b); err != nil {
				t.Fatalf("step %d (%s): entry %d: %v", step, what, i, err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("step %d (%s): entry %d: %+v, reference %+v", step, what, i, b, a)
			}
		}
		for _, i := range []uint64{rf - 1, rl + 1} {
			var b raft.Log
			if err := s.GetLog(i, &b); !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("step %d (%s): entry %d outside %d..%d: %v", step, what, i, rf, rl, err)
			}
		}
		if err := s.ReadData(rl+1, 0, nil); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("step %d (%s): ReadData(%d) past the last: %v", step, what, rl+1, err)
		}
		if err := s.ReadData(rf-1, 0, nil); !refs && !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("step %d (%s): ReadData(%d) below the first: %v", step, what, rf-1, err)
		}
		// Every entry's data reads back whole and in any part.
		for _, i := range []uint64{rf, rl, rf + rng.Uint64N(rl-rf+1), rf + rng.Uint64N(rl-rf+1), rf + rng.Uint64N(rl-rf+1)} {
			var a raft.Log
			if err := ref.GetLog(i, &a); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(a.Data))
			if err := s.ReadData(i, 0, got); err != nil || !bytes.Equal(got, a.Data) {
				t.Fatalf("step %d (%s): entry %d reads %.20q... (%v), want %.20q...", step, what, i, got, err, a.Data)
			}
			// ReadData reads any part of it.
			from := rng.Int64N(int64(len(a.Data)))
			part := make([]byte, rng.Int64N(int64(len(a.Data))-from+1))
			if err := s.ReadData(i, from, part); err != nil || !bytes.Equal(part, a.Data[from:from+int64(len(part))]) {
				t.Fatalf("step %d (%s): ReadData(%d, %d, %d bytes): %v", step, what, i, from, len(part), err)
			}
			if err := s.ReadData(i, from, make([]byte, int64(len(a.Data))-from+1)); err == nil {
				t.Fatalf("step %d (%s): ReadData(%d) read past the entry's data", step, what, i)
			}
		}
	}
	for step := range 1500 {
		f, _ := ref.FirstIndex()
		l, _ := ref.LastIndex()
		var what string
		switch p := rng.IntN(100); {
		case p < 60 || l == 0:
			next := l + 1
			if l == 0 && rng.IntN(3) == 0 {
				next = 1 + rng.Uint64N(1000) // an empty log continues after a snapshot
			}
			if n := len(s.retained); l == 0 && n > 0 && next <= s.retained[n-1].end() {
				// A snapshot is past every entry applied, and so
				// past every one kept.
				if rng.IntN(20) == 0 {
					if err := s.StoreLogs(batch(next, 1, tm)); err == nil {
						t.Fatalf("step %d: stored entry %d where a kept one is", step, next)
					}
				}
				next = s.retained[n-1].end() + 1
			}
			logs := batch(next, 1+rng.Uint64N(12), tm)
			what = fmt.Sprintf("store %d..%d", next, next+uint64(len(logs))-1)
			mustStore(t, s, logs)
			if err := ref.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
		case p < 72:
			max := f + rng.Uint64N(l-f+1)
			if rng.IntN(10) == 0 {
				max = l // everything (after installing a snapshot)
			}
			what = fmt.Sprintf("delete head %d..%d", f, max)
			mustDelete(t, s, f, max)
			if max < l {
				for i := f; i <= max && refs; i++ {
					if !mayName(i) {
						continue // gone: nothing may name it
					}
					var e raft.Log
					if err := ref.GetLog(i, &e); err != nil {
						t.Fatal(err)
					}
					compacted[i] = e.Data
				}
			}
			ref.DeleteRange(f, max)
		case p < 80:
			lo := l - rng.Uint64N(min(l-f+1, 40))
			if lo == f {
				lo++ // a whole-log deletion is the head case
			}
			if lo > l {
				continue
			}
			what = fmt.Sprintf("delete tail %d..%d", lo, l)
			tm++
			mustDelete(t, s, lo, l)
			ref.DeleteRange(lo, l)
		case p < 88:
			// References move on: the pin rises, or none is left. A new
			// reference names an entry in the log (one just applied), so
			// the pin never goes below what it released.
			lowest := f
			switch {
			case !pinKnown && len(compacted) > 0:
				lowest = minKey(compacted)
			case pinKnown && pin != 0:
				lowest = pin
			}
			pin = 0
			if rng.IntN(5) > 0 && l >= lowest {
				pin = lowest + rng.Uint64N(l-lowest+1)
			}
			pinKnown = true
			what = fmt.Sprintf("pin %d", pin)
			if err := s.SetPin(pin); err != nil {
				t.Fatal(err)
			}
			for i := range compacted {
				if !mayName(i) {
					delete(compacted, i)
				}
			}
		default:
			what = "reopen"
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openLog()
			if len(compacted) > 0 {
				pinKnown = false // every retained file is kept until the next pin
			}
		}
		if os.Getenv("RAFTLOG_TRACE") != "" {
			t.Logf("step %d: %s; log %d..%d retained %d", step, what, s.first, s.last, len(s.retained))
		}
		compare(step, what)
	}
}

func maxKey(m map[uint64][]byte) uint64 {
	var k uint64
	for i := range m {
		k = max(k, i)
	}
	return k
}

func minKey(m map[uint64][]byte) uint64 {
	var k uint64
	for i := range m {
		if k == 0 || i < k {
			k = i
		}
	}
	return k
}

// With References, entries compacted in the middle of a file survive the
// deletion of the whole log that follows a snapshot install (the file is
// cut after them and kept) and a reopen, until SetPin releases them; the
// log itself starts again wherever Raft says.
func TestCompactedEntriesKeptForReferences(t *testing.T) {
	dir := t.TempDir()
	o := Options{Fsync: true, SegmentSize: 1 << 20, Logger: quiet, References: true}
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	mustStore(t, s, batch(1, 10, 1))
	mustStore(t, s, batch(11, 10, 1))
	mustDelete(t, s, 1, 15)  // compaction in the middle of the only file
	mustDelete(t, s, 16, 20) // the whole log, after an install
	readAll := func(s *Store, from, to uint64) error {
		for i := from; i <= to; i++ {
			want := data(i, 1)
			got := make([]byte, len(want))
			if err := s.ReadData(i, 0, got); err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("entry %d reads other bytes", i)
			}
		}
		return nil
	}
	if err := readAll(s, 1, 15); err != nil {
		t.Fatalf("compacted entries after the whole log went: %v", err)
	}
	if err := s.ReadData(16, 0, make([]byte, 1)); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry 16, deleted with the log and never compacted: %v", err)
	}
	mustStore(t, s, batch(100, 5, 2))
	expect(t, s, 100, 104, term(2))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	expect(t, s, 100, 104, term(2))
	if err := readAll(s, 1, 15); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
	if err := s.SetPin(16); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadData(3, 0, make([]byte, 1)); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry 3 below the pin: %v", err)
	}
	if names, _ := os.ReadDir(filepath.Join(dir, retainedDir)); len(names) != 0 {
		t.Fatalf("retained files left after the pin passed them: %v", names)
	}
	expect(t, s, 100, 104, term(2))
}

// Without References, nothing is kept: compaction removes files as Raft
// asks, and nothing below the first index is readable.
func TestNothingKeptWithoutReferences(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 32<<10)
	defer s.Close()
	for first := uint64(1); first <= 60; first += 6 {
		mustStore(t, s, batch(first, 6, 1))
	}
	mustDelete(t, s, 1, 40)
	if err := s.ReadData(30, 0, make([]byte, 1)); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("ReadData(30) after compacting through 40: %v, want ErrLogNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(dir, retainedDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a retained directory without References: %v", err)
	}
}

// A crash after the first file was cut after its compacted entries (inside
// a batch) and before it was moved aside leaves it in the log's directory:
// the next open keeps every compacted entry in it.
func TestCompactedEntriesSurviveACrashBeforeTheMove(t *testing.T) {
	dir := t.TempDir()
	o := Options{Fsync: true, SegmentSize: 1 << 20, Logger: quiet, References: true}
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	mustStore(t, s, batch(1, 20, 1)) // one batch
	mustDelete(t, s, 1, 15)
	seg := s.segFor(16)
	cutAt, _ := seg.span(16)
	path := s.segPath(seg)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What deleteAll(16, 20) leaves when it stops right after cutting.
	if err := writePair(dir, metaFile, 21, 15, true); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, cutAt); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := uint64(1); i <= 15; i++ {
		want := data(i, 1)
		got := make([]byte, len(want))
		if err := s.ReadData(i, 0, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("compacted entry %d after the crash: %v", i, err)
		}
	}
	if f, _ := s.FirstIndex(); f != 0 {
		t.Fatalf("first index %d of a log Raft emptied", f)
	}
	mustStore(t, s, batch(30, 3, 2))
	expect(t, s, 30, 32, term(2))
}
