package coordinator

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/fsm"
)

// Why a rebalance started, as kgate_group_rebalances_total reports it.
const (
	reasonJoin        = "member_joined" // a new member, or a member with changed metadata
	reasonLeave       = "member_left"   // LeaveGroup
	reasonSession     = "session_expired"
	reasonSyncTimeout = "sync_timeout" // members missed SyncGroup after the join
)

type metrics struct {
	rebalances *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kgate_group_rebalances_total",
		Help: "Rebalances this node started as coordinator, by reason.",
	}, []string{"reason"})}
	for _, r := range []string{reasonJoin, reasonLeave, reasonSession, reasonSyncTimeout} {
		m.rebalances.WithLabelValues(r)
	}
	return m
}

var descParked = prometheus.NewDesc("kgate_group_parked_requests",
	"JoinGroup and SyncGroup requests waiting on the coordinator for their rebalance to complete.", []string{"api"}, nil)

// Describe implements prometheus.Collector.
func (c *Coordinator) Describe(ch chan<- *prometheus.Desc) {
	ch <- descParked
	c.metrics.rebalances.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Coordinator) Collect(ch chan<- prometheus.Metric) {
	var joins, syncs int
	c.mu.Lock()
	for _, sg := range c.groups {
		joins += len(sg.joinWaiters)
		syncs += len(sg.syncWaiters)
	}
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(joins), "JoinGroup")
	ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(syncs), "SyncGroup")
	c.metrics.rebalances.Collect(ch)
}

// proposeChange proposes a command that may start a rebalance of group and
// counts it under reason when it does.
func (c *Coordinator) proposeChange(ctx context.Context, group, reason string, cmd fsm.Command) (*fsm.GroupResult, int16) {
	before := c.fsm.Member(group, "", "")
	res, code := c.propose(ctx, cmd)
	if code == 0 && (!before.GroupFound || before.State != fsm.GroupPreparingRebalance) {
		if after := c.fsm.Member(group, "", ""); after.GroupFound && after.State == fsm.GroupPreparingRebalance {
			c.metrics.rebalances.WithLabelValues(reason).Inc()
		}
	}
	return res, code
}
