package metrics

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// Temporal is the handler the Temporal SDK reports to, for client.Options.MetricsHandler:
// workflow and activity outcomes and latencies, pollers, task slots, and the client's
// requests to the frontend, all named temporal_… with the SDK's tags as labels (namespace,
// task_queue, workflow_type, activity_type, operation, …). Counters take the suffix
// _total (unless they have it) and timers become histograms in seconds named
// …_seconds, as the Java SDK names them for Prometheus. A nil *Metrics gives nil: the SDK's default, which counts nothing.
func (m *Metrics) Temporal() client.MetricsHandler {
	if m == nil {
		return nil
	}
	return temporalHandler{c: m.temporal}
}

// temporalBuckets span a poll's milliseconds to a workflow's hours.
var temporalBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600}

// temporalHandler is the SDK's view: a set of tags, and the series they name.
type temporalHandler struct {
	c    *temporalCollector
	tags map[string]string // never modified: WithTags copies
}

func (h temporalHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return temporalHandler{c: h.c, tags: merged}
}

func (h temporalHandler) Counter(name string) client.MetricsCounter {
	v := h.c.vec(kindCounter, name, h.tags)
	c := v.counter.With(v.labels(h.tags))
	return counterFunc(func(d int64) {
		if d > 0 {
			c.Add(float64(d))
		}
	})
}

func (h temporalHandler) Gauge(name string) client.MetricsGauge {
	v := h.c.vec(kindGauge, name, h.tags)
	return gaugeFunc(v.gauge.With(v.labels(h.tags)).Set)
}

func (h temporalHandler) Timer(name string) client.MetricsTimer {
	v := h.c.vec(kindTimer, name, h.tags)
	o := v.timer.With(v.labels(h.tags))
	return timerFunc(func(d time.Duration) { o.Observe(d.Seconds()) })
}

type (
	counterFunc func(int64)
	gaugeFunc   func(float64)
	timerFunc   func(time.Duration)
)

func (f counterFunc) Inc(d int64)          { f(d) }
func (f gaugeFunc) Update(v float64)       { f(v) }
func (f timerFunc) Record(d time.Duration) { f(d) }

type metricKind int

const (
	kindCounter metricKind = iota
	kindGauge
	kindTimer
)

// temporalCollector holds a vector per metric name and set of tag names: the SDK gives
// one name different tags in different places, and Prometheus takes a family whose
// series carry different labels as long as the collector does not describe them up front.
type temporalCollector struct {
	mu   sync.RWMutex
	vecs map[string]*temporalVec
}

type temporalVec struct {
	names   []string // label names, sorted
	counter *prometheus.CounterVec
	gauge   *prometheus.GaugeVec
	timer   *prometheus.HistogramVec
}

func newTemporalCollector() *temporalCollector {
	return &temporalCollector{vecs: map[string]*temporalVec{}}
}

// Describe describes nothing: the series appear as the SDK reports them.
func (c *temporalCollector) Describe(chan<- *prometheus.Desc) {}

func (c *temporalCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	vecs := make([]*temporalVec, 0, len(c.vecs))
	for _, v := range c.vecs {
		vecs = append(vecs, v)
	}
	c.mu.RUnlock()
	for _, v := range vecs {
		switch {
		case v.counter != nil:
			v.counter.Collect(ch)
		case v.gauge != nil:
			v.gauge.Collect(ch)
		default:
			v.timer.Collect(ch)
		}
	}
}

// vec returns the vector of a metric of a kind with these tag names, making it the first time.
func (c *temporalCollector) vec(kind metricKind, name string, tags map[string]string) *temporalVec {
	names := make([]string, 0, len(tags))
	for k := range tags {
		names = append(names, sanitize(k))
	}
	sort.Strings(names)
	name = sanitize(name)
	switch {
	case kind == kindCounter && !strings.HasSuffix(name, "_total"):
		name += "_total"
	case kind == kindTimer:
		name += "_seconds"
	}
	key := name + "{" + strings.Join(names, ",")
	c.mu.RLock()
	v := c.vecs[key]
	c.mu.RUnlock()
	if v != nil {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.vecs[key]; v != nil {
		return v
	}
	v = &temporalVec{names: names}
	help := "Temporal SDK metric " + name + "."
	switch kind {
	case kindCounter:
		v.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, names)
	case kindGauge:
		v.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, names)
	default:
		v.timer = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: temporalBuckets}, names)
	}
	c.vecs[key] = v
	return v
}

// labels are the tags as the vector's labels. A system task queue of the SDK's own
// (temporal-sys/…) is named per process: it is reported as "temporal-sys", so that no
// label carries a process's key.
func (v *temporalVec) labels(tags map[string]string) prometheus.Labels {
	out := make(prometheus.Labels, len(tags))
	for k, val := range tags {
		k = sanitize(k)
		if k == "task_queue" && strings.HasPrefix(val, "temporal-sys/") {
			val = "temporal-sys"
		}
		out[k] = val
	}
	return out
}

// sanitize makes a Prometheus metric or label name: anything but letters, digits and
// underscores becomes an underscore, and a leading digit gets one in front.
func sanitize(s string) string {
	ok := s != ""
	for i, r := range s {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		b.WriteByte('_')
	}
	for _, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
