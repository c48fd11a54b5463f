package gateway

import (
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metrics are the Kafka listener's counters. Every request is counted at
// one point, when its answer is ready (conn.start hands the observer to the
// writer); everything else is read from the server when scraped.
type metrics struct {
	requests  *prometheus.CounterVec   // api, version
	errors    *prometheus.CounterVec   // api, version, error
	latency   *prometheus.HistogramVec // api
	bytesIn   *prometheus.CounterVec   // topic
	bytesOut  *prometheus.CounterVec   // topic
	forwarded *prometheus.CounterVec   // api, result
	accepted  prometheus.Counter
	refused   prometheus.Counter
	cutOff    prometheus.Counter
	// parkedFetches counts fetches waiting for data (long poll).
	parkedFetches atomic.Int64
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_kafka_requests_total",
			Help: "Kafka requests answered (or, for acks=0 produce, taken), by API and version.",
		}, []string{"api", "version"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_kafka_request_errors_total",
			Help: "Error codes in Kafka responses (one per partition, group or topic that got one), by API, version and error.",
		}, []string{"api", "version", "error"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kgate_kafka_request_duration_seconds",
			Help: "Time from a request's arrival to its answer being ready, by API (long-poll fetches and parked joins included).",
			// 100 µs .. 26 s
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"api"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_kafka_bytes_in_total",
			Help: "Record batch bytes accepted by Produce, by topic.",
		}, []string{"topic"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_kafka_bytes_out_total",
			Help: "Record batch bytes sent in Fetch responses, by topic.",
		}, []string{"topic"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_kafka_forwarded_requests_total",
			Help: "Leader-only requests this follower forwarded to the leader, by API and result (ok, error).",
		}, []string{"api", "result"}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_kafka_connections_accepted_total",
			Help: "Kafka connections accepted.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_kafka_connections_refused_total",
			Help: "Kafka connections closed at once because --max-connections were open.",
		}),
		cutOff: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_kafka_connections_reset_cut_off_total",
			Help: "Kafka connections reset instead of answered \"no leader\": the node had known no leader for the cut-off time.",
		}),
	}
}

var (
	descConns       = prometheus.NewDesc("kgate_kafka_connections", "Open Kafka client connections.", nil, nil)
	descParkedFetch = prometheus.NewDesc("kgate_kafka_parked_fetches",
		"Fetch requests waiting for data (max.wait.ms long poll).", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	ch <- descConns
	ch <- descParkedFetch
	for _, c := range s.metrics.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(conns))
	ch <- prometheus.MustNewConstMetric(descParkedFetch, prometheus.GaugeValue, float64(s.metrics.parkedFetches.Load()))
	for _, c := range s.metrics.collectors() {
		c.Collect(ch)
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.errors, m.latency, m.bytesIn, m.bytesOut, m.forwarded, m.accepted, m.refused, m.cutOff}
}

// versionLabels avoids formatting a version per request.
var versionLabels = func() [32]string {
	var out [32]string
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

func versionLabel(v int16) string {
	if v >= 0 && int(v) < len(versionLabels) {
		return versionLabels[v]
	}
	return strconv.Itoa(int(v))
}

// observer returns what to call with a request's response (nil when there
// is none: acks=0) once it is ready.
func (s *Server) observer(r *Request) func(kmsg.Response) {
	began := time.Now()
	return func(resp kmsg.Response) {
		m := s.metrics
		api := kmsg.NameForKey(r.Key)
		version := versionLabel(r.Version)
		m.requests.WithLabelValues(api, version).Inc()
		m.latency.WithLabelValues(api).Observe(time.Since(began).Seconds())
		if resp != nil {
			eachErrorCode(resp, func(code int16) {
				m.errors.WithLabelValues(api, version, errorName(code)).Inc()
			})
		}
		switch req := r.Body.(type) {
		case *kmsg.ProduceRequest:
			s.countProduced(req, resp)
		case *kmsg.FetchRequest:
			if fr, ok := resp.(*kmsg.FetchResponse); ok {
				s.countFetched(fr)
			}
		}
	}
}

func errorName(code int16) string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return strconv.Itoa(int(code))
}

// countProduced adds the bytes of every partition batch the response
// accepted (all of them for acks=0).
func (s *Server) countProduced(req *kmsg.ProduceRequest, resp kmsg.Response) {
	var failed map[string]map[int32]bool
	if pr, ok := resp.(*kmsg.ProduceResponse); ok {
		for _, t := range pr.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					if failed == nil {
						failed = map[string]map[int32]bool{}
					}
					if failed[t.Topic] == nil {
						failed[t.Topic] = map[int32]bool{}
					}
					failed[t.Topic][p.Partition] = true
				}
			}
		}
	}
	for _, t := range req.Topics {
		n := 0
		for _, p := range t.Partitions {
			if !failed[t.Topic][p.Partition] {
				n += len(p.Records)
			}
		}
		if n > 0 {
			s.metrics.bytesIn.WithLabelValues(t.Topic).Add(float64(n))
		}
	}
}

func (s *Server) countFetched(resp *kmsg.FetchResponse) {
	for _, t := range resp.Topics {
		n := 0
		for _, p := range t.Partitions {
			n += len(p.RecordBatches)
		}
		if n == 0 {
			continue
		}
		name := t.Topic
		if name == "" { // Fetch v13+ names topics by id
			name, _ = s.backend.TopicName(t.TopicID)
		}
		s.metrics.bytesOut.WithLabelValues(name).Add(float64(n))
	}
}

// eachErrorCode calls fn with every non-zero int16 field named ErrorCode in
// resp, at any depth. The fields to visit are worked out once per type.
func eachErrorCode(resp kmsg.Response, fn func(int16)) {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	v = v.Elem()
	walkCodes(v, planFor(v.Type()), fn)
}

// codePlan says where ErrorCode fields are in a struct type: the field
// indexes of codes, and of slices/structs that lead to more.
type codePlan struct {
	codes  []int
	nested []nestedField
}

type nestedField struct {
	index int
	slice bool
	plan  *codePlan
}

var codePlans sync.Map // reflect.Type -> *codePlan (nil plan: no codes inside)

func planFor(t reflect.Type) *codePlan {
	if p, ok := codePlans.Load(t); ok {
		return p.(*codePlan)
	}
	p := buildPlan(t, map[reflect.Type]bool{})
	codePlans.Store(t, p)
	return p
}

func buildPlan(t reflect.Type, seen map[reflect.Type]bool) *codePlan {
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	p := &codePlan{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		switch {
		case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
			p.codes = append(p.codes, i)
		case f.Type.Kind() == reflect.Struct:
			if sub := buildPlan(f.Type, seen); sub != nil {
				p.nested = append(p.nested, nestedField{index: i, plan: sub})
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			if sub := buildPlan(f.Type.Elem(), seen); sub != nil {
				p.nested = append(p.nested, nestedField{index: i, slice: true, plan: sub})
			}
		}
	}
	if len(p.codes) == 0 && len(p.nested) == 0 {
		return nil
	}
	return p
}

func walkCodes(v reflect.Value, p *codePlan, fn func(int16)) {
	if p == nil {
		return
	}
	for _, i := range p.codes {
		if c := int16(v.Field(i).Int()); c != 0 {
			fn(c)
		}
	}
	for _, n := range p.nested {
		f := v.Field(n.index)
		if !n.slice {
			walkCodes(f, n.plan, fn)
			continue
		}
		for j := 0; j < f.Len(); j++ {
			walkCodes(f.Index(j), n.plan, fn)
		}
	}
}
