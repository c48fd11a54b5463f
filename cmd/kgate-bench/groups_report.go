package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// groupsResult is the outcome of a groups or joinstorm run.
type groupsResult struct {
	Mode        string `json:"mode"`
	Label       string `json:"label"`
	Brokers     string `json:"brokers"`
	Members     int    `json:"members"`
	Groups      int    `json:"groups"`
	Connections int    `json:"connections"`

	// TimeToStableS runs from the first JoinGroup to the last member's first
	// successful SyncGroup.
	TimeToStableS float64        `json:"time_to_stable_s"`
	TargetS       float64        `json:"target_s,omitempty"`
	Synced        int64          `json:"synced_members"`
	StableGroups  int            `json:"stable_groups"`          // per DescribeGroups once all synced
	GroupStates   map[string]int `json:"group_states,omitempty"` // the same, by state

	JoinP50Ms float64 `json:"join_p50_ms"` // JoinGroups answered with a generation
	JoinP99Ms float64 `json:"join_p99_ms"`
	JoinMaxMs float64 `json:"join_max_ms"`
	SyncP50Ms float64 `json:"sync_p50_ms"`
	SyncP99Ms float64 `json:"sync_p99_ms"`
	SyncMaxMs float64 `json:"sync_max_ms"`

	HeartbeatMs float64 `json:"heartbeat_interval_ms"`
	// HeartbeatSpread: members' heartbeats start at random points of the
	// interval rather than together (-heartbeat-spread).
	HeartbeatSpread bool    `json:"heartbeat_spread"`
	WindowS         float64 `json:"window_s"`
	Heartbeats      int64   `json:"heartbeats"` // sent in the window
	HeartbeatsPerS  float64 `json:"heartbeats_per_sec"`
	HeartbeatP50Ms  float64 `json:"heartbeat_p50_ms"`
	HeartbeatP99Ms  float64 `json:"heartbeat_p99_ms"`
	HeartbeatMaxMs  float64 `json:"heartbeat_max_ms"`

	// Errors by "request:CODE" before the window (joining, syncing) and in it.
	SetupErrors  map[string]int64 `json:"setup_errors"`
	WindowErrors map[string]int64 `json:"window_errors"`
	// Rejoins counts members going back to JoinGroup after a first sync.
	Rejoins       int64 `json:"rejoins"`
	WindowRejoins int64 `json:"window_rejoins"`

	LeaderPID        int     `json:"leader_pid,omitempty"`
	LeaderCPUPercent float64 `json:"leader_cpu_percent"` // of one core, over the window
	LeaderRSSMiB     float64 `json:"leader_rss_mib,omitempty"`
	BenchCPUPercent  float64 `json:"bench_cpu_percent"` // this process, over the window
	// This process's own goroutine scheduling delay and GC pauses over
	// the window (runtimeHists): what of the heartbeat latency is the
	// load tool's.
	BenchSchedP99Ms   float64 `json:"bench_sched_delay_p99_ms"`
	BenchSchedMaxMs   float64 `json:"bench_sched_delay_max_ms"`
	BenchGCPauseMaxMs float64 `json:"bench_gc_pause_max_ms"`

	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// targetMet reports whether a time-to-Stable target was set and met.
func (r *groupsResult) targetMet() bool {
	return r.OK && r.TimeToStableS <= r.TargetS
}

func writeGroupsTable(w io.Writer, r *groupsResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	status := "ok"
	if !r.OK {
		status = "FAIL: " + r.Error
	}
	row("target", "%s (%s)", r.Label, r.Mode)
	row("members / groups / connections", "%d / %d / %d", r.Members, r.Groups, r.Connections)
	stable := fmt.Sprintf("%.2f s (%d of %d members synced; DescribeGroups: %s)",
		r.TimeToStableS, r.Synced, r.Members, formatCounts(r.GroupStates))
	if r.TargetS > 0 {
		verdict := "met"
		if !r.targetMet() {
			verdict = "MISSED"
		}
		stable += fmt.Sprintf("; target %.2f s %s", r.TargetS, verdict)
	}
	row("first JoinGroup to all Stable", "%s", stable)
	row("JoinGroup p50/p99/max ms", "%.1f / %.1f / %.1f", r.JoinP50Ms, r.JoinP99Ms, r.JoinMaxMs)
	row("SyncGroup p50/p99/max ms", "%.1f / %.1f / %.1f", r.SyncP50Ms, r.SyncP99Ms, r.SyncMaxMs)
	row("errors while joining", "%s", formatCounts(r.SetupErrors))
	if r.WindowS > 0 {
		phases := "members in step"
		if r.HeartbeatSpread {
			phases = "members spread over it"
		}
		row("heartbeat window", "%.0f s, every %.0f ms (%s): %d heartbeats (%.0f/s)", r.WindowS, r.HeartbeatMs, phases, r.Heartbeats, r.HeartbeatsPerS)
		row("heartbeat p50/p99/max ms", "%.2f / %.2f / %.2f", r.HeartbeatP50Ms, r.HeartbeatP99Ms, r.HeartbeatMaxMs)
		row("errors in window", "%s", formatCounts(r.WindowErrors))
		row("rejoins (in window)", "%d (%d)", r.Rejoins, r.WindowRejoins)
		if r.LeaderPID > 0 {
			row("leader CPU (pid "+fmt.Sprint(r.LeaderPID)+")", "%.1f%% of one core, RSS %.0f MiB", r.LeaderCPUPercent, r.LeaderRSSMiB)
		}
		row("kgate-bench CPU", "%.1f%% of one core", r.BenchCPUPercent)
		row("kgate-bench sched delay p99/max ms", "%.2f / %.2f (GC pause max %.2f ms)", r.BenchSchedP99Ms, r.BenchSchedMaxMs, r.BenchGCPauseMaxMs)
	}
	row("result", "%s", status)
	return tw.Flush()
}

// formatCounts prints a count map sorted by key, or "none".
func formatCounts[V int | int64](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
