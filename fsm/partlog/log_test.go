package partlog_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kgate/kgate/fsm/partlog"
)

// The log only reads a batch's framing (base offset, length, last offset
// delta, max timestamp); the rest is carried as is.
const headerSize = 61

// batch is a magic-2 shaped batch of records records with maxTs and a body
// of filler bytes so batches differ.
func batch(records int32, maxTs int64, body int, fill byte) []byte {
	b := make([]byte, headerSize+body)
	binary.BigEndian.PutUint64(b[0:], 0)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[12:], 0xffffffff)
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(records-1))
	binary.BigEndian.PutUint64(b[27:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[43:], 0xffffffffffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(records))
	for i := headerSize; i < len(b); i++ {
		b[i] = fill
	}
	return b
}

// stored is what an appended batch looks like when read back: the same bytes
// with the assigned base offset.
type stored struct {
	base, last int64
	data       []byte
}

func appendBatch(t *testing.T, l *partlog.Log, b []byte, want *[]stored) stored {
	t.Helper()
	delta := int32(binary.BigEndian.Uint32(b[23:]))
	maxTs := int64(binary.BigEndian.Uint64(b[35:]))
	next := l.Next()
	base, err := l.Append(b, delta, maxTs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if base != next {
		t.Fatalf("append at next %d got base %d", next, base)
	}
	if got := l.Next(); got != base+int64(delta)+1 {
		t.Fatalf("next %d after appending %d records at %d", got, delta+1, base)
	}
	if binary.BigEndian.Uint64(b) != 0 {
		t.Fatal("Append modified the caller's batch")
	}
	s := stored{base: base, last: base + int64(delta), data: append([]byte(nil), b...)}
	binary.BigEndian.PutUint64(s.data, uint64(base))
	if want != nil {
		*want = append(*want, s)
	}
	return s
}

// split cuts read data into whole batches, failing on a partial one.
func split(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(data) > 0 {
		if len(data) < 12 {
			t.Fatalf("%d trailing bytes", len(data))
		}
		n := int(binary.BigEndian.Uint32(data[8:])) + 12
		if n > len(data) {
			t.Fatalf("partial batch: %d of %d bytes", len(data), n)
		}
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			out = append(out, e.Name())
		}
	}
	return out
}

func open(t *testing.T, dir string, start, next, segmentBytes int64) *partlog.Log {
	t.Helper()
	l, err := partlog.Open(dir, start, next, segmentBytes)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// fill appends n batches of 1..4 records and ~200 bytes each.
func fill(t *testing.T, l *partlog.Log, n int, want *[]stored) {
	t.Helper()
	for i := 0; i < n; i++ {
		appendBatch(t, l, batch(int32(1+i%4), int64(1000+i), 150+i%50, byte(i)), want)
	}
}

// readAll reads [from, Next()) batch run by batch run, as a fetcher does.
func readAll(t *testing.T, l *partlog.Log, from int64) [][]byte {
	t.Helper()
	var out [][]byte
	for off := from; off < l.Next(); {
		data, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		bs := split(t, data)
		if len(bs) == 0 {
			t.Fatalf("read at %d (next %d) returned nothing", off, l.Next())
		}
		out = append(out, bs...)
		last := bs[len(bs)-1]
		after := int64(binary.BigEndian.Uint64(last)) + int64(int32(binary.BigEndian.Uint32(last[23:]))) + 1
		if after <= off {
			t.Fatalf("read at %d returned batches ending before it (at %d)", off, after)
		}
		off = after
	}
	return out
}

func checkBatches(t *testing.T, got [][]byte, want []stored) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i].data) {
			t.Fatalf("batch %d (base %d) differs", i, want[i].base)
		}
	}
}

