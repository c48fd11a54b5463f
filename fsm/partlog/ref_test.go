package partlog_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/fsm/partlog"
)

// entries stands in for the Raft log: entry data by index.
type entries map[uint64][]byte

func (e entries) ReadRef(r partlog.Ref, b []byte) error {
	d, ok := e[r.Index]
	if !ok {
		return fmt.Errorf("no entry %d", r.Index)
	}
	if uint64(r.Pos)+uint64(r.Len) > uint64(len(d)) {
		return fmt.Errorf("entry %d has %d bytes, not %d from %d", r.Index, len(d), r.Len, r.Pos)
	}
	copy(b, d[r.Pos:r.Pos+r.Len])
	return nil
}

// header facts of a test batch, as Apply takes them from the command.
func facts(b []byte) (int32, int64) {
	return int32(binary.BigEndian.Uint32(b[23:])), int64(binary.BigEndian.Uint64(b[35:]))
}

// A log holding references to batches in Raft entries reads, in every way
// a log can be read (fetches of any size from any offset, FindTimestamp,
// snapshot ranges, sizes and segments), exactly as a log that was given
// the same batches, after trims and reopens; stamped references serve the
// batch stamped with its append time. The first referenced index it
// reports is never above a reference it still serves.
func TestReferencesReadAsTheBatchesTheyName(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PARTLOG_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (PARTLOG_SEED=%d to repeat)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	segBytes := int64(2000 + rng.IntN(60000))
	plainDir, refDir := t.TempDir(), t.TempDir()
	plain := open(t, plainDir, 0, 0, segBytes)
	refs := open(t, refDir, 0, 0, segBytes)
	raft := entries{}
	refs.SetResolver(raft)

	type written struct {
		first, last int64
		index       uint64 // 0: a batch, not a reference
	}
	var log []written
	var index uint64
	var rewritten uint64 // entries below it are gone: Rewrite copied their batches
	for step := range 600 {
		switch p := rng.IntN(100); {
		case p < 82:
			b := batch(int32(1+rng.IntN(5)), int64(1000+step), rng.IntN(3000), byte(step))
			binary.BigEndian.PutUint64(b, rng.Uint64()) // the client's base offset field: never served
			delta, maxTs := facts(b)
			appendTime := int64(-1)
			if rng.IntN(4) == 0 {
				appendTime = int64(5000 + step)
			}
			served := b
			if appendTime != -1 {
				served = partlog.StampAppendTime(b, appendTime)
			}
			pb, err := plain.Append(served, delta, max(maxTs, appendTime))
			if err != nil {
				t.Fatal(err)
			}
			var rb int64
			w := written{first: pb, last: pb + int64(delta)}
			if rng.IntN(3) > 0 {
				index += 1 + rng.Uint64N(3)
				pre := make([]byte, rng.IntN(100))
				entry := append(append(pre, b...), make([]byte, rng.IntN(50))...)
				raft[index] = entry
				rb, err = refs.AppendRef(partlog.Ref{Index: index, Pos: uint32(len(pre)), Len: uint32(len(b))}, delta, maxTs, appendTime)
				w.index = index
			} else {
				rb, err = refs.Append(served, delta, max(maxTs, appendTime))
			}
			if err != nil {
				t.Fatal(err)
			}
			if rb != pb {
				t.Fatalf("step %d: appended at %d, the plain log at %d", step, rb, pb)
			}
			log = append(log, w)
		case p < 85:
			below := rewritten + rng.Uint64N(index-rewritten+2)
			if _, err := refs.Rewrite(context.Background(), below); err != nil {
				t.Fatalf("step %d: rewrite below %d: %v", step, below, err)
			}
			if f := refs.FirstRef(); f != 0 && f < below {
				t.Fatalf("step %d: rewritten below %d, and a reference still names %d", step, below, f)
			}
			if n := refs.ReferencedBelow(below); n != 0 {
				t.Fatalf("step %d: rewritten below %d, and %d bytes are still referenced below it", step, below, n)
			}
			for i := range raft {
				if i < below {
					delete(raft, i)
				}
			}
			rewritten = max(rewritten, below)
		case p < 92:
			start, next := plain.Bounds()
			to := start + rng.Int64N(next-start+1)
			if err := plain.TrimTo(to); err != nil {
				t.Fatal(err)
			}
			if err := refs.TrimTo(to); err != nil {
				t.Fatal(err)
			}
		default:
			start, next := plain.Bounds()
			plain.Close()
			refs.Close()
			plain = open(t, plainDir, start, next, segBytes)
			refs = open(t, refDir, start, next, segBytes)
			refs.SetResolver(raft)
		}

		start, next := plain.Bounds()
		if s, n := refs.Bounds(); s != start || n != next {
			t.Fatalf("step %d: bounds %d..%d, the plain log's %d..%d", step, s, n, start, next)
		}
		if a, b := refs.Size(), plain.Size(); a != b {
			t.Fatalf("step %d: size %d, the plain log's %d", step, a, b)
		}
		if a, b := refs.Segments(), plain.Segments(); !reflect.DeepEqual(a, b) {
			t.Fatalf("step %d: segments %+v, the plain log's %+v", step, a, b)
		}
		for range 4 {
			off := start + rng.Int64N(next-start+1)
			maxBytes := 1 + rng.IntN(12000)
			a, err := refs.Read(off, maxBytes)
			if err != nil {
				t.Fatalf("step %d: read %d (%d bytes): %v", step, off, maxBytes, err)
			}
			b, err := plain.Read(off, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Fatalf("step %d: read %d (%d bytes): %d bytes differ from the plain log's %d", step, off, maxBytes, len(a), len(b))
			}
		}
		ts := int64(rng.IntN(6000 + step))
		a, err := refs.FindTimestamp(ts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := plain.FindTimestamp(ts)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("step %d: FindTimestamp(%d) differs from the plain log's", step, ts)
		}
		if step%25 == 0 {
			ra, rb := rangeBytes(t, refs, raft), rangeBytes(t, plain, nil)
			if r, err := plain.Range(); err != nil || r.FirstRef() != 0 {
				t.Fatalf("step %d: a log of batches only has a range with references (%v)", step, err)
			} else {
				r.Close()
			}
			if !bytes.Equal(ra, rb) {
				t.Fatalf("step %d: the range holds %d bytes, the plain log's %d", step, len(ra), len(rb))
			}
		}
		first, lowest := refs.FirstRef(), uint64(0)
		for _, w := range log {
			if w.index >= rewritten && w.index != 0 && w.last >= start && (lowest == 0 || w.index < lowest) {
				lowest = w.index
			}
		}
		if lowest != 0 && (first == 0 || first > lowest) {
			t.Fatalf("step %d: FirstRef %d, but entry %d is still served", step, first, lowest)
		}
	}
}

