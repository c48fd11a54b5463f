package partlog_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/kgate/kgate/fsm/partlog"
)

// TestMain runs the child of TestKill9DuringRewrites when the test binary
// is started as one (PARTLOG_CHILD_DIR set), the tests otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv("PARTLOG_CHILD_DIR"); dir != "" {
		next, _ := strconv.ParseInt(os.Getenv("PARTLOG_CHILD_NEXT"), 10, 64)
		seed, _ := strconv.ParseUint(os.Getenv("PARTLOG_CHILD_SEED"), 10, 64)
		if err := runChild(dir, next, seed); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// generated stands in for a Raft log whose entry i holds, after 5 bytes,
// the one-record batch served at offset i-1 (genBatch). Entries below
// dropped are gone, as the Raft log drops what no reference names.
type generated struct{ dropped uint64 }

func genBatch(offset int64) []byte {
	return batch(1, 1000+offset, 50+int(offset%700), byte(offset))
}

func (g generated) ReadRef(r partlog.Ref, b []byte) error {
	if r.Index < g.dropped {
		return fmt.Errorf("entry %d is gone: rewritten below %d", r.Index, g.dropped)
	}
	d := append([]byte("entry"), genBatch(int64(r.Index)-1)...)
	if uint64(r.Pos)+uint64(r.Len) > uint64(len(d)) {
		return fmt.Errorf("entry %d has %d bytes", r.Index, len(d))
	}
	copy(b, d[r.Pos:r.Pos+r.Len])
	return nil
}

// runChild appends references to the log in dir from next on as the FSM
// does, rewrites those below an index now and then (and prints "R
// <index>" once it has), and syncs the log and prints "C <next>" as a
// checkpoint does, until it is killed.
func runChild(dir string, next int64, seed uint64) error {
	l, err := partlog.Open(dir, 0, next, 16<<10)
	if err != nil {
		return err
	}
	l.SetResolver(generated{})
	rng := rand.New(rand.NewPCG(seed, 3))
	for {
		switch p := rng.IntN(100); {
		case p < 75:
			o := l.Next()
			b := genBatch(o)
			delta, maxTs := facts(b)
			if _, err := l.AppendRef(partlog.Ref{Index: uint64(o + 1), Pos: 5, Len: uint32(len(b))}, delta, maxTs, -1); err != nil {
				return err
			}
		case p < 95:
			below := uint64(rng.Int64N(l.Next() + 2))
			if _, err := l.Rewrite(context.Background(), below); err != nil {
				return err
			}
			fmt.Println("R", below)
		default:
			if err := l.Sync(); err != nil {
				return err
			}
			fmt.Println("C", l.Next())
		}
	}
}

// TestKill9DuringRewrites kills a child that appends references, rewrites
// segments (copying the batches they name in) and checkpoints, in the
// middle of whatever it does: the log opened at the last checkpoint the
// child printed serves every batch below it as it was appended, without
// the entries below any rewrite the child finished, and no half-written
// rewrite is left.
func TestKill9DuringRewrites(t *testing.T) {
	dir := t.TempDir()
	var next int64
	var rewritten uint64
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PARTLOG_CHILD_DIR="+dir,
			fmt.Sprintf("PARTLOG_CHILD_NEXT=%d", next), fmt.Sprintf("PARTLOG_CHILD_SEED=%d", round))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		checkpoints := 0
		target := 20 + round*7
		handle := func(line string) {
			if strings.HasPrefix(line, "error:") {
				t.Fatalf("round %d: child: %s", round, line)
			}
			if r, ok := strings.CutPrefix(line, "R "); ok {
				below, err := strconv.ParseUint(r, 10, 64)
				if err != nil {
					t.Fatalf("round %d: child said %q", round, line)
				}
				rewritten = max(rewritten, below)
				return
			}
			n, err := strconv.ParseInt(strings.TrimPrefix(line, "C "), 10, 64)
			if err != nil {
				t.Fatalf("round %d: child said %q", round, line)
			}
			next = n
			checkpoints++
		}
		for checkpoints < target && lines.Scan() {
			handle(lines.Text())
		}
		if checkpoints < target {
			t.Fatalf("round %d: child stopped after %d checkpoints", round, checkpoints)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			handle(lines.Text())
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()

		l, err := partlog.Open(dir, 0, next, 16<<10)
		if err != nil {
			t.Fatalf("round %d: open at the checkpoint's %d after kill -9: %v", round, next, err)
		}
		l.SetResolver(generated{dropped: rewritten})
		if f := l.FirstRef(); f != 0 && f < rewritten {
			t.Fatalf("round %d: a reference names entry %d, below the finished rewrite's %d", round, f, rewritten)
		}
		var want bytes.Buffer
		for o := int64(0); o < next; o++ {
			b := genBatch(o)
			binary.BigEndian.PutUint64(b, uint64(o))
			want.Write(b)
		}
		var got []byte
		for o := int64(0); o < next; {
			b, err := l.Read(o, 1<<20)
			if err != nil || len(b) == 0 {
				t.Fatalf("round %d: read at %d of %d: %d bytes, %v", round, o, next, len(b), err)
			}
			got = append(got, b...)
			for ; len(b) > 0; o++ {
				b = b[int(binary.BigEndian.Uint32(b[8:]))+12:]
			}
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("round %d: the %d batches below %d read back as other bytes", round, next, next)
		}
		l.Close()
		left := 0
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".rewrite") {
				left++
			}
		}
		if left != 0 {
			t.Fatalf("round %d: %d half-written rewrites left after open", round, left)
		}
		t.Logf("round %d: killed after %d checkpoints; %d batches read back, those that entries below %d held from the partition's files", round, checkpoints, next, rewritten)
	}
}