func TestAppendReadAcrossSegmentRolls(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 0, 0, 1000)
	if data, err := l.Read(0, 1<<20); err != nil || data != nil {
		t.Fatalf("read of an empty log: %d bytes, %v", len(data), err)
	}
	var want []stored
	fill(t, l, 40, &want)
	if files := segmentFiles(t, dir); len(files) < 8 {
		t.Fatalf("%d segment files for ~8 KB with segment.bytes=1000", len(files))
	}
	segs := l.Segments()
	var total int64
	for i, s := range segs {
		if s.Bytes > 1000 && s.Bytes != int64(len(want[0].data)) {
			t.Errorf("segment %d holds %d bytes, over segment.bytes", i, s.Bytes)
		}
		if i > 0 && s.Base != segs[i-1].End {
			t.Errorf("segment %d starts at %d, previous ends at %d", i, s.Base, segs[i-1].End)
		}
		total += s.Bytes
	}
	if segs[0].Base != 0 || segs[len(segs)-1].End != l.Next() || total != l.Size() {
		t.Errorf("segments cover [%d, %d) with %d bytes; log [0, %d) with %d", segs[0].Base, segs[len(segs)-1].End, total, l.Next(), l.Size())
	}
	checkBatches(t, readAll(t, l, 0), want)

	// A read at any offset starts with the batch holding it and returns
	// whole batches, consecutive in the log.
	for _, w := range want {
		for off := w.base; off <= w.last; off++ {
			data, err := l.Read(off, 1<<20)
			if err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
			bs := split(t, data)
			if len(bs) == 0 || !bytes.Equal(bs[0], w.data) {
				t.Fatalf("read at %d does not start with the batch at %d", off, w.base)
			}
		}
	}
}

func TestReadLimits(t *testing.T) {
	l := open(t, t.TempDir(), 0, 0, 1<<20)
	var want []stored
	fill(t, l, 10, &want)
	two := len(want[0].data) + len(want[1].data)
	cases := []struct {
		max  int
		want int
	}{
		{1, 1}, // KIP-74: the first batch comes back whatever the limit
		{0, 1},
		{len(want[0].data) - 1, 1},
		{len(want[0].data), 1},
		{two - 1, 1},
		{two, 2},
		{1 << 20, 10},
	}
	for _, tc := range cases {
		data, err := l.Read(0, tc.max)
		if err != nil {
			t.Fatal(err)
		}
		checkBatches(t, split(t, data), want[:tc.want])
	}

	if data, err := l.Read(l.Next(), 1<<20); err != nil || data != nil {
		t.Errorf("read at next: %d bytes, %v", len(data), err)
	}
	for _, off := range []int64{-1, l.Next() + 1} {
		if _, err := l.Read(off, 1<<20); !errors.Is(err, partlog.ErrOffsetOutOfRange) {
			t.Errorf("read at %d: %v, want ErrOffsetOutOfRange", off, err)
		}
	}
}

func TestWaitClosedByAppendAndTrim(t *testing.T) {
	l := open(t, t.TempDir(), 0, 0, 1<<20)
	ch := l.Wait()
	select {
	case <-ch:
		t.Fatal("wait channel closed before any change")
	default:
	}
	fill(t, l, 2, nil)
	select {
	case <-ch:
	default:
		t.Fatal("append did not close the wait channel")
	}
	ch = l.Wait()
	if err := l.TrimTo(1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("trim did not close the wait channel")
	}
}

func TestFindTimestamp(t *testing.T) {
	l := open(t, t.TempDir(), 0, 0, 400)
	var want []stored
	// max timestamps in offset order: 100 300 200 500 400, over several segments.
	for i, ts := range []int64{100, 300, 200, 500, 400} {
		appendBatch(t, l, batch(2, ts, 200, byte(i)), &want)
	}
	cases := []struct {
		ts    int64
		batch int // -1: none
	}{
		{0, 0}, {100, 0}, {101, 1}, {300, 1}, {250, 1}, {301, 3}, {450, 3}, {500, 3}, {501, -1},
	}
	for _, tc := range cases {
		got, err := l.FindTimestamp(tc.ts)
		if err != nil {
			t.Fatal(err)
		}
		if tc.batch < 0 {
			if got != nil {
				t.Errorf("ts %d: got a batch, want none", tc.ts)
			}
			continue
		}
		if !bytes.Equal(got, want[tc.batch].data) {
			t.Errorf("ts %d: wrong batch, want the one at %d", tc.ts, want[tc.batch].base)
		}
	}
	// Batches before the log start are not found.
	if err := l.TrimTo(want[2].base); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.FindTimestamp(0); !bytes.Equal(got, want[2].data) {
		t.Errorf("after trim, ts 0: want the batch at %d", want[2].base)
	}
}

