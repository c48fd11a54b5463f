package raftlog

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// TestMain runs the child TestKill9 kills when the test binary is started
// as one (RAFTLOG_CHILD_DIR set), the tests otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv("RAFTLOG_CHILD_DIR"); dir != "" {
		seed, _ := strconv.ParseUint(os.Getenv("RAFTLOG_CHILD_SEED"), 10, 64)
		pin, refs := os.LookupEnv("RAFTLOG_CHILD_PIN")
		p, _ := strconv.ParseUint(pin, 10, 64)
		if err := runChild(dir, seed, refs, p); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

const killSegSize = 128 << 10

// runChild changes the log of dir the way Raft does, until it is killed: it
// appends batches, truncates a suffix and appends in a new term (a leader
// change), and compacts the head. With refs it keeps compacted entries
// for references, from pin on, and moves the pin up now and then as a node
// does (SetPin). It prints each change before making it and "ok" once it
// returned.
func runChild(dir string, seed uint64, refs bool, pin uint64) error {
	s, err := Open(dir, Options{Fsync: true, SegmentSize: killSegSize, Logger: quiet, References: refs})
	if err != nil {
		return err
	}
	if refs {
		if err := s.SetPin(pin); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	tm := uint64(1)
	if last > 0 {
		var e raft.Log
		if err := s.GetLog(last, &e); err != nil {
			return err
		}
		tm = e.Term
	}
	do := func(what string, f func() error) error {
		fmt.Println(what)
		if err := f(); err != nil {
			return err
		}
		fmt.Println("ok")
		return nil
	}
	for {
		switch p := rng.IntN(100); {
		case p < 15 && last > first:
			lo := last - rng.Uint64N(min(last-first, 40))
			tm++
			if err := do(fmt.Sprintf("T %d", lo), func() error { return s.DeleteRange(lo, last) }); err != nil {
				return err
			}
			last = lo - 1
		case p < 22 && last > first+100:
			hi := first + rng.Uint64N(50)
			if err := do(fmt.Sprintf("H %d", hi), func() error { return s.DeleteRange(first, hi) }); err != nil {
				return err
			}
			first = hi + 1
		case p < 27 && refs && first > pin+1:
			to := pin + 1 + rng.Uint64N(first-pin-1)
			if err := do(fmt.Sprintf("P %d", to), func() error { return s.SetPin(to) }); err != nil {
				return err
			}
			pin = to
		default:
			next, n := last+1, 1+rng.Uint64N(16)
			if err := do(fmt.Sprintf("A %d %d %d", next, n, tm), func() error { return s.StoreLogs(batch(next, n, tm)) }); err != nil {
				return err
			}
			if first == 0 {
				first = next
			}
			last = next + n - 1
		}
	}
}

// model is the log a sequence of changes leaves: terms[i] is the term of
// entry first+i. With references, kept holds the terms of the compacted
// entries from pin on, which must stay readable (ReadData).
type model struct {
	first uint64
	terms []uint64
	refs  bool
	pin   uint64
	kept  map[uint64]uint64
}

func (m model) last() uint64 {
	if len(m.terms) == 0 {
		return 0
	}
	return m.first + uint64(len(m.terms)) - 1
}

// apply returns m after the change line ("A first n term", "T from",
// "H upto").
func (m model) apply(t *testing.T, line string) model {
	f := strings.Fields(line)
	num := func(i int) uint64 {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatalf("child said %q", line)
		}
		return v
	}
	m.terms = slices.Clone(m.terms)
	m.kept = maps.Clone(m.kept)
	switch f[0] {
	case "A":
		if len(m.terms) == 0 {
			m.first = num(1)
		}
		for range num(2) {
			m.terms = append(m.terms, num(3))
		}
	case "T":
		m.terms = m.terms[:num(1)-m.first]
	case "H":
		if m.refs {
			if m.kept == nil {
				m.kept = map[uint64]uint64{}
			}
			for i := m.first; i <= num(1); i++ {
				if i >= m.pin {
					m.kept[i] = m.terms[i-m.first]
				}
			}
		}
		m.terms = m.terms[num(1)+1-m.first:]
		m.first = num(1) + 1
	case "P":
		m.pin = num(1)
		maps.DeleteFunc(m.kept, func(i, _ uint64) bool { return i < m.pin })
	default:
		t.Fatalf("child said %q", line)
	}
	return m
}

