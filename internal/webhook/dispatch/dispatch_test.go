package dispatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/webhook"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// receiver is a webhook endpoint on loopback that answers with answer(n) to its n-th
// request (from 1) and keeps every request it verified.
type receiver struct {
	*httptest.Server
	secret string
	answer func(n int) int
	mu     sync.Mutex
	got    []http.Header
	bodies []string
	bad    []string
}

func newReceiver(t *testing.T, secret string, answer func(n int) int) *receiver {
	t.Helper()
	r := &receiver{secret: secret, answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		if err := webhook.Verify(r.secret, req.Header, body, time.Now()); err != nil {
			r.bad = append(r.bad, err.Error())
		}
		r.got = append(r.got, req.Header.Clone())
		r.bodies = append(r.bodies, string(body))
		n := len(r.got)
		r.mu.Unlock()
		w.WriteHeader(r.answer(n))
		_, _ = w.Write([]byte("thanks"))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() ([]http.Header, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.got...), append([]string(nil), r.bad...)
}

type fixture struct {
	store *store.Store
	box   *webhook.Box
	org   string
}

func newFixture(t testing.TB, s *store.Store) *fixture {
	t.Helper()
	creds, err := seed.Ensure(context.Background(), s, t.TempDir(), seed.URLs{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := webhook.NewKey()
	k, _ := webhook.ParseKey(key)
	box, _ := webhook.NewBox(k)
	return &fixture{store: s, box: box, org: creds.OrgID}
}

// config stores an enabled config of the pay app for url, with a fresh secret.
func (f *fixture) config(t testing.TB, url string) (*store.WebhookConfig, string) {
	t.Helper()
	secret, _ := webhook.NewSecret()
	sealed, _ := f.box.Seal(secret)
	now := time.Now().UTC()
	c := &store.WebhookConfig{ID: ids.New(ids.WebhookConfig), OrgID: f.org, App: "pay", URL: url, Events: "*", Enabled: true,
		Secret: sealed, CreatedAt: now, UpdatedAt: now}
	if err := f.store.CreateWebhookConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c, secret
}

// queue queues n messages to a config, due now.
func (f *fixture) queue(t testing.TB, configID string, n int) []store.WebhookDelivery {
	t.Helper()
	var out []store.WebhookDelivery
	for i := range n {
		now := time.Now().UTC()
		evID := ids.New(ids.Event)
		d := store.WebhookDelivery{ID: ids.New(ids.WebhookDelivery), MessageID: ids.New(ids.WebhookMessage), ConfigID: configID,
			EventID: evID, Event: "Order.Created", OrderID: "ord_x", CorrelationID: fmt.Sprint("corr-", i),
			Payload: fmt.Sprintf(`{"id":%q,"event":"Order.Created","n":%d}`, evID, i), Status: store.DeliveryPending,
			NextAttemptAt: &now, CreatedAt: now}
		if err := f.store.CreateWebhookDelivery(context.Background(), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func (f *fixture) start(t testing.TB, opts Options) *Dispatcher {
	t.Helper()
	opts.Store, opts.Box, opts.Log = f.store, f.box, quiet
	opts.Guard.AllowHTTP, opts.Guard.AllowLoopback = true, true
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	d := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

func statusOf(t *testing.T, s *store.Store, configID string) map[string]store.WebhookDelivery {
	t.Helper()
	list, _, err := s.ListWebhookDeliveries(context.Background(), store.DeliveryFilter{ConfigID: configID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.WebhookDelivery{}
	for _, d := range list {
		out[d.ID] = d
	}
	return out
}

// A receiver that fails the first attempts gets the message on the next one, signed, with
// the same webhook-id every time; every attempt is recorded with its status code.
func TestAFailingReceiverGetsTheMessageOnALaterAttempt(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s)
		var r *receiver
		cfg, secret := f.config(t, "")
		r = newReceiver(t, secret, func(n int) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		cfg.URL = r.URL + "/hooks?token=abc"
		if err := s.SaveWebhookConfig(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		d := f.queue(t, cfg.ID, 1)[0]
		f.start(t, Options{Schedule: Schedule{Scale: 0.001}})
		wait.For(t, 15*time.Second, "the delivery to succeed", func() bool { return statusOf(t, s, cfg.ID)[d.ID].Status == store.DeliverySucceeded })
		got, bad := r.requests()
		if len(got) != 3 || len(bad) != 0 {
			t.Fatalf("%d requests, %d that did not verify (%v)", len(got), len(bad), bad)
		}
		for _, h := range got {
			if h.Get(webhook.HeaderID) != d.MessageID || h.Get(webhook.HeaderEventName) != "Order.Created" ||
				h.Get(webhook.HeaderCorrelationID) != "corr-0" || h.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v", h)
			}
		}
		list, attempts, _ := s.ListWebhookDeliveries(context.Background(), store.DeliveryFilter{ConfigID: cfg.ID, Limit: 1})
		as := attempts[list[0].ID]
		if len(as) != 3 || *as[0].StatusCode != 503 || *as[1].StatusCode != 503 || *as[2].StatusCode != 204 ||
			list[0].Attempts != 3 || *as[0].Response != "thanks" || as[2].Response != nil {
			t.Fatalf("delivery %+v attempts %+v", list[0], as)
		}
	})
}

// Two workers on one PostgreSQL database send every message, and none twice.
func TestTwoWorkersOnPostgresSendEachMessageOnce(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.PostgresSchemaURL(t)
	open := func() *store.Store {
		s, err := store.Open(ctx, store.Config{DatabaseURL: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a := open()
	if err := a.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, a)
	cfg, secret := f.config(t, "")
	r := newReceiver(t, secret, func(int) int { return http.StatusOK })
	cfg.URL = r.URL
	_ = a.SaveWebhookConfig(ctx, cfg)
	const n = 300
	queued := f.queue(t, cfg.ID, n)
	f.start(t, Options{Senders: 8, PerEndpoint: 4})
	other := *f
	other.store = open()
	other.start(t, Options{Senders: 8, PerEndpoint: 4})
	wait.For(t, 15*time.Second, "every message", func() bool {
		for _, d := range statusOf(t, a, cfg.ID) {
			if d.Status != store.DeliverySucceeded {
				return false
			}
		}
		return true
	})
	got, bad := r.requests()
	seen := map[string]int{}
	for _, h := range got {
		seen[h.Get(webhook.HeaderID)]++
	}
	for _, d := range queued {
		if seen[d.MessageID] != 1 {
			t.Errorf("message %s sent %d times", d.MessageID, seen[d.MessageID])
		}
	}
	if len(got) != n || len(bad) != 0 {
		t.Fatalf("%d requests for %d messages, %d unverified", len(got), n, len(bad))
	}
}

// A worker that dies holding a lease leaves its delivery to another worker, which sends it
// once the lease has ended, not before.
func TestADeadWorkersDeliveryIsSentAfterItsLeaseEnds(t *testing.T) {
	s := storetest.NewSQLite(t)
	f := newFixture(t, s)
	cfg, secret := f.config(t, "")
	var firstAt time.Time
	var once sync.Once
	r := newReceiver(t, secret, func(int) int {
		once.Do(func() { firstAt = time.Now() })
		return http.StatusOK
	})
	cfg.URL = r.URL
	_ = s.SaveWebhookConfig(context.Background(), cfg)
	d := f.queue(t, cfg.ID, 1)[0]
	now := time.Now()
	leaseEnds := now.Add(500 * time.Millisecond)
	if got, err := s.LeaseWebhookDeliveries(context.Background(), "wkr_dead", now, leaseEnds, 10); err != nil || len(got) != 1 {
		t.Fatalf("the dead worker's lease: %v %v", got, err)
	}
	f.start(t, Options{})
	wait.For(t, 15*time.Second, "the delivery", func() bool { return statusOf(t, s, cfg.ID)[d.ID].Status == store.DeliverySucceeded })
	if firstAt.Before(leaseEnds) {
		t.Fatalf("sent %v before the dead worker's lease ended", leaseEnds.Sub(firstAt))
	}
	if got, _ := r.requests(); len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
}

// A redirect is an answer, not followed; only the start of a long answer is kept.
func TestRedirectsAreNotFollowedAndAnswersAreCut(t *testing.T) {
	s := storetest.NewSQLite(t)
	f := newFixture(t, s)
	var targetHit bool
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { targetHit = true }))
	defer target.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	}))
	defer redirecting.Close()
	long := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(strings.Repeat("é", 100<<10)))
	}))
	defer long.Close()
	c1, _ := f.config(t, redirecting.URL)
	c2, _ := f.config(t, long.URL)
	d1, d2 := f.queue(t, c1.ID, 1)[0], f.queue(t, c2.ID, 1)[0]
	f.start(t, Options{Schedule: Schedule{Scale: 1}})
	wait.For(t, 15*time.Second, "both attempts", func() bool {
		return statusOf(t, s, c1.ID)[d1.ID].Attempts == 1 && statusOf(t, s, c2.ID)[d2.ID].Attempts == 1
	})
	_, a1, _ := s.ListWebhookDeliveries(context.Background(), store.DeliveryFilter{ConfigID: c1.ID, Limit: 1})
	_, a2, _ := s.ListWebhookDeliveries(context.Background(), store.DeliveryFilter{ConfigID: c2.ID, Limit: 1})
	if at := a1[d1.ID]; len(at) != 1 || *at[0].StatusCode != http.StatusFound || targetHit {
		t.Fatalf("redirect: %+v, target hit %v", at, targetHit)
	}
	if at := a2[d2.ID]; len(at) != 1 || *at[0].StatusCode != http.StatusBadRequest || len(*at[0].Response) > responseKept ||
		len(*at[0].Response) < responseKept-2 {
		t.Fatalf("long answer kept as %d bytes", len(*at[0].Response))
	}
	if d := statusOf(t, s, c1.ID)[d1.ID]; d.Status != store.DeliveryPending || d.NextAttemptAt.Before(time.Now().Add(3*time.Second)) {
		t.Fatalf("after a failed first attempt: %+v", d)
	}
}

