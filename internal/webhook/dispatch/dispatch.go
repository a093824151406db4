// Package dispatch delivers webhook messages: it leases the deliveries that are due from
// the store, sends each from a bounded pool of senders (a few at a time per endpoint),
// signs them, records every attempt, and schedules the retries. Any number of worker
// processes may run one against the same database: a lease keeps a delivery to one of
// them, and one that dies mid-send leaves it to be sent again once its lease ends.
//
// Read dispatch.go first (the loop and a send), then schedule.go (when to try again) and
// guard.go (where webhooks may be sent).
package dispatch

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/webhook"
)

// Store is what the dispatcher needs of the store: leases on due deliveries, the configs
// they go to, and the record of each attempt (*store.Store).
type Store interface {
	LeaseWebhookDeliveries(ctx context.Context, worker string, now, until time.Time, limit int, skip ...string) ([]store.WebhookDelivery, error)
	ReleaseWebhookLeases(ctx context.Context, worker string) error
	ReleaseWebhookDeliveries(ctx context.Context, worker string, deliveryIDs []string) error
	NextWebhookDue(ctx context.Context, now time.Time) (*time.Time, error)
	WebhookConfigsByID(ctx context.Context, ids []string) (map[string]*store.WebhookConfig, error)
	RecordWebhookAttempts(ctx context.Context, outcomes []store.AttemptOutcome, disableBefore time.Time, reason string) ([]store.DisabledWebhook, error)
}

// Options configure a dispatcher. Zero values take the defaults in brackets.
type Options struct {
	Store Store
	// Box opens the configs' sealed secrets.
	Box *webhook.Box
	Log *slog.Logger
	// Guard says where webhooks may be sent.
	Guard webhook.Guard
	// Senders bounds the sends in flight [64]; PerEndpoint bounds them per config [16]. A
	// config holds at most twice PerEndpoint leased deliveries, so with PerEndpoint at most
	// a quarter of Senders an endpoint that hangs leaves half the senders to the others.
	Senders, PerEndpoint int
	// Timeout bounds one send [10 s].
	Timeout time.Duration
	// Lease is how long a leased delivery is this worker's alone [60 s]: longer than a
	// delivery can wait for a sender plus a send.
	Lease time.Duration
	// Poll is how often the store is asked for due deliveries when nothing wakes the
	// dispatcher [1 s].
	Poll time.Duration
	// Schedule is when to try again [the Svix schedule, at scale 1].
	Schedule Schedule
	// Settle is how long the dispatcher lets work gather before it writes [100 ms]: after a
	// wake-up before it leases, after an outcome before it records. Each is a write
	// transaction, and on SQLite every write takes the database's one lock, which the
	// order steps need too.
	Settle time.Duration
	// MaxRetryAfter caps how long a receiver's Retry-After may hold a delivery back [1 h].
	MaxRetryAfter time.Duration
	// Now is the clock [time.Now].
	Now func() time.Time
	// Metrics counts the attempts by outcome [nothing].
	Metrics *metrics.Metrics
}

// maxResponseRead is how much of a receiver's answer is read; responseKept how much of it
// is recorded with the attempt.
const (
	maxResponseRead = 64 << 10
	responseKept    = 2 << 10
)

// maxThrottles is how many attempts of one delivery a receiver may answer with
// Retry-After before the next such answer counts as a failure: a receiver that only ever
// asks for later must still end up failed, not held for ever.
const maxThrottles = 50

// disabledReason is what the owner sees on a config the dispatcher disabled.
const disabledReason = "every delivery to this URL has failed for 5 days; fix the endpoint and enable the webhook again"

// Dispatcher delivers the webhook messages of one worker process.
type Dispatcher struct {
	opts   Options
	worker string
	client *http.Client
	wake   chan struct{}
}

