//go:build chaos && linux

package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDigestsPartNamesTheFirstDifference: digestsPart reads the nodes'
// "applied log digest" lines and names the first window where two nodes
// applied different commands, or, where the commands agree, answered them
// differently; a window a node logged without outcomes (it replayed part
// of it) is compared by its commands only.
func TestDigestsPartNamesTheFirstDifference(t *testing.T) {
	dir := t.TempDir()
	line := func(first, crc, outcomes string) string {
		l := `time=2026-12-06T15:00:00.000Z level=INFO msg="applied log digest" node=1 first_index=` + first + ` last_index=0 crc32c=` + crc
		if outcomes != "" {
			l += " outcomes_crc32c=" + outcomes
		}
		return l
	}
	run := func(logs ...[]string) string {
		t.Helper()
		c := &cluster{t: t}
		for i, ls := range logs {
			p := filepath.Join(dir, t.Name()+strings.Repeat("x", i)+".log")
			if err := os.WriteFile(p, []byte("kgate node ready\n"+strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			c.nodes = append(c.nodes, &node{c: c, id: i + 1, logPath: p})
		}
		return c.digestsPart()
	}
	same := []string{line("1", "11", "aa"), line("257", "22", "bb")}
	if got := run(same, same, []string{line("257", "22", "")}); got != "" {
		t.Fatalf("replicas that agree: %q", got)
	}
	got := run(same, []string{line("1", "11", "aa"), line("257", "99", "bb")})
	if !strings.Contains(got, "different commands at Raft indexes from 257") {
		t.Fatalf("another command in the second window: %q", got)
	}
	got = run(same, []string{line("1", "11", "aa"), line("257", "22", "cc")}, []string{line("257", "22", "")})
	if !strings.Contains(got, "same commands at Raft indexes from 257 but answered them differently") ||
		!strings.Contains(got, "node 1 bb") || !strings.Contains(got, "node 2 cc") {
		t.Fatalf("other outcomes in the second window: %q", got)
	}
}
