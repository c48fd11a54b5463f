package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"
)

// failoverResult is the outcome of a failover run.
type failoverResult struct {
	Label             string  `json:"label"`
	Client            string  `json:"client"`
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
	// Kill → every consumer fetched a record produced after the kill.
	RecordAllP50Ms float64 `json:"record_all_p50_ms"`
	RecordAllP99Ms float64 `json:"record_all_p99_ms"`
	RecordAllMaxMs float64 `json:"record_all_max_ms"`
	// Kill → a record produced after the kill acknowledged.
	ProducerP50Ms float64 `json:"producer_p50_ms"`
	ProducerP99Ms float64 `json:"producer_p99_ms"`
	ProducerMaxMs float64 `json:"producer_max_ms"`
	// Rounds after which a member or a generation changed.
	RoundsChanged int `json:"rounds_members_changed"`
	// Acknowledged records never consumed, records consumed more than
	// once after the group first became healthy (not in its forming),
	// committed offsets seen going backwards.
	Missing     int64    `json:"missing"`
	Duplicates  int64    `json:"duplicates"`
	Regressions []string `json:"commit_regressions"`

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
	fmt.Fprintln(tw, "round\tkilled\tnew leader\telected ms\tproducer ms\theartbeat ms\tall heartbeats ms\trecord ms\tall consumers ms\trevoke+lost callbacks\tgen changes\tclient session errors\trestart→ready s\tfault\thold ms\tmembers lost\tnote\t")
	for _, x := range r.Rounds {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%.1f\t%s\t%.0f\t%d\t%s\t\n", x.N, x.Killed, x.NewLeader, x.ElectedMs, x.ProducerMs, x.HBMs, x.HBAllMs,
			x.RecordMs, x.RecordAllMs, x.Rebalances, x.GenChanges, x.SessionErrors, x.RestartS, x.Fault, x.HoldMs, x.MembersLost, x.Error)
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
	row("kill → new record acknowledged p50/p99/max ms", "%.0f / %.0f / %.0f", r.ProducerP50Ms, r.ProducerP99Ms, r.ProducerMaxMs)
	row("kill → new record fetched p50/p99/max ms", "%.0f / %.0f / %.0f", r.RecordP50Ms, r.RecordP99Ms, r.RecordMaxMs)
	row("kill → every consumer fetching p50/p99/max ms", "%.0f / %.0f / %.0f", r.RecordAllP50Ms, r.RecordAllP99Ms, r.RecordAllMaxMs)
	row("kills with members or generation changed", "%d of %d%s", r.RoundsChanged, len(r.Rounds), clientEnded(r))
	row("missing / duplicated / commits backwards", "%d / %d / %d %s", r.Missing, r.Duplicates, len(r.Regressions), firstOf(r.Regressions))
	row("rebalances", "revoked %d, lost %d, consumer generation +%d, server generation %d → %d, members unchanged %v",
		r.Revoked, r.Lost, r.GenerationChanges, r.ServerGenerationStart, r.ServerGenerationEnd, r.MembersUnchanged)
	row("heartbeat errors", "%s", formatCounts(r.HeartbeatErrors))
	row("client-ended group sessions", "%s", formatCounts(r.SessionErrors))
	row("fetch errors", "%s", formatCounts(r.FetchErrors))
	row("produced / errors / consumed", "%d / %d / %d %s", r.Produced, r.ProduceErrors, r.Consumed, r.FirstProduceError)
	row("result", "%s", status)
	return tw.Flush()
}