// New builds a dispatcher; Run starts it.
func New(opts Options) *Dispatcher {
	if opts.Senders <= 0 {
		opts.Senders = 64
	}
	if opts.PerEndpoint <= 0 {
		opts.PerEndpoint = 16
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Lease <= 0 {
		opts.Lease = time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Schedule.Scale <= 0 {
		opts.Schedule.Scale = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Settle <= 0 {
		opts.Settle = 100 * time.Millisecond
	}
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = time.Hour
	}
	transport := &http.Transport{
		// No proxy: a proxy would dial the address the guard never saw.
		Proxy:                 nil,
		DialContext:           opts.Guard.DialContext,
		MaxIdleConnsPerHost:   opts.PerEndpoint,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   opts.Timeout,
		ResponseHeaderTimeout: opts.Timeout,
	}
	return &Dispatcher{opts: opts, worker: ids.New("wkr"), wake: make(chan struct{}, 1),
		client: &http.Client{Transport: transport, Timeout: opts.Timeout,
			// A redirect is an answer like any other non-2xx: it is not followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Wake makes the dispatcher look for due deliveries now.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Subscriber wakes the dispatcher when events are committed (each may have queued
// deliveries) and when another process queued a test message or a redelivery.
func (d *Dispatcher) Subscriber() events.Subscriber { return subscriber{d} }

type subscriber struct{ d *Dispatcher }

// Wants: the dispatcher reads no events; it is woken (Committed) and leases deliveries.
func (s subscriber) Wants() bool                            { return false }
func (s subscriber) Events(context.Context, []events.Event) {}
func (s subscriber) Resynced(context.Context)               { s.d.Wake() }
func (s subscriber) Committed()                             { s.d.Wake() }
func (s subscriber) Control(_ context.Context, c *events.Control) {
	if c.Kind == events.ControlWebhooksQueued {
		s.d.Wake()
	}
}

// job is one leased delivery on its way; wait is how long its config's rate limit holds
// it before it is sent.
type job struct {
	delivery store.WebhookDelivery
	config   *store.WebhookConfig
	wait     time.Duration
}

// Run delivers until ctx ends: lease what is due and fits the free senders, send, record.
// Sends cut short by the end of ctx record nothing: their leases are given back, and
// another worker (or this one, restarted) sends them again.
func (d *Dispatcher) Run(ctx context.Context) {
	outcomes := make(chan store.AttemptOutcome, d.opts.Senders)
	recorded := make(chan struct{})
	go func() { defer close(recorded); d.record(outcomes) }()
	defer func() {
		close(outcomes)
		<-recorded
		d.release()
	}()
	s := &scheduler{d: d, ctx: ctx, done: make(chan result, d.opts.Senders), outcomes: outcomes,
		perConfig: map[string]int{}, waiting: map[string][]job{}, rates: rateLimits{}}
	// When to lease. Every lease is a write, so the dispatcher does not lease for each
	// commit it hears of: a wake-up plans a lease Settle later, gathering a burst of
	// events into one. A lease that came back full says more is due: the next one follows
	// as soon as a quarter of the senders are free.
	batch := max(1, d.opts.Senders/4)
	leaseAt := d.opts.Now()
	more := false
	for {
		if len(s.giveBack) > 0 {
			d.giveBack(ctx, s.giveBack)
			s.giveBack = s.giveBack[:0]
		}
		now := d.opts.Now()
		free := d.opts.Senders - s.held()
		if free > 0 && ((!leaseAt.IsZero() && !now.Before(leaseAt)) || (more && free >= batch)) {
			leaseAt, more = time.Time{}, s.lease(now, free) == free
		}
		timer := time.NewTimer(s.wait(now, leaseAt, more))
		select {
		case r := <-s.done:
			s.finish(r)
		case <-d.wake:
			if leaseAt.IsZero() {
				leaseAt = d.opts.Now().Add(d.opts.Settle)
			}
		case <-timer.C:
			if leaseAt.IsZero() {
				leaseAt = d.opts.Now()
			}
		case <-ctx.Done():
			for s.inFlight > 0 {
				s.finish(<-s.done)
			}
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// scheduler is the state of one Run: the sends in flight and queued per config, the
// configs' rate limits, and the leases to give back.
type scheduler struct {
	d        *Dispatcher
	ctx      context.Context
	done     chan result
	outcomes chan<- store.AttemptOutcome
	inFlight int
	// perConfig counts each config's sends in flight; waiting queues the jobs leased for
	// a config already at PerEndpoint sends.
	perConfig map[string]int
	waiting   map[string][]job
	rates     rateLimits
	giveBack  []string
}

// lease leases up to free deliveries and starts, queues or gives back each; it returns
// how many it leased. A config with as many sends as it may have is left out of the
// lease, so that a slow endpoint's backlog never takes the senders from the others; so is
// one whose rate limit has no message to spare now.
func (s *scheduler) lease(now time.Time, free int) int {
	full := s.rates.spent(now)
	for id, n := range s.perConfig {
		if n+len(s.waiting[id]) >= s.d.opts.PerEndpoint {
			full = append(full, id)
		}
	}
	jobs := s.d.lease(s.ctx, free, full)
	for _, j := range jobs {
		id := j.config.ID
		switch {
		case s.perConfig[id] < s.d.opts.PerEndpoint:
			s.start(j)
		case len(s.waiting[id]) < s.d.opts.PerEndpoint:
			s.waiting[id] = append(s.waiting[id], j)
		default:
			// One config holds at most twice its sends in flight, so that a slow
			// endpoint's backlog leaves the other senders to the other endpoints.
			s.giveBack = append(s.giveBack, j.delivery.ID)
		}
	}
	return len(jobs)
}

// start sends a job once its config's rate limit lets it, or gives it back (false) when
// that turn would leave too little of its lease for the send.
func (s *scheduler) start(j job) bool {
	now := s.d.opts.Now()
	within := s.d.opts.Lease / 2
	if until := j.delivery.LeaseUntil; until != nil {
		within = until.Sub(now) - s.d.opts.Timeout
	}
	var ok bool
	if j.wait, ok = s.rates.reserve(j.config, now, within); !ok {
		// Another lease takes it up when its turn is nearer.
		s.giveBack = append(s.giveBack, j.delivery.ID)
		return false
	}
	s.inFlight++
	s.perConfig[j.config.ID]++
	go func() { s.done <- s.d.send(s.ctx, j) }()
	return true
}

// finish records a send's outcome and starts the next job its config has queued.
func (s *scheduler) finish(r result) {
	if !r.abandoned {
		s.outcomes <- r.outcome
	}
	s.inFlight--
	id := r.outcome.ConfigID
	s.perConfig[id]--
	if q := s.waiting[id]; len(q) > 0 && s.ctx.Err() == nil {
		s.waiting[id] = q[1:]
		if !s.start(q[0]) {
			// The rest of its queue would have later turns still: all go back.
			for _, j := range s.waiting[id] {
				s.giveBack = append(s.giveBack, j.delivery.ID)
			}
			s.waiting[id] = nil
		}
	}
	if s.perConfig[id] == 0 && len(s.waiting[id]) == 0 {
		delete(s.perConfig, id)
		delete(s.waiting, id)
	}
}

// held counts the jobs in flight and queued.
func (s *scheduler) held() int {
	n := s.inFlight
	for _, q := range s.waiting {
		n += len(q)
	}
	return n
}

// wait is how long Run may sleep before it has something to do.
func (s *scheduler) wait(now, leaseAt time.Time, more bool) time.Duration {
	switch {
	case !leaseAt.IsZero():
		return max(leaseAt.Sub(now), 0)
	case s.inFlight > 0 || more:
		return s.d.opts.Poll
	default:
		// What is due may belong to a config whose rate limit has no turn yet: the next
		// lease is no use before one comes.
		return max(s.d.untilDue(s.ctx), min(s.rates.nextTurn(now), s.d.opts.Poll))
	}
}

// release gives back the leases this worker still holds: deliveries it leased and never
// sent.
func (d *Dispatcher) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.opts.Store.ReleaseWebhookLeases(ctx, d.worker); err != nil {
		d.opts.Log.Warn("webhook leases not given back; they end by themselves", "error", err)
	}
}

// giveBack ends this worker's leases of deliveries it will not send yet.
func (d *Dispatcher) giveBack(ctx context.Context, deliveryIDs []string) {
	if err := d.opts.Store.ReleaseWebhookDeliveries(ctx, d.worker, deliveryIDs); err != nil && ctx.Err() == nil {
		d.opts.Log.Warn("webhook leases not given back; they end by themselves", "error", err)
	}
}

// untilDue is how long to wait before looking again: until the next delivery falls due,
// at most Poll (another worker may queue or free one meanwhile).
func (d *Dispatcher) untilDue(ctx context.Context) time.Duration {
	now := d.opts.Now()
	next, err := d.opts.Store.NextWebhookDue(ctx, now)
	if err != nil || next == nil {
		return d.opts.Poll
	}
	return min(max(next.Sub(now), time.Millisecond), d.opts.Poll)
}

// lease takes up to n due deliveries of configs other than skip, with their configs.
func (d *Dispatcher) lease(ctx context.Context, n int, skip []string) []job {
	now := d.opts.Now()
	list, err := d.opts.Store.LeaseWebhookDeliveries(ctx, d.worker, now, now.Add(d.opts.Lease), n, skip...)
	if err != nil || len(list) == 0 {
		if err != nil && ctx.Err() == nil {
			d.opts.Log.Warn("webhook deliveries could not be leased", "error", err)
		}
		return nil
	}
	configIDs := make([]string, 0, len(list))
	for _, dl := range list {
		configIDs = append(configIDs, dl.ConfigID)
	}
	configs, err := d.opts.Store.WebhookConfigsByID(ctx, configIDs)
	if err != nil {
		// The leases end by themselves; the deliveries are taken up again then.
		d.opts.Log.Warn("webhook configs could not be read", "error", err)
		return nil
	}
	jobs := make([]job, 0, len(list))
	for _, dl := range list {
		if cfg := configs[dl.ConfigID]; cfg != nil {
			jobs = append(jobs, job{delivery: dl, config: cfg})
		}
	}
	return jobs
}

// secrets are the secrets that sign a config's messages at now: its own, and the previous
// one during a rotation.
func (d *Dispatcher) secrets(cfg *store.WebhookConfig, now time.Time) ([]string, error) {
	current, err := d.opts.Box.Open(cfg.Secret)
	if err != nil {
		return nil, err
	}
	out := []string{current}
	if cfg.PreviousSecret != nil && cfg.PreviousSecretUntil != nil && now.Before(*cfg.PreviousSecretUntil) {
		if previous, err := d.opts.Box.Open(*cfg.PreviousSecret); err == nil {
			out = append(out, previous)
		}
	}
	return out, nil
}

// result is what became of a send: its outcome, or abandoned when the worker stopped
// before it was known.
type result struct {
	outcome   store.AttemptOutcome
	abandoned bool
}

// send makes one attempt of a delivery, once its config's rate limit lets it, and says
// what became of it.
func (d *Dispatcher) send(ctx context.Context, j job) result {
	if j.wait > 0 {
		t := time.NewTimer(j.wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return result{outcome: store.AttemptOutcome{ConfigID: j.config.ID}, abandoned: true}
		}
	}
	start := time.Now()
	o, sent := d.attempt(ctx, j)
	r := result{outcome: o, abandoned: ctx.Err() != nil && !o.Succeeded}
	d.opts.Metrics.WebhookAttempt(r.metricOutcome(sent), time.Since(start))
	return r
}

// metricOutcome names what became of an attempt for the metrics; sent says whether the
// request went out.
func (r result) metricOutcome(sent bool) string {
	code := r.outcome.Attempt.StatusCode
	switch {
	case r.outcome.Succeeded:
		return metrics.WebhookSucceeded
	case r.outcome.Throttled:
		return metrics.WebhookThrottled
	case r.abandoned:
		return metrics.WebhookAbandoned
	case !sent:
		return metrics.WebhookNotSent
	case code == nil:
		return metrics.WebhookUnreachable
	case *code >= 300 && *code <= 399:
		return metrics.WebhookRedirected
	case *code >= 400 && *code <= 499:
		return metrics.WebhookClientError
	default:
		return metrics.WebhookServerError
	}
}

// attempt makes one attempt of a delivery; sent says whether its request went out (to
// be answered or not).
func (d *Dispatcher) attempt(ctx context.Context, j job) (_ store.AttemptOutcome, sent bool) {
	dl, cfg := j.delivery, j.config
	now := d.opts.Now()
	n := dl.Attempts + 1
	// The schedule counts failures only: the attempts a receiver throttled are not.
	failures := n - dl.Throttled
	outcome := store.AttemptOutcome{Worker: d.worker, ConfigID: cfg.ID,
		Attempt: store.WebhookAttempt{DeliveryID: dl.ID, N: n, At: now}}
	fail := func(msg string) store.AttemptOutcome {
		outcome.Attempt.Error = &msg
		outcome.NextAttemptAt = d.opts.Schedule.After(failures, now)
		return outcome
	}
	secrets, err := d.secrets(cfg, now)
	if err != nil {
		d.opts.Log.Error("webhook secret unreadable", "webhookId", cfg.ID, "error", err)
		return fail("the service could not read this webhook's signing secret"), false
	}
	body := []byte(dl.Payload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fail("the URL is not valid: " + err.Error()), false
	}
	if err := webhook.Headers(req.Header, secrets, dl.MessageID, dl.Event, dl.CorrelationID, now, body); err != nil {
		return fail(err.Error()), false
	}
	req.Header.Set("User-Agent", "treasury-webhooks/1")
	res, err := d.client.Do(req)
	outcome.Attempt.LatencyMs = float64(d.opts.Now().Sub(now).Microseconds()) / 1000
	if err != nil {
		return fail(sendError(err)), true
	}
	answer, _ := io.ReadAll(io.LimitReader(res.Body, maxResponseRead))
	_ = res.Body.Close()
	code := res.StatusCode
	outcome.Attempt.StatusCode = &code
	if kept := keep(answer); kept != "" {
		outcome.Attempt.Response = &kept
	}
	if code >= 200 && code <= 299 {
		outcome.Succeeded = true
		return outcome, true
	}
	// Retry-After counts from the answer, not from when the attempt began.
	answered := d.opts.Now()
	if wait, ok := retryAfter(res, answered); ok && dl.Throttled < maxThrottles {
		at := answered.Add(min(wait, d.opts.MaxRetryAfter))
		outcome.Throttled, outcome.NextAttemptAt = true, &at
		return outcome, true
	}
	outcome.NextAttemptAt = d.opts.Schedule.After(failures, now)
	return outcome, true
}

// retryAfter is how long a 429 or 503 answer asks the sender to wait (Retry-After, in
// seconds or as a date), at least a second; ok is false for any other answer.
func retryAfter(res *http.Response, now time.Time) (_ time.Duration, ok bool) {
	if res.StatusCode != http.StatusTooManyRequests && res.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	v := strings.TrimSpace(res.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	var wait time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		wait = time.Duration(min(secs, int64(365*24*time.Hour/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		wait = at.Sub(now)
	} else {
		return 0, false
	}
	return max(wait, time.Second), true
}

// sendError describes a failed send without the URL's query (it may carry a token).
func sendError(err error) string {
	var msg string
	if ue, ok := err.(interface{ Unwrap() error }); ok && ue.Unwrap() != nil {
		msg = ue.Unwrap().Error()
	} else {
		msg = err.Error()
	}
	if len(msg) > 300 {
		msg = msg[:300]
	}
	return msg
}

// keep is the start of an answer as it is recorded: at most responseKept bytes, cut on a
// character boundary.
func keep(answer []byte) string {
	if len(answer) > responseKept {
		answer = answer[:responseKept]
		for len(answer) > 0 && !utf8.Valid(answer) {
			answer = answer[:len(answer)-1]
		}
	}
	return string(answer)
}

// record writes outcomes in batches, retrying a database blip for a while; an outcome it
// cannot write leaves its delivery to be sent again when the lease ends.
func (d *Dispatcher) record(outcomes <-chan store.AttemptOutcome) {
	for o := range outcomes {
		batch := []store.AttemptOutcome{o}
		settled := time.After(d.opts.Settle)
	more:
		for len(batch) < 500 {
			select {
			case o, ok := <-outcomes:
				if !ok {
					break more
				}
				batch = append(batch, o)
			case <-settled:
				break more
			}
		}
		disableBefore := d.opts.Now().Add(-d.opts.Schedule.scaled(failingWindow))
		var err error
		var disabled []store.DisabledWebhook
		for attempt, wait := 0, 100*time.Millisecond; attempt < 6; attempt, wait = attempt+1, 2*wait {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			disabled, err = d.opts.Store.RecordWebhookAttempts(ctx, batch, disableBefore, disabledReason)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(wait)
		}
		for _, c := range disabled {
			d.opts.Log.Warn("webhook disabled: every attempt failed for the failing window", "webhookId", c.ID, "orgId", c.OrgID, "app", c.App)
		}
		d.opts.Metrics.WebhooksDisabled(len(disabled))
		if err != nil {
			d.opts.Log.Error("webhook attempts not recorded; their deliveries are sent again when their leases end",
				"attempts", len(batch), "error", err)
		}
	}
}
