package dispatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// Retry-After is read from a 429 or a 503 only, in seconds or as a date, at least a second.
func TestRetryAfterIsReadFromThrottlingAnswers(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		code   int
		header string
		want   time.Duration
		ok     bool
	}{
		{429, "120", 2 * time.Minute, true},
		{503, "0", time.Second, true},
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{429, now.Add(-time.Hour).Format(http.TimeFormat), time.Second, true},
		{429, "", 0, false},
		{429, "soon", 0, false},
		{429, "-5", 0, false},
		{500, "120", 0, false},
		{200, "120", 0, false},
	} {
		res := &http.Response{StatusCode: c.code, Header: http.Header{}}
		if c.header != "" {
			res.Header.Set("Retry-After", c.header)
		}
		got, ok := retryAfter(res, now)
		if got != c.want || ok != c.ok {
			t.Errorf("%d Retry-After %q: %v %v, want %v %v", c.code, c.header, got, ok, c.want, c.ok)
		}
	}
}

// A receiver that answers 429 or 503 with Retry-After gets no attempt before the time it
// asked for (capped), and the answers are no failures: the delivery's schedule and the
// webhook's run of failures skip them.
func TestRetryAfterIsHonouredAndCountedApart(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s)
		cfg, secret := f.config(t, "")
		var mu sync.Mutex
		var at []time.Time
		r := newReceiver(t, secret, func(n int) int {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			switch n {
			case 1:
				return http.StatusTooManyRequests
			case 2:
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		// The receiver asks for 1 s, then for an hour, which the cap makes 1.5 s.
		asked := 0
		throttling := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			asked++
			if asked == 1 {
				w.Header().Set("Retry-After", "1")
			} else {
				w.Header().Set("Retry-After", "3600")
			}
			r.Config.Handler.ServeHTTP(w, req)
		})
		front := httptest.NewServer(throttling)
		t.Cleanup(front.Close)
		cfg.URL = front.URL
		if err := s.SaveWebhookConfig(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		d := f.queue(t, cfg.ID, 1)[0]
		// At this scale a failure would be retried after 5 ms.
		f.start(t, Options{Schedule: Schedule{Scale: 0.001}, MaxRetryAfter: 1500 * time.Millisecond})
		wait.For(t, 15*time.Second, "the delivery", func() bool { return statusOf(t, s, cfg.ID)[d.ID].Status == store.DeliverySucceeded })
		mu.Lock()
		defer mu.Unlock()
		if len(at) != 3 || at[1].Sub(at[0]) < time.Second || at[2].Sub(at[1]) < 1500*time.Millisecond {
			t.Fatalf("attempts at %v", at)
		}
		got := statusOf(t, s, cfg.ID)[d.ID]
		if got.Attempts != 3 || got.Throttled != 2 {
			t.Fatalf("delivery %+v", got)
		}
		c, _ := s.WebhookConfig(context.Background(), f.org, cfg.ID)
		if c.FailingSince != nil {
			t.Fatalf("throttling started a run of failures at %v", c.FailingSince)
		}
	})
}

// A webhook's own rate limit spaces its messages: a burst of one second's worth, then
// the rate.
func TestAWebhooksRateLimitSpacesItsMessages(t *testing.T) {
	s := storetest.NewSQLite(t)
	f := newFixture(t, s)
	cfg, secret := f.config(t, "")
	var mu sync.Mutex
	var at []time.Time
	r := newReceiver(t, secret, func(int) int {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return http.StatusOK
	})
	rate := 5
	cfg.URL, cfg.RateLimit = r.URL, &rate
	if err := s.SaveWebhookConfig(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	f.queue(t, cfg.ID, 15)
	started := time.Now()
	f.start(t, Options{})
	wait.For(t, 15*time.Second, "every message", func() bool {
		for _, d := range statusOf(t, s, cfg.ID) {
			if d.Status != store.DeliverySucceeded {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	// The bucket starts full of 5 turns after the test started; turn k (from 0) comes no
	// sooner than (k-4)/5 s after that, and a message arrives no sooner than its turn, so
	// the k-th arrival is no sooner either, however loaded the machine.
	if len(at) != 15 {
		t.Fatalf("%d messages", len(at))
	}
	for k, arrived := range at {
		if turn := started.Add(time.Duration(max(k-rate+1, 0)) * time.Second / time.Duration(rate)); arrived.Before(turn) {
			t.Fatalf("message %d arrived %v after the start, before its turn at %v", k, arrived.Sub(started), turn.Sub(started))
		}
	}
}

// One endpoint that hangs holds a bounded share of the senders: another endpoint's
// messages, queued behind the hanging one's, are all delivered while every request to the
// hanging one is still open.
func TestAHangingEndpointDoesNotHoldBackAnother(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s)
		hangingCfg, _ := f.config(t, "")
		healthyCfg, secret := f.config(t, "")
		release := make(chan struct{})
		var mu sync.Mutex
		open, answered, most := 0, 0, 0
		hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			open++
			most = max(most, open)
			mu.Unlock()
			select {
			case <-release:
			case <-req.Context().Done():
			}
			mu.Lock()
			open--
			answered++
			mu.Unlock()
		}))
		t.Cleanup(hanging.Close)
		healthy := newReceiver(t, secret, func(int) int { return http.StatusOK })
		hangingCfg.URL, healthyCfg.URL = hanging.URL, healthy.URL
		for _, c := range []*store.WebhookConfig{hangingCfg, healthyCfg} {
			if err := s.SaveWebhookConfig(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
		f.queue(t, hangingCfg.ID, 200)
		f.queue(t, healthyCfg.ID, 50)
		f.start(t, Options{Timeout: time.Minute})
		// Registered after the dispatcher's, so run before it: whatever the outcome, the
		// hanging requests end and the dispatcher stops.
		var once sync.Once
		unhang := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unhang)
		wait.For(t, 15*time.Second, "the healthy endpoint's messages", func() bool {
			for _, d := range statusOf(t, s, healthyCfg.ID) {
				if d.Status != store.DeliverySucceeded {
					return false
				}
			}
			return true
		})
		mu.Lock()
		stillOpen, done, peak := open, answered, most
		mu.Unlock()
		unhang()
		if done != 0 || stillOpen == 0 || peak > 16 {
			t.Fatalf("the hanging endpoint: %d answered, %d open, at most %d at once", done, stillOpen, peak)
		}
		if got, bad := healthy.requests(); len(got) != 50 || len(bad) != 0 {
			t.Fatalf("the healthy endpoint got %d requests, %d unverified", len(got), len(bad))
		}
	})
}
