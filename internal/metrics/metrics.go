// Package metrics owns the Prometheus collectors of one process and serves them: the
// places that count (the API's middleware, the webhook dispatcher, the store's commit
// hook, the live channel, the Temporal SDK) are handed a *Metrics and call its methods,
// and know nothing of Prometheus. Each process makes its own registry (New), so tests
// can run side by side; a nil *Metrics counts nothing.
//
// Labels never carry ids, keys, tokens or raw URLs: routes are the router's templates,
// methods, statuses, event names and outcomes come from fixed sets. docs/metrics.md
// lists every series.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where a metrics server answers.
const Path = "/metrics"

// Outcomes of a webhook delivery attempt.
const (
	// WebhookSucceeded: the receiver answered 2xx.
	WebhookSucceeded = "succeeded"
	// WebhookRedirected, WebhookClientError, WebhookServerError: the receiver answered
	// 3xx (never followed), 4xx or 5xx (or another non-2xx status).
	WebhookRedirected  = "status_3xx"
	WebhookClientError = "status_4xx"
	WebhookServerError = "status_5xx"
	// WebhookUnreachable: no answer (refused address, connection, TLS, timeout).
	WebhookUnreachable = "unreachable"
	// WebhookNotSent: the request could not be made (secret unreadable, bad URL).
	WebhookNotSent = "not_sent"
	// WebhookAbandoned: the process stopped during the send; the delivery is sent again.
	WebhookAbandoned = "abandoned"
	// WebhookThrottled: the receiver answered 429 or 503 with Retry-After; the next attempt
	// waits as asked, and this one is no failure.
	WebhookThrottled = "throttled"
)

// Limiters whose refusals are counted.
const (
	// LimiterCredential is the API's limit per key, OAuth token or session.
	LimiterCredential = "credential"
	// LimiterConsole is the console's limit per client address.
	LimiterConsole = "console"
	// LimiterSignIn is the bound on failed sign-ins and wrong passwords.
	LimiterSignIn = "sign_in"
	// LimiterRPC is each app's budget of JSON-RPC calls.
	LimiterRPC = "rpc"
)

// Metrics holds the collectors of one process. Its methods are safe for concurrent use
// and do nothing on a nil *Metrics.
type Metrics struct {
	registry *prometheus.Registry

	httpRequests       *prometheus.CounterVec
	httpDuration       *prometheus.HistogramVec
	eventsCommitted    *prometheus.CounterVec
	webhookAttempts    *prometheus.CounterVec
	webhookDuration    *prometheus.HistogramVec
	webhooksDisabled   prometheus.Counter
	idempotencyReplays prometheus.Counter
	rateLimited        *prometheus.CounterVec
	live               *liveCollector
	temporal           *temporalCollector
}

// latencyBuckets suit requests and webhook sends: 5 ms to 30 s.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// New makes the collectors of a process on a registry of their own, with the Go
// runtime's and the process's.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "treasury_http_requests_total",
			Help: "HTTP requests answered, by route template (unmatched when no route matched), method and status.",
		}, []string{"route", "method", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "treasury_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route template and method.",
			Buckets: latencyBuckets,
		}, []string{"route", "method"}),
		eventsCommitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "treasury_events_committed_total",
			Help: "Events committed to the outbox by this process, by event name.",
		}, []string{"event"}),
		webhookAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "treasury_webhook_delivery_attempts_total",
			Help: "Webhook delivery attempts, by outcome.",
		}, []string{"outcome"}),
		webhookDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "treasury_webhook_delivery_duration_seconds",
			Help:    "Time of a webhook delivery attempt, from signing to the receiver's answer read, by outcome.",
			Buckets: latencyBuckets,
		}, []string{"outcome"}),
		webhooksDisabled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "treasury_webhooks_disabled_total",
			Help: "Webhooks the dispatcher disabled after every attempt failed for the failing window.",
		}),
		idempotencyReplays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "treasury_idempotency_replays_total",
			Help: "Writes answered with the stored response of an earlier request with the same Idempotency-Key.",
		}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "treasury_rate_limit_refusals_total",
			Help: "Requests refused by a rate limit (429), by limiter: credential, console, sign_in or rpc.",
		}, []string{"limiter"}),
		live:     newLiveCollector(),
		temporal: newTemporalCollector(),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpDuration, m.eventsCommitted, m.webhookAttempts, m.webhookDuration,
		m.webhooksDisabled, m.idempotencyReplays, m.rateLimited, m.live, m.temporal,
	)
	return m
}

// Gatherer is the process's registry, for tests and for serving.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.registry }

// Handler serves the registry in the Prometheus text (or OpenMetrics) format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		// A collector's failure leaves its series out; the others are still served.
		ErrorHandling:     promhttp.ContinueOnError,
		Timeout:           10 * time.Second,
		EnableOpenMetrics: true,
	})
}

// httpMethods are the methods counted by name; any other is "other".
var httpMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

func statusLabel(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status)
}

// HTTPRequest counts an answered request. route is the router's template (Gin's
// FullPath), never the request's path; "" means no route matched.
func (m *Metrics) HTTPRequest(route, method string, status int, took time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	if !httpMethods[method] {
		method = "other"
	}
	m.httpRequests.WithLabelValues(route, method, statusLabel(status)).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(took.Seconds())
}

// EventsCommitted counts the events of a committed transaction, by name.
func (m *Metrics) EventsCommitted(names []string) {
	if m == nil {
		return
	}
	for _, name := range names {
		m.eventsCommitted.WithLabelValues(name).Inc()
	}
}

// WebhookAttempt counts a delivery attempt with its outcome (one of the Webhook
// constants) and how long it took.
func (m *Metrics) WebhookAttempt(outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.webhookAttempts.WithLabelValues(outcome).Inc()
	m.webhookDuration.WithLabelValues(outcome).Observe(took.Seconds())
}

// WebhooksDisabled counts webhooks the dispatcher disabled.
func (m *Metrics) WebhooksDisabled(n int) {
	if m == nil {
		return
	}
	m.webhooksDisabled.Add(float64(n))
}

// IdempotencyReplay counts a write answered from its Idempotency-Key's stored response.
func (m *Metrics) IdempotencyReplay() {
	if m == nil {
		return
	}
	m.idempotencyReplays.Inc()
}

// RateLimited counts a refusal by a limiter (one of the Limiter constants).
func (m *Metrics) RateLimited(limiter string) {
	if m == nil {
		return
	}
	m.rateLimited.WithLabelValues(limiter).Inc()
}
