package client

import (
	"context"
	cryptorand "crypto/rand"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy says how often, and how patiently, the client sends a call again. A call is
// retried when it got no answer (a *NetworkError), when the server is overloaded or failed
// (429, 5xx), and when its Idempotency-Key is still held by an earlier attempt (409
// idempotency_key_in_use); any other answer is final. Writes are safe to retry because
// every attempt of a call carries the same Idempotency-Key.
type RetryPolicy struct {
	// Attempts is how many times one call may be sent, the first included (4); 1 never
	// retries.
	Attempts int
	// MinBackoff is the wait before the first retry (200 ms); it doubles for each retry up
	// to MaxBackoff (5 s), less a random part of up to half, so that clients that failed
	// together do not retry together. A Retry-After longer than that is waited instead.
	// No wait goes past the context's deadline: a call that would have to is not retried.
	MinBackoff, MaxBackoff time.Duration
}

var defaultRetryPolicy = RetryPolicy{Attempts: 4, MinBackoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second}

// WithRetryPolicy replaces the default policy (4 attempts, 200 ms doubling to 5 s). Zero
// fields keep their default.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) {
		if p.Attempts <= 0 {
			p.Attempts = defaultRetryPolicy.Attempts
		}
		if p.MinBackoff <= 0 {
			p.MinBackoff = defaultRetryPolicy.MinBackoff
		}
		if p.MaxBackoff <= 0 {
			p.MaxBackoff = defaultRetryPolicy.MaxBackoff
		}
		p.MaxBackoff = max(p.MaxBackoff, p.MinBackoff)
		c.retry = p
	}
}

// wait is the pause after the failed attempt number attempt (1 for the first).
func (p RetryPolicy) wait(attempt int, retryAfter time.Duration) time.Duration {
	d := p.MinBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	d -= rand.N(d/2 + 1)
	return max(d, retryAfter)
}

// temporary reports whether a call that failed with err may succeed if sent again.
func temporary(err error) bool {
	var p *Problem
	if errors.As(err, &p) {
		return p.Temporary()
	}
	var n *NetworkError
	return errors.As(err, &n)
}

// sleep waits d, and reports false at once when ctx would end first.
func sleep(ctx context.Context, d time.Duration) bool {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryAfter reads Retry-After: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return max(0, time.Duration(s)*time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now))
	}
	return 0
}

// newIdempotencyKey is the key of one write, shared by its retries.
func newIdempotencyKey() string { return cryptorand.Text() }