// Each retry waits its step of the schedule, ±20 %, scaled; after the seventh the
// delivery has failed.
func TestScheduleWaitsEachStep(t *testing.T) {
	now := time.Now()
	for _, r := range []float64{0, 0.5, 0.999} {
		s := Schedule{Scale: 0.5, Rand: func() float64 { return r }}
		for n := 1; n < MaxAttempts; n++ {
			want := time.Duration(float64(retryDelays[n-1]) * 0.5)
			got := s.After(n, now).Sub(now)
			if got < time.Duration(float64(want)*0.8) || got > time.Duration(float64(want)*1.2) {
				t.Fatalf("after attempt %d (rand %v): %v, want %v ±20 %%", n, r, got, want)
			}
		}
		if s.After(MaxAttempts, now) != nil {
			t.Fatal("a retry after the last attempt")
		}
	}
}

// While a secret is rotated, messages carry both signatures: a receiver still holding the
// old secret verifies them, and so does one holding the new. After the overlap only the
// new one signs.
func TestARotatedSecretSignsBesideTheOldOne(t *testing.T) {
	s := storetest.NewSQLite(t)
	f := newFixture(t, s)
	cfg, old := f.config(t, "")
	fresh, _ := webhook.NewSecret()
	oldReceiver := newReceiver(t, old, func(int) int { return http.StatusOK })
	freshReceiver := newReceiver(t, fresh, func(int) int { return http.StatusOK })
	rotate := func(url string, until time.Time) {
		sealedFresh, _ := f.box.Seal(fresh)
		sealedOld, _ := f.box.Seal(old)
		cfg.URL, cfg.Secret, cfg.PreviousSecret, cfg.PreviousSecretUntil = url, sealedFresh, &sealedOld, &until
		if err := s.SaveWebhookConfig(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	f.start(t, Options{})
	for _, r := range []*receiver{oldReceiver, freshReceiver} {
		rotate(r.URL, time.Now().Add(time.Hour))
		d := f.queue(t, cfg.ID, 1)[0]
		wait.For(t, 15*time.Second, "the delivery", func() bool { return statusOf(t, s, cfg.ID)[d.ID].Status == store.DeliverySucceeded })
		got, bad := r.requests()
		if len(got) != 1 || len(bad) != 0 || len(strings.Fields(got[0].Get(webhook.HeaderSignature))) != 2 {
			t.Fatalf("%d requests, %v unverified, signatures %q", len(got), bad, got[0].Get(webhook.HeaderSignature))
		}
	}
	rotate(oldReceiver.URL, time.Now().Add(-time.Second))
	d := f.queue(t, cfg.ID, 1)[0]
	wait.For(t, 15*time.Second, "the attempt", func() bool { return statusOf(t, s, cfg.ID)[d.ID].Attempts == 1 })
	if got, bad := oldReceiver.requests(); len(got) != 2 || len(bad) != 1 {
		t.Fatalf("after the overlap the old secret still verifies: %d requests, %d unverified", len(got), len(bad))
	}
}