func TestTrimToDeletesSegments(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 0, 0, 1000)
	var want []stored
	fill(t, l, 40, &want)
	before := segmentFiles(t, dir)
	segs := l.Segments()
	// Trim into the middle of the fourth segment: three go, the fourth stays.
	cut := want[0]
	for _, w := range want {
		if w.base > segs[3].Base && w.base < segs[3].End {
			cut = w
			break
		}
	}
	if cut.base == 0 {
		t.Fatal("no batch inside the fourth segment")
	}
	if err := l.TrimTo(cut.base); err != nil {
		t.Fatal(err)
	}
	if l.Start() != cut.base {
		t.Fatalf("start %d, want %d", l.Start(), cut.base)
	}
	after := segmentFiles(t, dir)
	if len(after) != len(before)-3 || after[0] != before[3] {
		t.Fatalf("segment files %v after trim, before %v", after, before)
	}
	if _, err := l.Read(cut.base-1, 1<<20); !errors.Is(err, partlog.ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	var rest []stored
	for _, w := range want {
		if w.base >= cut.base {
			rest = append(rest, w)
		}
	}
	checkBatches(t, readAll(t, l, cut.base), rest)

	// Backwards is a no-op; past the end stops at next, and appends
	// continue from there.
	if err := l.TrimTo(1); err != nil || l.Start() != cut.base {
		t.Fatalf("trim backwards: start %d, %v", l.Start(), err)
	}
	next := l.Next()
	if err := l.TrimTo(next + 100); err != nil {
		t.Fatal(err)
	}
	if l.Start() != next || l.Next() != next {
		t.Fatalf("trim past the end: [%d, %d), want [%d, %d)", l.Start(), l.Next(), next, next)
	}
	if data, err := l.Read(next, 1<<20); err != nil || data != nil {
		t.Fatalf("read of the emptied log: %d bytes, %v", len(data), err)
	}
	s := appendBatch(t, l, batch(1, 1, 10, 0xee), nil)
	if s.base != next {
		t.Fatalf("append after trimming everything got %d, want %d", s.base, next)
	}
	checkBatches(t, readAll(t, l, next), []stored{s})
}

func TestOpenTruncatesTornTail(t *testing.T) {
	dir := t.TempDir()
	l, err := partlog.Open(dir, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var want []stored
	fill(t, l, 12, &want)
	next := l.Next()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := segmentFiles(t, dir)
	last := filepath.Join(dir, files[len(files)-1])
	st, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of writing the next batch.
	torn := batch(3, 5000, 300, 0xab)
	binary.BigEndian.PutUint64(torn, uint64(next))
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn[:len(torn)/2]); err != nil {
		t.Fatal(err)
	}
	f.Close()

	l = open(t, dir, 0, next, 1000)
	if l.Start() != 0 || l.Next() != next {
		t.Fatalf("reopened as [%d, %d), want [0, %d)", l.Start(), l.Next(), next)
	}
	if st2, err := os.Stat(last); err != nil || st2.Size() != st.Size() {
		t.Fatalf("last segment not cut back to %d bytes", st.Size())
	}
	checkBatches(t, readAll(t, l, 0), want)
	if ts, _ := l.FindTimestamp(5000); ts != nil {
		t.Error("the torn batch's timestamp is still indexed")
	}
	// Appends continue right after the intact data.
	s := appendBatch(t, l, batch(2, 2000, 100, 0xcd), &want)
	if s.base != next {
		t.Fatalf("append after reopen got %d, want %d", s.base, next)
	}
	checkBatches(t, readAll(t, l, 0), want)
}

