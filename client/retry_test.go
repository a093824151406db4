package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// quick keeps the waits between retries short; a Retry-After still counts in full.
var quick = WithRetryPolicy(RetryPolicy{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})

// script answers the attempts of one call in turn, and records what each carried.
type script struct {
	t       *testing.T
	mu      sync.Mutex
	answers []func(w http.ResponseWriter, r *http.Request)
	keys    []string
	bodies  []string
}

func (s *script) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := len(s.keys)
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	s.bodies = append(s.bodies, string(body))
	s.mu.Unlock()
	if i >= len(s.answers) {
		s.t.Errorf("attempt %d is past the script", i+1)
		w.WriteHeader(http.StatusGone)
		return
	}
	s.answers[i](w, r)
}

func (s *script) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

func problem(status int, code string, header ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("X-Correlation-Id", "corr-"+code)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"status":0,"code":"`+code+`","detail":"detail of `+code+`"}`)
	}
}

func created(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"ord_1","domain":"payment","status":"draft","amount":"500"}`)
}

// resetConnection drops the connection without an answer, as a crashed proxy would.
func resetConnection(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

var payment = PaymentRequest{WalletID: "wal_1", Asset: "USDC", Amount: "500",
	Destination: Destination{Address: "0x1111111111111111111111111111111111111111"}}

// Each retryable failure is retried with the same Idempotency-Key and body, so that the
// server acts once.
func TestWritesAreRetriedWithTheSameKey(t *testing.T) {
	for name, first := range map[string]func(http.ResponseWriter, *http.Request){
		"503":                    problem(503, CodeUnavailable),
		"500":                    problem(500, CodeInternal),
		"409 key in use":         problem(409, CodeIdempotencyKeyInUse),
		"429":                    problem(429, CodeRateLimited),
		"connection reset":       resetConnection,
		"502 from a proxy, HTML": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) },
	} {
		t.Run(name, func(t *testing.T) {
			s := &script{t: t, answers: []func(http.ResponseWriter, *http.Request){first, first, created}}
			c := newRESTClient(t, s.serve, WithToken(restKey), quick)
			o, err := c.CreateOrder(context.Background(), payment)
			if err != nil || o.ID != "ord_1" || o.Amount != "500" || o.Domain != DomainPayment {
				t.Fatalf("%v %+v", err, o)
			}
			if s.attempts() < 3 {
				t.Fatalf("%d attempts", s.attempts())
			}
			for i := range s.keys {
				if s.keys[i] == "" || s.keys[i] != s.keys[0] || s.bodies[i] != s.bodies[0] {
					t.Fatalf("attempt %d: key %q body %s; first: key %q body %s", i+1, s.keys[i], s.bodies[i], s.keys[0], s.bodies[0])
				}
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	s := &script{t: t, answers: []func(http.ResponseWriter, *http.Request){
		problem(429, CodeRateLimited, "Retry-After", "1"), created}}
	c := newRESTClient(t, s.serve, WithToken(restKey), quick)
	start := time.Now()
	if _, err := c.CreateOrder(context.Background(), payment, WithIdempotencyKey("job-7:create")); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %v, before the Retry-After of 1 s", waited)
	}
	if s.keys[0] != "job-7:create" || s.keys[1] != "job-7:create" {
		t.Fatalf("keys %q: the caller's key was not kept", s.keys)
	}
}

// Other refusals will be answered the same way every time.
func TestOtherRefusalsAreNotRetried(t *testing.T) {
	for _, code := range []struct {
		status int
		code   string
	}{{422, CodeValidationFailed}, {422, CodeIdempotencyKeyReused}, {404, CodeNotFound}, {409, CodeConflict},
		{403, CodePermissionDenied}, {401, CodeUnauthenticated}, {400, "bad_request"}} {
		s := &script{t: t, answers: []func(http.ResponseWriter, *http.Request){problem(code.status, code.code)}}
		c := newRESTClient(t, s.serve, WithToken(restKey), quick)
		_, err := c.SubmitOrder(context.Background(), DomainPayment, "ord_1")
		var p *Problem
		if !errors.As(err, &p) || p.Status != code.status || p.Code != code.code || p.CorrelationID != "corr-"+code.code ||
			p.Detail != "detail of "+code.code {
			t.Fatalf("%d %s: %v", code.status, code.code, err)
		}
		if s.attempts() != 1 {
			t.Fatalf("%d %s: %d attempts", code.status, code.code, s.attempts())
		}
	}
}

func TestRetriesStopAfterTheAttemptsOfThePolicy(t *testing.T) {
	unavailable := problem(503, CodeUnavailable)
	s := &script{t: t, answers: []func(http.ResponseWriter, *http.Request){unavailable, unavailable, unavailable}}
	c := newRESTClient(t, s.serve, WithToken(restKey),
		WithRetryPolicy(RetryPolicy{Attempts: 3, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	_, err := c.Portfolio(context.Background())
	var p *Problem
	if !errors.As(err, &p) || p.Code != CodeUnavailable || s.attempts() != 3 {
		t.Fatalf("%v after %d attempts", err, s.attempts())
	}
}

// No wait goes past the context's deadline, and a call ends with it.
func TestTheContextDeadlineIsRespected(t *testing.T) {
	t.Run("a Retry-After past the deadline is not waited", func(t *testing.T) {
		s := &script{t: t, answers: []func(http.ResponseWriter, *http.Request){problem(503, CodeUnavailable, "Retry-After", "30")}}
		c := newRESTClient(t, s.serve, WithToken(restKey))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Portfolio(ctx)
		var p *Problem
		if !errors.As(err, &p) || p.RetryAfter != 30*time.Second || time.Since(start) > time.Second || s.attempts() != 1 {
			t.Fatalf("%v (retry after %v) after %v and %d attempts", err, p.RetryAfter, time.Since(start), s.attempts())
		}
	})
	t.Run("a slow answer is abandoned", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		s := &script{t: t, answers: []func(http.ResponseWriter, *http.Request){func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}}}
		c := newRESTClient(t, s.serve, WithToken(restKey))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.CreateOrder(ctx, payment)
		var n *NetworkError
		if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &n) || time.Since(start) > time.Second || s.attempts() != 1 {
			t.Fatalf("%v after %v and %d attempts", err, time.Since(start), s.attempts())
		}
	})
	t.Run("a cancelled wait ends the call", func(t *testing.T) {
		unavailable := problem(503, CodeUnavailable, "Retry-After", "30")
		s := &script{t: t, answers: []func(http.ResponseWriter, *http.Request){unavailable}}
		c := newRESTClient(t, s.serve, WithToken(restKey))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := c.Portfolio(ctx)
		if err == nil || time.Since(start) > 5*time.Second || s.attempts() != 1 {
			t.Fatalf("%v after %v and %d attempts", err, time.Since(start), s.attempts())
		}
	})
}

func TestRetryAfterForms(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	for value, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Sun, 22 Nov 2026 01:00:07 GMT": 7 * time.Second,
		"Sun, 22 Nov 2026 00:59:00 GMT": 0,
	} {
		if got := retryAfter(http.Header{"Retry-After": {value}}, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", value, got, want)
		}
	}
}

func TestBackoffDoublesWithJitterUpToTheMaximum(t *testing.T) {
	p := RetryPolicy{Attempts: 10, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for attempt, ceiling := range map[int]time.Duration{1: 100, 2: 200, 3: 400, 4: 800, 5: 1000, 9: 1000} {
		ceiling *= time.Millisecond
		for range 50 {
			if d := p.wait(attempt, 0); d < ceiling/2 || d > ceiling {
				t.Fatalf("attempt %d: waited %v, want %v to %v", attempt, d, ceiling/2, ceiling)
			}
		}
	}
	if d := p.wait(1, 3*time.Second); d != 3*time.Second {
		t.Fatalf("a Retry-After of 3 s waited %v", d)
	}
}

// A revoked or expired access token is replaced once; a key is what it is.
func TestARefusedAccessTokenIsRenewedOnce(t *testing.T) {
	ts := &tokenServer{t: t}
	var mu sync.Mutex
	var seen []string
	c := newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/oauth/token" {
			ts.serve(w, r)
			return
		}
		mu.Lock()
		seen = append(seen, r.Method+" "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+" "+r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if r.Header.Get("Authorization") == "Bearer "+accessToken1 {
			problem(401, CodeUnauthenticated)(w, r)
			return
		}
		created(w, r)
	}, WithClientCredentials(oauthID, oauthSecret, "pay:read pay:write"), quick)
	if _, err := c.CreateOrder(context.Background(), payment); err != nil {
		t.Fatal(err)
	}
	if ts.fetches.Load() != 2 || len(seen) != 2 || !strings.HasPrefix(seen[0], "POST "+accessToken1+" ") ||
		!strings.HasPrefix(seen[1], "POST "+accessToken2+" ") || seen[0][len(seen[0])-26:] != seen[1][len(seen[1])-26:] {
		t.Fatalf("%d token fetches, requests %q", ts.fetches.Load(), seen)
	}

	// The new token refused as well: the refusal is the answer.
	ts.fetches.Store(0)
	s := &script{t: t, answers: []func(http.ResponseWriter, *http.Request){problem(401, CodeUnauthenticated), problem(401, CodeUnauthenticated)}}
	c = newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/oauth/token" {
			ts.serve(w, r)
			return
		}
		s.serve(w, r)
	}, WithClientCredentials(oauthID, oauthSecret, "pay:read pay:write"), quick)
	_, err := c.Portfolio(context.Background())
	var p *Problem
	if !errors.As(err, &p) || p.Status != 401 || s.attempts() != 2 || ts.fetches.Load() != 2 {
		t.Fatalf("%v after %d attempts and %d token fetches", err, s.attempts(), ts.fetches.Load())
	}
}
