package admin

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/internal/version"
)

// scrapeOffsetsTimeout bounds the high-watermark reads of one scrape.
const scrapeOffsetsTimeout = 3 * time.Second

var (
	descBuildInfo = prometheus.NewDesc("kgate_build_info",
		"Always 1; the labels name the running build.", []string{"version", "goversion", "commit"}, nil)
	descGroups = prometheus.NewDesc("kgate_groups",
		"Consumer groups by state, as this node has applied them.", []string{"state"}, nil)
	descGroupMembers = prometheus.NewDesc("kgate_group_members",
		"Members of a consumer group.", []string{"group"}, nil)
	descGroupGeneration = prometheus.NewDesc("kgate_group_generation",
		"Generation of a consumer group (each completed rebalance adds one).", []string{"group"}, nil)
	descCommitted = prometheus.NewDesc("kgate_group_committed_offset",
		"A group's committed offset of a partition.", []string{"group", "topic", "partition"}, nil)
	descLag = prometheus.NewDesc("kgate_group_lag",
		"Records a group has not committed yet: high watermark minus committed offset (never below 0).",
		[]string{"group", "topic", "partition"}, nil)
)

// stateCollector reads groups, committed offsets and high watermarks at
// scrape time, so the figures are never stale and nothing is counted twice.
type stateCollector struct {
	state   *fsm.FSM
	backend gateway.Backend
}

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuildInfo, descGroups, descGroupMembers, descGroupGeneration, descCommitted, descLag} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	v := version.Get()
	gauge(descBuildInfo, 1, v.Version, v.GoVersion, v.Commit)

	ctx, cancel := context.WithTimeout(context.Background(), scrapeOffsetsTimeout)
	defer cancel()
	byState := map[fsm.GroupState]int{}
	hws := map[fsm.TopicPartition]int64{} // each partition read once per scrape
	for _, s := range c.state.Groups() {
		g := c.state.Group(s.ID)
		if g == nil {
			continue
		}
		byState[g.State]++
		gauge(descGroupMembers, float64(len(g.Members)), g.ID)
		gauge(descGroupGeneration, float64(g.Generation), g.ID)
		committed, _ := c.state.CommittedOffsets(g.ID)
		for tp, o := range committed {
			p := strconv.Itoa(int(tp.Partition))
			gauge(descCommitted, float64(o.Offset), g.ID, tp.Topic, p)
			hw, ok := hws[tp]
			if !ok {
				hw = -1
				if _, end, err := c.backend.Offsets(ctx, tp.Topic, tp.Partition); err == nil {
					hw = end
				}
				hws[tp] = hw
			}
			if hw >= 0 {
				gauge(descLag, float64(max(hw-o.Offset, 0)), g.ID, tp.Topic, p)
			}
		}
	}
	for _, st := range []fsm.GroupState{fsm.GroupEmpty, fsm.GroupPreparingRebalance, fsm.GroupCompletingRebalance, fsm.GroupStable, fsm.GroupDead} {
		gauge(descGroups, float64(byState[st]), st.String())
	}
}

func metricsHandler(reg *prometheus.Registry, log func(msg string, args ...any)) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, // a failing collector must not blank the whole scrape
		ErrorLog:      promLogger(log),
		Registry:      reg, // promhttp_metric_handler_errors_total
	})
}

type promLogger func(msg string, args ...any)

func (l promLogger) Println(v ...any) { l("metrics", "err", v) }