// writeFailoverSummary prints one line per result: the figures the
// failover benchmark is judged by.
func writeFailoverSummary(w io.Writer, rs []*failoverResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tclient\tkills\tmembers/generation changed\tnew leader p50\tproducer back p50 / p99 / max\tconsumers back p50 / p99 / max\tmissing / duplicates / commits backwards\tproduce errors\t")
	s := func(v float64) string {
		if v < 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f s", v/1000)
	}
	for _, r := range rs {
		note := ""
		if !r.OK {
			note = " (FAILED: " + r.Error + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d of %d%s\t%s\t%s / %s / %s\t%s / %s / %s\t%d / %d / %d\t%d%s\t\n",
			r.Label, r.Client, len(r.Rounds), r.RoundsChanged, len(r.Rounds), clientEnded(r), s(r.ElectedP50Ms),
			s(r.ProducerP50Ms), s(r.ProducerP99Ms), s(r.ProducerMaxMs),
			s(r.RecordAllP50Ms), s(r.RecordAllP99Ms), s(r.RecordAllMaxMs),
			r.Missing, r.Duplicates, len(r.Regressions), r.ProduceErrors, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writePauseSummary(w, rs)
}

// pauseRow is the pause rounds of one target, client and hold.
type pauseRow struct {
	label, client string
	holdMs        float64
	rounds        int
	lost          int // members lost, summed over the rounds
	roundsLost    int // rounds that lost a member
	incomplete    int // rounds where producer or consumers never came back
	back          []float64
	afterResume   []float64
}

// writePauseSummary prints, if any result paused the leader, one line per
// target, client and hold: members lost and the time until the producer
// and every consumer moved on, from the SIGSTOP and from the SIGCONT (0
// when they were back before the node was resumed).
func writePauseSummary(w io.Writer, rs []*failoverResult) error {
	var rows []*pauseRow
	find := func(label, client string, hold float64) *pauseRow {
		for _, x := range rows {
			if x.label == label && x.client == client && x.holdMs == hold {
				return x
			}
		}
		x := &pauseRow{label: label, client: client, holdMs: hold}
		rows = append(rows, x)
		return x
	}
	for _, r := range rs {
		for _, x := range r.Rounds {
			if x.Fault != "pause" {
				continue
			}
			row := find(r.Label, r.Client, x.HoldMs)
			row.rounds++
			row.lost += x.MembersLost
			if x.MembersLost > 0 {
				row.roundsLost++
			}
			if x.BackMs < 0 {
				row.incomplete++
				continue
			}
			row.back = append(row.back, x.BackMs)
			row.afterResume = append(row.afterResume, max(0, x.BackMs-x.HoldMs))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortStableFunc(rows, func(a, b *pauseRow) int { return cmp.Compare(a.holdMs, b.holdMs) })
	s := func(v float64) string {
		if v < 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f s", v/1000)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\thold\tclient\ttarget\trounds\tmembers lost (rounds)\tback after pause p50 / p99\tback after resume p50 / p99\tnever back\t")
	for _, x := range rows {
		b50, b99, _ := sampleQuantiles(x.back)
		a50, a99, _ := sampleQuantiles(x.afterResume)
		fmt.Fprintf(tw, "pause\t%s\t%s\t%s\t%d\t%d (%d)\t%s / %s\t%s / %s\t%d\t\n",
			time.Duration(x.holdMs*float64(time.Millisecond)), x.client, x.label, x.rounds, x.lost, x.roundsLost,
			s(b50), s(b99), s(a50), s(a99), x.incomplete)
	}
	return tw.Flush()
}

// clientEnded notes how many of the rounds that changed members began
// with a client ending its own group session (a dial error, its own
// session clock) rather than with an answer from the cluster: client
// behaviour, reported apart.
func clientEnded(r *failoverResult) string {
	n := 0
	for _, x := range r.Rounds {
		if x.SessionErrors > 0 {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d ended by the client)", n)
}

func firstOf(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return "(" + xs[0] + ")"
}

// runFailoverSummary prints the summary of failover results saved with
// -json, one file each.
func runFailoverSummary(files []string, stdout, stderr io.Writer) int {
	var rs []*failoverResult
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(stderr, "kgate-bench:", err)
			return 1
		}
		r := &failoverResult{}
		if err := json.Unmarshal(b, r); err != nil {
			fmt.Fprintf(stderr, "kgate-bench: %s: %v\n", name, err)
			return 1
		}
		rs = append(rs, r)
	}
	if err := writeFailoverSummary(stdout, rs); err != nil {
		return 1
	}
	return 0
}
