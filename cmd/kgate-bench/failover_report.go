package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// failoverResult is the outcome of a failover run.
type failoverResult struct {
	Label             string  `json:"label"`
	Brokers           string  `json:"brokers"`
	Kills             int     `json:"kills"`
	Partitions        int     `json:"partitions"`
	Consumers         int     `json:"consumers"`
	HeartbeatMs       float64 `json:"heartbeat_interval_ms"`
	ProduceIntervalMs float64 `json:"produce_interval_ms"`

	Rounds           []failRound `json:"rounds"`
	IncompleteRounds int         `json:"incomplete_rounds"`

	// Kill → the admin API names a new leader.
	ElectedP50Ms float64 `json:"elected_p50_ms"`
	ElectedP99Ms float64 `json:"elected_p99_ms"`
	ElectedMaxMs float64 `json:"elected_max_ms"`
	// Kill → first successful heartbeat answered by another node.
	HeartbeatP50Ms float64 `json:"heartbeat_p50_ms"`
	HeartbeatP99Ms float64 `json:"heartbeat_p99_ms"`
	HeartbeatMaxMs float64 `json:"heartbeat_max_ms"`
	// Kill → every consumer has had a successful heartbeat.
	HeartbeatAllP50Ms float64 `json:"heartbeat_all_p50_ms"`
	HeartbeatAllP99Ms float64 `json:"heartbeat_all_p99_ms"`
	HeartbeatAllMaxMs float64 `json:"heartbeat_all_max_ms"`
	// Kill → first record produced after the kill fetched.
	RecordP50Ms float64 `json:"record_p50_ms"`
	RecordP99Ms float64 `json:"record_p99_ms"`
	RecordMaxMs float64 `json:"record_max_ms"`

	// Rebalances: callbacks that took partitions away, consumer generation
	// changes (max over consumers) and the server's generation.
	Revoked               int64 `json:"revoked_callbacks"`
	Lost                  int64 `json:"lost_callbacks"`
	GenerationChanges     int   `json:"generation_changes"`
	ServerGenerationStart int32 `json:"server_generation_start"`
	ServerGenerationEnd   int32 `json:"server_generation_end"`
	MembersUnchanged      bool  `json:"members_unchanged"`

	HeartbeatErrors map[string]int64 `json:"heartbeat_errors"`
	// SessionErrors are group sessions the clients ended themselves, by
	// error: these rebalances were not started by the server.
	SessionErrors     map[string]int64 `json:"client_session_errors"`
	FetchErrors       map[string]int64 `json:"fetch_errors"`
	Produced          int64            `json:"produced"`
	ProduceErrors     int64            `json:"produce_errors"`
	FirstProduceError string           `json:"first_produce_error,omitempty"`
	Consumed          int64            `json:"consumed"`

	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func writeFailoverTable(w io.Writer, r *failoverResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tkilled\tnew leader\telected ms\theartbeat ms\tall heartbeats ms\trecord ms\trevoke+lost callbacks\tgen changes\tclient session errors\trestart→ready s\tnote\t")
	for _, x := range r.Rounds {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%.1f\t%s\t\n", x.N, x.Killed, x.NewLeader, x.ElectedMs, x.HBMs, x.HBAllMs,
			x.RecordMs, x.Rebalances, x.GenChanges, x.SessionErrors, x.RestartS, x.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	status := "ok"
	if !r.OK {
		status = "FAIL: " + r.Error
	}
	row("target", "%s: %d consumers, %d partitions, heartbeat every %.0f ms, a record every %.0f ms",
		r.Label, r.Consumers, r.Partitions, r.HeartbeatMs, r.ProduceIntervalMs)
	row("leader kills", "%d of %d (%d incomplete)", len(r.Rounds), r.Kills, r.IncompleteRounds)
	row("kill → new leader named p50/p99/max ms", "%.0f / %.0f / %.0f", r.ElectedP50Ms, r.ElectedP99Ms, r.ElectedMaxMs)
	row("kill → first heartbeat ok p50/p99/max ms", "%.0f / %.0f / %.0f", r.HeartbeatP50Ms, r.HeartbeatP99Ms, r.HeartbeatMaxMs)
	row("kill → all consumers' heartbeat ok p50/p99/max ms", "%.0f / %.0f / %.0f", r.HeartbeatAllP50Ms, r.HeartbeatAllP99Ms, r.HeartbeatAllMaxMs)
	row("kill → new record fetched p50/p99/max ms", "%.0f / %.0f / %.0f", r.RecordP50Ms, r.RecordP99Ms, r.RecordMaxMs)
	row("rebalances", "revoked %d, lost %d, consumer generation +%d, server generation %d → %d, members unchanged %v",
		r.Revoked, r.Lost, r.GenerationChanges, r.ServerGenerationStart, r.ServerGenerationEnd, r.MembersUnchanged)
	row("heartbeat errors", "%s", formatCounts(r.HeartbeatErrors))
	row("client-ended group sessions", "%s", formatCounts(r.SessionErrors))
	row("fetch errors", "%s", formatCounts(r.FetchErrors))
	row("produced / errors / consumed", "%d / %d / %d %s", r.Produced, r.ProduceErrors, r.Consumed, r.FirstProduceError)
	row("result", "%s", status)
	return tw.Flush()
}
