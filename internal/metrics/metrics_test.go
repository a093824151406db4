package metrics

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The SDK's handler: counters end in _total, timers are histograms in seconds, one name
// may carry different tags in different places, and the per-process system task queue
// is not a label value.
func TestTemporalHandler(t *testing.T) {
	t.Parallel()
	m := New()
	root := m.Temporal().WithTags(map[string]string{"namespace": "default", "client_name": "temporal_go"})
	wf := root.WithTags(map[string]string{"workflow_type": "OrderLifecycle", "task_queue": "treasury"})
	wf.Counter("temporal_workflow_completed").Inc(2)
	wf.Timer("temporal_workflow_endtoend_latency").Record(1500 * time.Millisecond)
	act := wf.WithTags(map[string]string{"activity_type": "BroadcastLeg"})
	act.Counter("temporal_activity_execution_failed").Inc(1)
	act.Timer("temporal_activity_execution_latency").Record(20 * time.Millisecond)
	// The same name with fewer tags, as the SDK reports some of its counters.
	root.Counter("temporal_workflow_completed").Inc(1)
	root.WithTags(map[string]string{"task_queue": "temporal-sys/worker-commands/default/0192f7a8c3d1"}).Gauge("temporal_num_pollers").Update(2)
	root.WithTags(map[string]string{"bad-tag": "x"}).Counter("custom.metric-name").Inc(1)
	root.Counter("temporal_local_activity_total").Inc(3)

	const wfLabels = `client_name="temporal_go",namespace="default",task_queue="treasury",workflow_type="OrderLifecycle"`
	got := series(t, m)
	for key, want := range map[string]float64{
		`temporal_workflow_completed_total{client_name="temporal_go",namespace="default"}`:              1,
		`temporal_workflow_completed_total{` + wfLabels + `}`:                                           2,
		`temporal_workflow_endtoend_latency_seconds{` + wfLabels + `}`:                                  1,
		`temporal_activity_execution_failed_total{activity_type="BroadcastLeg",` + wfLabels + `}`:       1,
		`temporal_activity_execution_latency_seconds{activity_type="BroadcastLeg",` + wfLabels + `}`:    1,
		`temporal_num_pollers{client_name="temporal_go",namespace="default",task_queue="temporal-sys"}`: 2,
		`custom_metric_name_total{bad_tag="x",client_name="temporal_go",namespace="default"}`:           1,
		`temporal_local_activity_total{client_name="temporal_go",namespace="default"}`:                  3,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	for key := range got {
		if strings.Contains(key, "worker-commands") {
			t.Errorf("a per-process task queue is a label value: %s", key)
		}
	}
	// Served whole: families whose series carry different labels are fine.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", Path, nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `temporal_activity_execution_latency_seconds_bucket{activity_type="BroadcastLeg"`) {
		t.Fatalf("GET /metrics: %d\n%s", rec.Code, rec.Body.String())
	}
}

// Label values come from fixed sets, whatever a client sends.
func TestLabelsAreBounded(t *testing.T) {
	t.Parallel()
	m := New()
	m.HTTPRequest("", "BREW", 418, time.Millisecond)
	m.HTTPRequest("/api/v1/payments/:id", "GET", 200, time.Millisecond)
	m.HTTPRequest("/api/v1/payments/:id", "GET", 999, time.Millisecond)
	m.WatchLive(func() LiveStats {
		return LiveStats{Connections: 2, FramesSent: 7, Closes: map[int]uint64{1000: 1, 4008: 2, 4321: 3, 4999: 1, 1006: 1}}
	})
	m.WatchLive(func() LiveStats { return LiveStats{Connections: 1, FramesSent: 1} })
	got := series(t, m)
	want := map[string]float64{
		`treasury_http_requests_total{method="GET",route="/api/v1/payments/:id",status="200"}`:   1,
		`treasury_http_requests_total{method="GET",route="/api/v1/payments/:id",status="other"}`: 1,
		`treasury_http_requests_total{method="other",route="unmatched",status="418"}`:            1,
		`treasury_http_request_duration_seconds{method="GET",route="/api/v1/payments/:id"}`:      2,
		`treasury_http_request_duration_seconds{method="other",route="unmatched"}`:               1,
		`treasury_websocket_connections{}`:                                                       3,
		`treasury_websocket_frames_sent_total{}`:                                                 8,
		`treasury_websocket_closes_total{code="1000"}`:                                           1,
		`treasury_websocket_closes_total{code="1006"}`:                                           1,
		`treasury_websocket_closes_total{code="4008"}`:                                           2,
		`treasury_websocket_closes_total{code="other"}`:                                          4,
	}
	for key, v := range want {
		if got[key] != v {
			t.Errorf("%s = %v, want %v", key, got[key], v)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, "treasury_") && want[key] == 0 && got[key] != 0 {
			t.Errorf("unexpected series %s", key)
		}
	}
}

// A nil *Metrics counts nothing and never panics: packages need not check.
func TestNilMetrics(t *testing.T) {
	t.Parallel()
	var m *Metrics
	m.HTTPRequest("/x", "GET", 200, time.Second)
	m.EventsCommitted([]string{"Order.Created"})
	m.WebhookAttempt(WebhookSucceeded, time.Second)
	m.IdempotencyReplay()
	m.RateLimited(LimiterCredential)
	m.WatchLive(func() LiveStats { return LiveStats{} })
	if m.Temporal() != nil {
		t.Fatal("a nil Metrics gives a Temporal handler")
	}
}

// series gathers m into `name{label="value",…}` → value, labels sorted; a histogram's
// value is its count.
func series(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			sort.Strings(labels)
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case mt.Counter != nil:
				out[key] = mt.GetCounter().GetValue()
			case mt.Gauge != nil:
				out[key] = mt.GetGauge().GetValue()
			case mt.Histogram != nil:
				out[key] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
