package iggy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// commandNames label Iggy requests in metrics.
var commandNames = map[uint32]string{
	CodePing: "ping", CodeLegacyLoginUser: "login_user", CodeLogout: "logout", CodeLoginRegister: "login_register",
	CodeLegacyLoginPAT: "login_pat", CodeLoginRegisterPAT: "login_register_pat",
	CodePollMessages: "poll_messages", CodeSendMessages: "send_messages",
	CodeGetConsumerOffset: "get_consumer_offset", CodeStoreConsumerOffset: "store_consumer_offset",
	CodeDeleteConsumerOffset: "delete_consumer_offset", CodeGetStream: "get_stream", CodeGetStreams: "get_streams",
	CodeCreateStream: "create_stream", CodeDeleteStream: "delete_stream", CodeGetTopic: "get_topic",
	CodeGetTopics: "get_topics", CodeCreateTopic: "create_topic", CodeDeleteTopic: "delete_topic",
	CodeUpdateTopic: "update_topic", CodeCreatePartitions: "create_partitions",
}

func commandName(code uint32) string {
	if n, ok := commandNames[code]; ok {
		return n
	}
	return strconv.FormatUint(uint64(code), 10)
}

type metrics struct {
	requests   *prometheus.CounterVec   // command
	errors     *prometheus.CounterVec   // command
	latency    *prometheus.HistogramVec // command
	reconnects *prometheus.CounterVec   // command
	connects   *prometheus.CounterVec   // result
}

func newMetrics() *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_iggy_requests_total",
			Help: "Requests sent to the Iggy server, by command.",
		}, []string{"command"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_iggy_request_errors_total",
			Help: "Iggy requests that failed (server error status, broken connection or timeout), by command.",
		}, []string{"command"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgate_iggy_request_duration_seconds",
			Help:    "Iggy request round trip, by command (waiting for a pooled connection included).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"command"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_iggy_reconnects_total",
			Help: "Times a command found its pooled connection dead and moved to another, by command.",
		}, []string{"command"}),
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_iggy_connects_total",
			Help: "Connections opened to the Iggy server (connect and login), by result (ok, error).",
		}, []string{"result"}),
	}
	// The data path's series exist from the start, so rate() and alerts
	// see the first error rather than the second.
	for _, c := range []uint32{CodeSendMessages, CodePollMessages} {
		m.errors.WithLabelValues(commandName(c))
		m.reconnects.WithLabelValues(commandName(c))
	}
	m.connects.WithLabelValues("error")
	return m
}

var (
	descPool = prometheus.NewDesc("kgate_iggy_pool_connections",
		"Connections to the Iggy server by state: in_use, idle.", []string{"state"}, nil)
	descPoolMax = prometheus.NewDesc("kgate_iggy_pool_max_connections", "Most connections the pool opens (--iggy-connections).", nil, nil)
	descDialect = prometheus.NewDesc("kgate_iggy_dialect",
		"1 for the Iggy protocol dialect in use (current: 0.9+, legacy: 0.7–0.8); none before the first connection.", []string{"dialect"}, nil)
)

// Describe implements prometheus.Collector.
func (cl *Client) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPool
	ch <- descPoolMax
	ch <- descDialect
	for _, c := range cl.metrics.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (cl *Client) Collect(ch chan<- prometheus.Metric) {
	open, idle := len(cl.slots), len(cl.idle)
	ch <- prometheus.MustNewConstMetric(descPool, prometheus.GaugeValue, float64(max(open-idle, 0)), "in_use")
	ch <- prometheus.MustNewConstMetric(descPool, prometheus.GaugeValue, float64(idle), "idle")
	ch <- prometheus.MustNewConstMetric(descPoolMax, prometheus.GaugeValue, float64(cap(cl.slots)))
	if d := cl.Dialect(); d != 0 {
		ch <- prometheus.MustNewConstMetric(descDialect, prometheus.GaugeValue, 1, d.String())
	}
	for _, c := range cl.metrics.collectors() {
		c.Collect(ch)
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.errors, m.latency, m.reconnects, m.connects}
}

func (m *metrics) observe(code uint32, began time.Time, err error) {
	name := commandName(code)
	m.requests.WithLabelValues(name).Inc()
	m.latency.WithLabelValues(name).Observe(time.Since(began).Seconds())
	if err != nil {
		m.errors.WithLabelValues(name).Inc()
	}
}