// rangeBytes is what a snapshot streams of l, checked against its Len and
// against what its files give read as a snapshot kept by links reads them
// (the file's bytes, or its records' batches where it has references).
func rangeBytes(t *testing.T, l *partlog.Log, res partlog.Resolver) []byte {
	t.Helper()
	r, err := l.Range()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var buf bytes.Buffer
	n, err := r.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != r.Len() || int64(buf.Len()) != n {
		t.Fatalf("the range wrote %d bytes (%d in the buffer), its Len is %d", n, buf.Len(), r.Len())
	}
	var linked bytes.Buffer
	for _, rf := range r.Files() {
		f, err := os.Open(rf.Path)
		if err != nil {
			t.Fatal(err)
		}
		var m int64
		if rf.Refs {
			m, err = io.Copy(&linked, partlog.NewRecordReader(f, rf.Pos, rf.End, res))
		} else {
			m, err = io.Copy(&linked, io.NewSectionReader(f, rf.Pos, rf.End-rf.Pos))
		}
		f.Close()
		if err != nil || m != rf.Served {
			t.Fatalf("%s [%d, %d): %d bytes of %d, %v", rf.Path, rf.Pos, rf.End, m, rf.Served, err)
		}
	}
	if !bytes.Equal(linked.Bytes(), buf.Bytes()) {
		t.Fatal("the range's files read as a snapshot's links do not give its batches")
	}
	return buf.Bytes()
}

