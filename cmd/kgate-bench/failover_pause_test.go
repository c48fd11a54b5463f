package main

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// -fault pause takes a list of holds and needs no -restart (the node is
// resumed, not restarted); a hold the round cannot wait out, an unknown
// fault or a bad hold is refused.
func TestParseFailoverPauseConfig(t *testing.T) {
	cfg, err := parseFailoverConfig([]string{"-pids", "1=10", "-fault", "pause", "-pause", "3s, 6s,20s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{3 * time.Second, 6 * time.Second, 20 * time.Second}; cfg.fault != "pause" || !slices.Equal(cfg.holds, want) {
		t.Errorf("fault %q holds %v, want pause %v", cfg.fault, cfg.holds, want)
	}
	cfg, err = parseFailoverConfig([]string{"-pids", "1=10", "-restart", "x"}, io.Discard)
	if err != nil || cfg.fault != "kill" {
		t.Errorf("default: fault %q, err %v; want kill", cfg.fault, err)
	}
	for _, args := range [][]string{
		{"-pids", "1=10", "-fault", "stop"},
		{"-pids", "1=10", "-fault", "pause", "-pause", "0s"},
		{"-pids", "1=10", "-fault", "pause", "-pause", "3s,x"},
		{"-pids", "1=10", "-fault", "pause", "-pause", ""},
		{"-pids", "1=10", "-fault", "pause", "-pause", "60s"}, // the round gives up at -round-timeout 60s
		{"-pids", "1=10", "-fault", "pause", "-pause", "30s", "-round-timeout", "20s"},
	} {
		if _, err := parseFailoverConfig(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// The summary of pause rounds has a line per target, client and hold, in
// hold order: the members lost, the time back from the SIGSTOP and from the
// SIGCONT (never below zero: consumers back while the node was still
// frozen count 0), and the rounds that never came back.
func TestPauseSummary(t *testing.T) {
	kg := &failoverResult{Label: "kgate-3node", Client: "java", OK: true, Rounds: []failRound{
		{N: 1, Fault: "pause", HoldMs: 6000, MembersLost: 3, BackMs: 9000},
		{N: 2, Fault: "pause", HoldMs: 3000, MembersLost: 0, BackMs: 1500},
		{N: 3, Fault: "pause", HoldMs: 6000, MembersLost: 0, BackMs: 6500},
		{N: 4, Fault: "pause", HoldMs: 3000, MembersLost: 1, BackMs: -1},
	}}
	killed := &failoverResult{Label: "kafka-3broker", Client: "java", OK: true, Rounds: []failRound{
		{N: 1, Fault: "kill", BackMs: 4000, MembersLost: 2},
	}}
	var b strings.Builder
	if err := writeFailoverSummary(&b, []*failoverResult{kg, killed}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var lines []string
	for l := range strings.Lines(out[strings.Index(out, "fault  "):]) {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	want := []string{
		"fault hold client target rounds members lost (rounds) back after pause p50 / p99 back after resume p50 / p99 never back",
		"pause 3s java kgate-3node 2 1 (1) 1.50 s / 1.50 s 0.00 s / 0.00 s 1",
		"pause 6s java kgate-3node 2 3 (1) 6.50 s / 9.00 s 0.50 s / 3.00 s 0",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("pause summary:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	b.Reset()
	if err := writeFailoverSummary(&b, []*failoverResult{killed}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "back after resume") {
		t.Errorf("kill rounds only, yet a pause summary:\n%s", b.String())
	}
}

// A member counts as lost by the partitions taken from it: a lost or
// revoked callback with partitions, while counting, marks that consumer
// only; an empty callback (a cooperative rebalance that took nothing) and
// callbacks before the group first settled do not.
func TestPartitionsTakenPerConsumer(t *testing.T) {
	f := &failover{log: slog.New(slog.DiscardHandler), topic: "t", assigned: make([]int, 3), taken: make([]int64, 3),
		sessionErrs: map[string]int64{}, fetchErr: map[string]int64{}}
	p := &consumerProgram{}
	f.onProgramEvent(0, p, programEvent{Event: "assigned", Partitions: []int32{0, 1}})
	f.onProgramEvent(0, p, programEvent{Event: "revoked", Partitions: []int32{1}})
	if !slices.Equal(f.taken, []int64{0, 0, 0}) {
		t.Fatalf("taken %v before counting started", f.taken)
	}
	f.counting = true
	f.onProgramEvent(1, p, programEvent{Event: "lost", Partitions: []int32{2, 3}})
	f.onProgramEvent(2, p, programEvent{Event: "revoked", Partitions: nil})
	f.onRevoked(0, map[string][]int32{"t": {0}}, false)
	if want := []int64{1, 1, 0}; !slices.Equal(f.taken, want) {
		t.Errorf("taken %v, want %v", f.taken, want)
	}
	if f.lost != 1 || f.revoked != 1 {
		t.Errorf("lost %d revoked %d, want 1 and 1", f.lost, f.revoked)
	}
}
