package cluster

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the node's event counters; everything else is read from Raft
// and gossip when scraped (see Collect).
type metrics struct {
	leaderChanges    prometheus.Counter
	applyDuration    prometheus.Histogram
	snapshotDuration prometheus.Histogram
	snapshotBytes    prometheus.Gauge
	snapshots        *prometheus.CounterVec
	rewrittenBytes   prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_raft_leader_changes_total",
			Help: "Times this node saw the Raft leader change to another node.",
		}),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kgate_raft_apply_duration_seconds",
			Help:    "Time from proposing a command on the leader to its result (committed and applied).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		snapshotDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kgate_raft_snapshot_duration_seconds",
			Help:    "Time to write one Raft snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kgate_raft_snapshot_size_bytes",
			Help: "Bytes written for the last Raft snapshot this node took: its metadata and references to the segment files it links (records are not copied), or the whole stream when written in full.",
		}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_raft_snapshots_total",
			Help: "Raft snapshots this node wrote, by result (ok, error, superseded: dropped because a snapshot from the leader replaced the state meanwhile).",
		}, []string{"result"}),
	}
	m.rewrittenBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kgate_partition_rewritten_bytes_total",
		Help: "Bytes partitions wrote copying batches they referenced in the Raft log, so that the log could drop the files kept for them (--partition-storage=raft-log).",
	})
	m.snapshots.WithLabelValues("ok")
	m.snapshots.WithLabelValues("error") // present from the start, for alerts
	return m
}

var (
	descRaftState = prometheus.NewDesc("kgate_raft_state",
		"1 for this node's current Raft state (leader, follower, candidate, shutdown).", []string{"state"}, nil)
	descRaftTerm        = prometheus.NewDesc("kgate_raft_term", "Current Raft term.", nil, nil)
	descRaftCommitIndex = prometheus.NewDesc("kgate_raft_commit_index", "Highest Raft log index known committed.", nil, nil)
	descRaftApplied     = prometheus.NewDesc("kgate_raft_applied_index", "Highest Raft log index applied to the state machine.", nil, nil)
	descRaftLastIndex   = prometheus.NewDesc("kgate_raft_last_log_index", "Last index in this node's Raft log.", nil, nil)
	descRaftSnapIndex   = prometheus.NewDesc("kgate_raft_last_snapshot_index", "Raft index of the last snapshot.", nil, nil)
	descLastContact     = prometheus.NewDesc("kgate_raft_last_contact_seconds",
		"Seconds since this follower last heard from the leader (0 on the leader).", nil, nil)
	descLeader = prometheus.NewDesc("kgate_raft_leader",
		"1 while this node is the serving leader (the group coordinator).", nil, nil)
	descHasLeader = prometheus.NewDesc("kgate_raft_has_leader", "1 while this node knows a live leader.", nil, nil)
	descVoters    = prometheus.NewDesc("kgate_raft_voters", "Voters in the Raft configuration.", nil, nil)
	descGossip    = prometheus.NewDesc("kgate_gossip_members",
		"Nodes known to gossip (this one included), by state: alive, suspect, failed, left.", []string{"state"}, nil)
	descPinned = prometheus.NewDesc("kgate_raft_pinned_bytes",
		"Bytes of Raft log files kept past compaction because partitions' references (--partition-storage=raft-log) or snapshots name their entries.", nil, nil)
	descFSMApplied = prometheus.NewDesc("kgate_fsm_applied_index",
		"Raft index the replicated state machine has applied (what the admin API and group reads see).", nil, nil)
)

// Describe implements prometheus.Collector.
func (n *Node) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descRaftTerm, descRaftCommitIndex, descRaftApplied, descRaftLastIndex,
		descRaftSnapIndex, descLastContact, descLeader, descHasLeader, descVoters, descGossip, descFSMApplied, descPinned} {
		ch <- d
	}
	n.metrics.leaderChanges.Describe(ch)
	n.metrics.applyDuration.Describe(ch)
	n.metrics.snapshotDuration.Describe(ch)
	n.metrics.snapshotBytes.Describe(ch)
	n.metrics.snapshots.Describe(ch)
	n.metrics.rewrittenBytes.Describe(ch)
}

// Collect implements prometheus.Collector: Raft's own figures, read now.
func (n *Node) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	state := n.raft.State()
	for _, s := range []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown} {
		gauge(descRaftState, b2f(state == s), lowerState(s))
	}
	stats := n.raft.Stats()
	num := func(k string) float64 {
		v, _ := strconv.ParseUint(stats[k], 10, 64)
		return float64(v)
	}
	gauge(descRaftTerm, num("term"))
	gauge(descRaftCommitIndex, num("commit_index"))
	gauge(descRaftApplied, num("applied_index"))
	gauge(descRaftLastIndex, num("last_log_index"))
	gauge(descRaftSnapIndex, num("last_snapshot_index"))
	var contact float64
	if state != raft.Leader {
		if last := n.raft.LastContact(); !last.IsZero() {
			contact = time.Since(last).Seconds()
		}
	}
	gauge(descLastContact, contact)
	gauge(descLeader, b2f(n.IsLeader()))
	_, has := n.LeaderID()
	gauge(descHasLeader, b2f(has))
	gauge(descVoters, float64(len(n.Voters())))
	counts := map[string]int{"alive": 0, "suspect": 0, "failed": 0, "left": 0}
	for _, m := range n.Members() {
		if _, ok := counts[m.GossipState]; ok {
			counts[m.GossipState]++
		}
	}
	for s, c := range counts {
		gauge(descGossip, float64(c), s)
	}
	gauge(descFSMApplied, float64(n.fsm.Applied()))
	gauge(descPinned, float64(n.store.RetainedBytes()))
	n.metrics.leaderChanges.Collect(ch)
	n.metrics.applyDuration.Collect(ch)
	n.metrics.snapshotDuration.Collect(ch)
	n.metrics.snapshotBytes.Collect(ch)
	n.metrics.snapshots.Collect(ch)
	n.metrics.rewrittenBytes.Collect(ch)
}

func lowerState(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// countingSink counts the bytes of a snapshot as it is written.
type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (s *countingSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	s.n += int64(n)
	return n, err
}