// A reference that does not lead to its batch (the entry holds other
// bytes, or there is nowhere to read it from) fails the read: never other
// bytes served as the batch.
func TestReferenceToTheWrongBytesFailsTheRead(t *testing.T) {
	l := open(t, t.TempDir(), 0, 0, 1<<20)
	b := batch(3, 100, 500, 7)
	delta, maxTs := facts(b)
	raft := entries{9: append([]byte("xx"), b...)}
	if _, err := l.AppendRef(partlog.Ref{Index: 9, Pos: 2, Len: uint32(len(b))}, delta, maxTs, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(0, 1<<20); err == nil {
		t.Fatal("read a reference with no resolver set")
	}
	l.SetResolver(raft)
	got, err := l.Read(0, 1<<20)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("read %d bytes, %v; want the batch", len(got), err)
	}
	for name, entry := range map[string][]byte{
		"shifted":  append([]byte("x"), b...),
		"too long": append([]byte("xx"), batch(4, 100, 500, 7)...),
		"short":    []byte("xx"),
	} {
		raft[9] = entry
		if got, err := l.Read(0, 1<<20); err == nil {
			t.Errorf("%s: read %d bytes through a reference to other bytes", name, len(got))
		}
		if _, err := l.FindTimestamp(0); err == nil {
			t.Errorf("%s: FindTimestamp read through a reference to other bytes", name)
		}
	}
}

// A damaged reference below next is damage, as a damaged batch is: open
// refuses the log. One torn after next (a write the checkpoint never
// counted) is cut.
func TestOpenChecksReferences(t *testing.T) {
	write := func(t *testing.T) (string, int64, string) {
		dir := t.TempDir()
		l := open(t, dir, 0, 0, 1<<20)
		b := batch(2, 100, 300, 1)
		delta, maxTs := facts(b)
		for i := range 3 {
			if _, err := l.AppendRef(partlog.Ref{Index: uint64(10 + i), Len: uint32(len(b))}, delta, maxTs, -1); err != nil {
				t.Fatal(err)
			}
		}
		next := l.Next()
		if _, err := l.AppendRef(partlog.Ref{Index: 20, Len: uint32(len(b))}, delta, maxTs, -1); err != nil {
			t.Fatal(err)
		}
		l.Close()
		files := segmentFiles(t, dir)
		if len(files) != 1 {
			t.Fatalf("%d segment files", len(files))
		}
		return dir, next, filepath.Join(dir, files[0])
	}
	t.Run("below next", func(t *testing.T) {
		dir, next, path := write(t)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		raw[77+65]++ // the second reference's Raft index
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := partlog.Open(dir, 0, next, 1<<20)
		if err == nil {
			l.Close()
			t.Fatal("opened a log with a damaged reference below next")
		}
		if !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("error does not say the log is damaged: %v", err)
		}
	})
	t.Run("torn after next", func(t *testing.T) {
		dir, next, path := write(t)
		if err := os.Truncate(path, 3*77+40); err != nil {
			t.Fatal(err)
		}
		l := open(t, dir, 0, next, 1<<20)
		if st, err := os.Stat(path); err != nil || st.Size() != 3*77 {
			t.Fatalf("the torn reference was not cut: %v %v", st.Size(), err)
		}
		if l.FirstRef() != 10 {
			t.Fatalf("FirstRef %d, want 10", l.FirstRef())
		}
		r, err := l.Range()
		if err != nil {
			t.Fatal(err)
		}
		if r.FirstRef() != 10 || !r.Files()[0].Refs {
			t.Fatalf("a range of references from entry 10 says %d, %+v", r.FirstRef(), r.Files())
		}
		r.Close()
		b := batch(2, 100, 300, 1)
		l.SetResolver(entries{10: b, 11: b, 12: b})
		got, err := l.Read(0, 1<<20)
		if err != nil || len(got) != 3*len(b) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
		if _, err := l.Read(next+1, 100); !errors.Is(err, partlog.ErrOffsetOutOfRange) {
			t.Fatalf("read past next: %v", err)
		}
	})
}