// read returns the log of s as a model, checking every entry's data.
func read(t *testing.T, s *Store) model {
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	m := model{first: first}
	for i := first; i <= last && last > 0; i++ {
		var e raft.Log
		if err := s.GetLog(i, &e); err != nil {
			t.Fatalf("entry %d of %d..%d: %v", i, first, last, err)
		}
		if e.Index != i || !bytes.Equal(e.Data, data(i, e.Term)) {
			t.Fatalf("entry %d: index %d term %d, data not its own", i, e.Index, e.Term)
		}
		m.terms = append(m.terms, e.Term)
	}
	return m
}

func (m model) String() string {
	if len(m.terms) == 0 {
		return "empty"
	}
	return fmt.Sprintf("%d..%d (last term %d)", m.first, m.last(), m.terms[len(m.terms)-1])
}

// checkKept fails unless every entry m keeps for references reads back
// from s as it was written.
func (m model) checkKept(t *testing.T, s *Store) {
	t.Helper()
	for i, term := range m.kept {
		want := data(i, term)
		got := make([]byte, len(want))
		if err := s.ReadData(i, 0, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("entry %d, compacted and kept for references (pin %d): %v", i, m.pin, err)
		}
	}
}

func (m model) equal(o model) bool {
	return slices.Equal(m.terms, o.terms) && (len(m.terms) == 0 || m.first == o.first)
}

// TestKill9 kills a child changing the log with SIGKILL, in the middle of
// whatever it does, many times over: after reopening, the log is exactly
// what the changes the child saw return made, plus at most the one it was
// making (which may be complete, or for a truncation, partly done: a prefix
// of the log before it).
func TestKill9(t *testing.T) { kill9(t, false) }

// TestKill9WithReferences is TestKill9 with compacted entries kept for
// references: every entry compacted from the pin on still reads back after
// each kill (in the middle of a compaction that moves files aside, or of a
// pin removing them), and the pin only releases entries below it.
func TestKill9WithReferences(t *testing.T) { kill9(t, true) }

func kill9(t *testing.T, refs bool) {
	dir := t.TempDir()
	want := model{refs: refs}
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RAFTLOG_CHILD_DIR="+dir, fmt.Sprintf("RAFTLOG_CHILD_SEED=%d", round))
		if refs {
			cmd.Env = append(cmd.Env, fmt.Sprintf("RAFTLOG_CHILD_PIN=%d", want.pin))
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		var pending string
		oks := 0
		target := 150 + round*37
		handle := func(line string) {
			switch {
			case line == "ok":
				want = want.apply(t, pending)
				pending = ""
				oks++
			case strings.HasPrefix(line, "error:"):
				t.Fatalf("round %d: child: %s", round, line)
			default:
				pending = line
			}
		}
		// Kill once the child has begun a change (an append, a
		// truncation, a compaction or a pin by turns): it is writing.
		kinds := "ATH"
		if refs {
			kinds = "ATHP"
		}
		kind := kinds[round%len(kinds)]
		for (oks < target || pending == "" || pending[0] != kind) && lines.Scan() {
			handle(lines.Text())
		}
		if oks < target {
			t.Fatalf("round %d: child stopped after %d changes", round, oks)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// Lines already written reached the pipe before the kill.
		for lines.Scan() {
			handle(lines.Text())
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()

		s, err := Open(dir, Options{Fsync: true, SegmentSize: killSegSize, Logger: quiet, References: refs})
		if err != nil {
			t.Fatalf("round %d: reopen after kill -9 (during %q): %v", round, pending, err)
		}
		got := read(t, s)
		ok := got.equal(want)
		next := want // what the log now is: want, or done when the pending change happened
		if pending != "" && pending[0] == 'P' {
			// Files below the new pin may be gone, or not yet.
			next = want.apply(t, pending)
		}
		if !ok && pending != "" {
			done := want.apply(t, pending)
			ok = got.equal(done)
			next = done
			if !ok && pending[0] == 'T' {
				// A truncation that stopped after removing later
				// segments: a prefix of the log before it, no shorter
				// than the one it was making.
				ok = got.first == want.first && len(got.terms) >= len(done.terms) &&
					len(got.terms) <= len(want.terms) && slices.Equal(got.terms, want.terms[:len(got.terms)])
			}
		}
		if !ok {
			t.Fatalf("round %d: after kill -9 during %q the log is %v, want %v", round, pending, got, want)
		}
		next.checkKept(t, s)
		t.Logf("round %d: killed during %q after %d changes; log %v, %d compacted entries kept", round, pending, oks, got, len(next.kept))
		got.refs, got.pin, got.kept = refs, next.pin, next.kept
		want = got
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