func TestOpenTruncatesGarbageTail(t *testing.T) {
	dir := t.TempDir()
	l, err := partlog.Open(dir, 0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var want []stored
	fill(t, l, 5, &want)
	next := l.Next()
	l.Close()
	path := filepath.Join(dir, segmentFiles(t, dir)[0])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A header that claims more bytes than the file has, then random bytes.
	garbage := batch(1, 1, 500, 0x5a)[:120]
	binary.BigEndian.PutUint64(garbage, 1) // a base offset below next
	f.Write(garbage)
	f.Close()
	l = open(t, dir, 0, next, 1<<20)
	checkBatches(t, readAll(t, l, 0), want)
	if s := appendBatch(t, l, batch(1, 1, 10, 1), &want); s.base != next {
		t.Fatalf("append after reopen got %d, want %d", s.base, next)
	}
	checkBatches(t, readAll(t, l, 0), want)
}

func TestOpenWithSmallerNextCutsLaterBatches(t *testing.T) {
	dir := t.TempDir()
	l, err := partlog.Open(dir, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var want []stored
	fill(t, l, 30, &want)
	l.Close()
	before := segmentFiles(t, dir)
	// The checkpoint says the log ended at batch 17: everything after goes,
	// including whole later segment files.
	keep := want[:17]
	next := want[17].base
	l = open(t, dir, 0, next, 1000)
	if l.Next() != next {
		t.Fatalf("next %d, want %d", l.Next(), next)
	}
	checkBatches(t, readAll(t, l, 0), keep)
	if after := segmentFiles(t, dir); len(after) >= len(before) {
		t.Errorf("%d segment files after cutting, %d before", len(after), len(before))
	}
	if _, err := l.Read(next+1, 1<<20); !errors.Is(err, partlog.ErrOffsetOutOfRange) {
		t.Errorf("read past the cut: %v", err)
	}
	// New appends take the cut offsets, and a reopen keeps them.
	s := appendBatch(t, l, batch(2, 9, 40, 0x77), &keep)
	if s.base != next {
		t.Fatalf("append after cut got %d, want %d", s.base, next)
	}
	next = l.Next()
	l.Close()
	l = open(t, dir, 0, next, 1000)
	checkBatches(t, readAll(t, l, 0), keep)
}

func TestOpenWithStartDropsOldSegments(t *testing.T) {
	dir := t.TempDir()
	l, err := partlog.Open(dir, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var want []stored
	fill(t, l, 30, &want)
	segs := l.Segments()
	next := l.Next()
	l.Close()
	start := segs[2].Base
	l = open(t, dir, start, next, 1000)
	if l.Start() != start || len(segmentFiles(t, dir)) != len(segs)-2 {
		t.Fatalf("start %d with %d files; want %d with %d", l.Start(), len(segmentFiles(t, dir)), start, len(segs)-2)
	}
	var rest []stored
	for _, w := range want {
		if w.base >= start {
			rest = append(rest, w)
		}
	}
	checkBatches(t, readAll(t, l, start), rest)
}

func TestRangeSurvivesLaterTrim(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 0, 0, 1000)
	var want []stored
	fill(t, l, 30, &want)
	segs := l.Segments()
	start := segs[1].Base
	if err := l.TrimTo(start); err != nil {
		t.Fatal(err)
	}
	var inRange []byte
	for _, w := range want {
		if w.base >= start {
			inRange = append(inRange, w.data...)
		}
	}
	covered := segmentFiles(t, dir)
	r, err := l.Range()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The log moves on: more appends, then a trim that deletes most of the
	// files the range covers.
	fill(t, l, 10, nil)
	if err := l.TrimTo(l.Segments()[len(l.Segments())-1].Base); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, covered[0])); !os.IsNotExist(err) {
		t.Fatalf("the trim did not delete %s, the range's first file: %v", covered[0], err)
	}
	if r.Len() != int64(len(inRange)) {
		t.Fatalf("range length %d, want %d", r.Len(), len(inRange))
	}
	var buf bytes.Buffer
	n, err := r.WriteTo(&buf)
	if err != nil {
		t.Fatalf("write range after trim: %v", err)
	}
	if n != int64(len(inRange)) || !bytes.Equal(buf.Bytes(), inRange) {
		t.Fatalf("range streamed %d bytes, want exactly the %d bytes of [%d, %d)", n, len(inRange), start, want[len(want)-1].last+1)
	}
}

func TestRemoveDeletesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	l, err := partlog.Open(dir, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 10, nil)
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory still there: %v", err)
	}
}