// entriesMu is entries read and written from several goroutines.
type entriesMu struct {
	mu sync.Mutex
	e  entries
}

func (m *entriesMu) ReadRef(r partlog.Ref, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e.ReadRef(r, b)
}

// Rewrite runs beside the FSM's appends and readers' fetches: every batch
// appended while segments are written again (the active one too) is served
// afterwards, readers never see other bytes, and the log reopened from its
// files reads the same. While a snapshot's Range is open the files stay as
// they are (it links them by name). A rewrite a crash left half written is
// removed when the log opens.
func TestRewriteBesideAppendsReadsAndRanges(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 0, 0, 64<<10)
	raft := &entriesMu{e: entries{}}
	l.SetResolver(raft)
	var want [][]byte // the batches as served, by append order
	var index uint64
	appendRef := func(i int) {
		b := batch(int32(1+i%3), int64(1000+i), 100+i%900, byte(i))
		delta, maxTs := facts(b)
		raft.mu.Lock()
		index++
		at := index
		raft.e[at] = append([]byte("entry"), b...)
		raft.mu.Unlock()
		base, err := l.AppendRef(partlog.Ref{Index: at, Pos: 5, Len: uint32(len(b))}, delta, maxTs, -1)
		if err != nil {
			t.Error(err)
			return
		}
		served := bytes.Clone(b)
		binary.BigEndian.PutUint64(served, uint64(base))
		want = append(want, served)
	}
	for i := range 300 {
		appendRef(i)
	}

	// An open Range keeps the files.
	r, err := l.Range()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.Rewrite(context.Background(), index+1); err != nil || n != 0 || l.FirstRef() != 1 {
		t.Fatalf("rewrote %d bytes (%v) with a Range open; FirstRef %d", n, err, l.FirstRef())
	}
	r.Close()

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the FSM
		defer wg.Done()
		defer close(done)
		for i := 300; i < 1500; i++ {
			appendRef(i)
		}
	}()
	go func() { // a reader
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := l.Read(0, 1<<20); err != nil {
				t.Errorf("read beside a rewrite: %v", err)
				return
			}
		}
	}()
	for {
		raft.mu.Lock()
		below := index + 1
		raft.mu.Unlock()
		if _, err := l.Rewrite(context.Background(), below); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	wg.Wait()
	raft.mu.Lock()
	last := index
	raft.mu.Unlock()
	if _, err := l.Rewrite(context.Background(), last+1); err != nil {
		t.Fatal(err)
	}
	if f := l.FirstRef(); f != 0 {
		t.Fatalf("every reference rewritten, and FirstRef is %d", f)
	}
	raft.mu.Lock()
	raft.e = entries{} // the Raft log compacted: nothing to resolve
	raft.mu.Unlock()

	check := func(l *partlog.Log) {
		t.Helper()
		var got []byte
		for off := l.Start(); off < l.Next(); {
			b, err := l.Read(off, 1<<20)
			if err != nil || len(b) == 0 {
				t.Fatalf("read at %d (next %d): %d bytes, %v", off, l.Next(), len(b), err)
			}
			got = append(got, b...)
			for len(b) > 0 {
				off = int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[23:]))) + 1
				b = b[int(binary.BigEndian.Uint32(b[8:]))+12:]
			}
		}
		if !bytes.Equal(got, bytes.Join(want, nil)) {
			t.Fatalf("read %d bytes, want the %d bytes appended", len(got), len(bytes.Join(want, nil)))
		}
	}
	check(l)
	next := l.Next()
	l.Close()
	files := segmentFiles(t, dir)
	if err := os.WriteFile(filepath.Join(dir, strings.TrimSuffix(files[0], ".log")+".log.rewrite"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, 0, next, 64<<10)
	check(l)
	if got := segmentFiles(t, dir); !reflect.DeepEqual(got, files) {
		t.Fatalf("files after reopening: %v, want %v", got, files)
	}
}
