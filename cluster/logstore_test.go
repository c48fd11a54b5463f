package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// entryData is the payload of log entry i: a record batch of ~64 KiB whose
// bytes name their entry, so a misplaced or damaged entry shows.
func entryData(i uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("entry-%08d;", i)), 64<<10/15)
}

func batchOf(first, n uint64) []*raft.Log {
	var logs []*raft.Log
	for i := first; i < first+n; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: entryData(i)})
	}
	return logs
}

func checkEntries(t *testing.T, s LogStore, first, last uint64) {
	t.Helper()
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if l.Index != i || !bytes.Equal(l.Data, entryData(i)) {
			t.Fatalf("entry %d: got index %d and %d bytes of other data", i, l.Index, len(l.Data))
		}
	}
}

// TestMain runs the child process a kill test kills when the test binary is
// started as one (KGATE_LOGSTORE_DIR: TestLogStoreKill9MidAppend's writer;
// KGATE_NODE_KILL: TestKill9NodeWithReferences's node), the tests otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv("KGATE_LOGSTORE_DIR"); dir != "" {
		appendUntilKilled(dir)
	}
	if spec := os.Getenv(nodeKillEnv); spec != "" {
		runNodeUntilKilled(spec)
	}
	os.Exit(m.Run())
}

// appendUntilKilled appends batches to the log store of dataDir and prints
// the last index of each batch once StoreLogs has returned (acknowledged).
func appendUntilKilled(dataDir string) {
	s, err := OpenLogStore(dataDir, true, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	next, _ := s.LastIndex()
	next++
	for {
		if err := s.StoreLogs(batchOf(next, 8)); err != nil {
			fmt.Println("append:", err)
			os.Exit(1)
		}
		next += 8
		fmt.Println(next - 1)
	}
}

// TestLogStoreKill9MidAppend kills a process appending to the Raft log with
// SIGKILL, at a moment it is mid-way through writing, several times over:
// every entry it acknowledged must be in the log after reopening, intact.
func TestLogStoreKill9MidAppend(t *testing.T) {
	dir := t.TempDir()
	var acked uint64
	for round := range 3 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "KGATE_LOGSTORE_DIR="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		start := acked
		for lines.Scan() {
			n, err := strconv.ParseUint(lines.Text(), 10, 64)
			if err != nil {
				t.Fatalf("round %d: writer said %q", round, lines.Text())
			}
			acked = n
			if acked >= start+200 {
				// The writer is appending its next batch right now.
				break
			}
		}
		if acked < start+200 {
			t.Fatalf("round %d: writer stopped after entry %d", round, acked)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()

		s, err := OpenLogStore(dir, true, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		last, err := s.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		if last < acked {
			t.Fatalf("round %d: the log ends at %d, but the writer acknowledged %d", round, last, acked)
		}
		checkEntries(t, s, 1, last)
		acked = last
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogStoreCutsTornTail damages the last batch written, as a crash in
// the middle of writing it would: reopening cuts that batch (its checksum
// does not match), keeps every earlier one, and appends after them.
func TestLogStoreCutsTornTail(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	s, err := OpenLogStore(dir, true, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(batchOf(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(batchOf(11, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	segs, err := filepath.Glob(filepath.Join(dir, "raft", logDir, "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segment files %v (%v)", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, entryData(15))
	if at < 0 {
		t.Fatal("entry 15 not found in the segment file")
	}
	copy(b[at+1000:], "torn")
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	s, err = OpenLogStore(dir, true, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	last, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if last != 10 {
		t.Fatalf("after the torn batch the log ends at %d, want 10", last)
	}
	checkEntries(t, s, 1, 10)
	if err := s.StoreLogs(batchOf(11, 5)); err != nil {
		t.Fatalf("append after the cut: %v", err)
	}
	checkEntries(t, s, 1, 15)
}

// writeBoltLog makes the raft.db of a release before the segment-file log.
func writeBoltLog(t *testing.T, dataDir string, n uint64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dataDir, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := raftboltdb.NewBoltStore(filepath.Join(dataDir, "raft", boltFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLogs(batchOf(1, n)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte("LastVoteCand"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func checkMigrated(t *testing.T, dataDir string, n uint64) {
	t.Helper()
	s, err := OpenLogStore(dataDir, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if last, _ := s.LastIndex(); last != n {
		t.Fatalf("migrated log ends at %d, want %d", last, n)
	}
	checkEntries(t, s, 1, n)
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("CurrentTerm %d (%v), want 7", term, err)
	}
	if cand, err := s.Get([]byte("LastVoteCand")); err != nil || string(cand) != "2" {
		t.Fatalf("LastVoteCand %q (%v), want 2", cand, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft", boltFile)); !os.IsNotExist(err) {
		t.Fatalf("raft.db still there after the migration (%v)", err)
	}
}

// TestLogStoreMigratesBoltLog: a data directory of an earlier release
// (raft-boltdb) opens with its log and vote, now in segment files.
func TestLogStoreMigratesBoltLog(t *testing.T) {
	dataDir := t.TempDir()
	writeBoltLog(t, dataDir, 300)
	checkMigrated(t, dataDir, 300)
	checkMigrated(t, dataDir, 300) // and again, from the segment files
}

// TestLogStoreMigrationCrashes: a migration that crashed before its copy
// was in place starts over from raft.db; one that crashed after it only
// removes raft.db.
func TestLogStoreMigrationCrashes(t *testing.T) {
	t.Run("before the rename", func(t *testing.T) {
		dataDir := t.TempDir()
		writeBoltLog(t, dataDir, 50)
		partial := filepath.Join(dataDir, "raft", logDirPartial)
		if err := os.MkdirAll(partial, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(partial, "00000000000000000001.seg"), []byte("half a segment"), 0o644); err != nil {
			t.Fatal(err)
		}
		checkMigrated(t, dataDir, 50)
		if _, err := os.Stat(partial); !os.IsNotExist(err) {
			t.Fatalf("the partial copy is still there (%v)", err)
		}
	})
	t.Run("after the rename", func(t *testing.T) {
		dataDir := t.TempDir()
		writeBoltLog(t, dataDir, 50)
		checkMigrated(t, dataDir, 50)
		// raft.db back, as if its removal had not reached the disk: it
		// holds an older log that must not replace the migrated one.
		writeBoltLog(t, dataDir, 20)
		checkMigrated(t, dataDir, 50)
	})
}

// TestLogStoreCompactedEntriesAreGone: entries below the first index after
// a compaction are not found (Raft then sends a far-behind follower the
// snapshot), though their segment file is still the current one.
func TestLogStoreCompactedEntriesAreGone(t *testing.T) {
	s, err := OpenLogStore(t.TempDir(), true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.StoreLogs(batchOf(1, 20)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(5, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("compacted entry 5: %v, want ErrLogNotFound", err)
	}
	checkEntries(t, s, 11, 20)
}

// TestLogStoreMigratesBoltLogWithGap: raft-boltdb kept entries below a gap
// that a snapshot install left; the migrated log, which has no gaps, holds
// the entries after it.
func TestLogStoreMigratesBoltLogWithGap(t *testing.T) {
	dataDir := t.TempDir()
	writeBoltLog(t, dataDir, 30)
	b, err := raftboltdb.NewBoltStore(filepath.Join(dataDir, "raft", boltFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLogs(batchOf(101, 40)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenLogStore(dataDir, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 101 || last != 140 {
		t.Fatalf("migrated log holds %d..%d, want 101..140", first, last)
	}
	checkEntries(t, s, 101, 140)
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("CurrentTerm %d (%v), want 7", term, err)
	}
}

// TestLogStoreRefusesRaftWalDir: a data directory of the reverted raft-wal
// build is refused, not started on an empty log.
func TestLogStoreRefusesRaftWalDir(t *testing.T) {
	dataDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dataDir, "raft", walDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenLogStore(dataDir, true, slog.New(slog.DiscardHandler)); err == nil {
		s.Close()
		t.Fatal("opened a data directory with a raft-wal log")
	}
}