// A disk that fills in the middle of a batch: the append fails, the part
// written is cut off the file, nothing counts it (next, reads, the
// timestamp index), and once there is room again appends go on from the
// same offset, before and after a reopen.
func TestAppendFailingPartwayCutsBack(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 0, 0, 1<<20)
	var want []stored
	fill(t, l, 5, &want)
	next := l.Next()
	files := segmentFiles(t, dir)
	seg := filepath.Join(dir, files[len(files)-1])
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}

	full := true
	partlog.SetWriteAt(l, func(f *os.File, b []byte, off int64) (int, error) {
		if !full {
			return f.WriteAt(b, off)
		}
		n, err := f.WriteAt(b[:len(b)/2], off) // part of it lands
		if err != nil {
			return n, err
		}
		return n, syscall.ENOSPC
	})
	big := batch(3, 9000, 400, 0xee)
	if _, err := l.Append(big, 2, 9000); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if l.Next() != next {
		t.Fatalf("next %d after a failed append, want %d", l.Next(), next)
	}
	if st2, err := os.Stat(seg); err != nil || st2.Size() != st.Size() {
		t.Fatalf("segment not cut back to %d bytes after the failed append", st.Size())
	}
	checkBatches(t, readAll(t, l, 0), want)
	if ts, _ := l.FindTimestamp(9000); ts != nil {
		t.Error("the failed batch's timestamp is indexed")
	}

	full = false
	s := appendBatch(t, l, batch(2, 2000, 100, 0xcd), &want)
	if s.base != next {
		t.Fatalf("append after the disk has room got %d, want %d", s.base, next)
	}
	checkBatches(t, readAll(t, l, 0), want)
	end := l.Next()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, 0, end, 1<<20)
	checkBatches(t, readAll(t, l, 0), want)
}

// Below next every byte was synced before the checkpoint naming next: a
// batch there that cannot be read is damage. Opening reports it, naming
// the file, and changes nothing on disk, where a cut would serve offsets
// below the high watermark as empty and destroy the batches after it.
func TestOpenRefusesDamageBelowNext(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, files []string, want []stored)
	}{
		{"a length field in the last segment", func(t *testing.T, dir string, files []string, want []stored) {
			path := filepath.Join(dir, files[len(files)-1])
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The second batch of the file claims to run past its end.
			first := int(binary.BigEndian.Uint32(raw[8:])) + 12
			binary.BigEndian.PutUint32(raw[first+8:], uint32(len(raw)))
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"the tail of a middle segment", func(t *testing.T, dir string, files []string, want []stored) {
			path := filepath.Join(dir, files[1])
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, st.Size()-40); err != nil {
				t.Fatal(err)
			}
		}},
		{"a middle segment file", func(t *testing.T, dir string, files []string, want []stored) {
			if err := os.Remove(filepath.Join(dir, files[1])); err != nil {
				t.Fatal(err)
			}
		}},
		{"the last segment file", func(t *testing.T, dir string, files []string, want []stored) {
			if err := os.Remove(filepath.Join(dir, files[len(files)-1])); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := open(t, dir, 0, 0, 1000)
			var want []stored
			fill(t, l, 30, &want)
			next := l.Next()
			l.Close()
			files := segmentFiles(t, dir)
			if len(files) < 3 {
				t.Fatalf("%d segment files, the test needs 3 or more", len(files))
			}
			tc.damage(t, dir, files, want)
			sizes := map[string]int64{}
			for _, f := range segmentFiles(t, dir) {
				st, err := os.Stat(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				sizes[f] = st.Size()
			}

			l2, err := partlog.Open(dir, 0, next, 1000)
			if err == nil {
				l2.Close()
				t.Fatal("opened a log whose batches below next are damaged")
			}
			if !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), dir) {
				t.Errorf("error does not say which file is damaged: %v", err)
			}
			for f, size := range sizes {
				if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() != size {
					t.Errorf("%s changed by the failed open", f)
				}
			}
		})
	}
}

// Retention after the checkpoint may have removed whole segments at the
// front (replaying the log trims the start again): the rest opens.
func TestOpenAllowsFrontSegmentsRemovedAfterTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 0, 0, 1000)
	var want []stored
	fill(t, l, 30, &want)
	segs := l.Segments()
	next := l.Next()
	l.Close()
	files := segmentFiles(t, dir)
	for _, f := range files[:2] {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	l = open(t, dir, 0, next, 1000)
	if err := l.TrimTo(segs[2].Base); err != nil {
		t.Fatal(err)
	}
	var rest []stored
	for _, w := range want {
		if w.base >= segs[2].Base {
			rest = append(rest, w)
		}
	}
	checkBatches(t, readAll(t, l, segs[2].Base), rest)
}
