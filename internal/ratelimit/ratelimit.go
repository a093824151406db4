// Package ratelimit is the token buckets behind the API's per-credential rate limit and the
// bounds on failed sign-ins.
package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter gives every key (a credential, a client address) a token bucket. Buckets live
// in this process: with N replicas behind a balancer a client may get up to N times the
// rate.
type Limiter struct {
	// PerSecond and Burst are each bucket's refill rate and size.
	PerSecond rate.Limit
	Burst     int
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
	// Now is the clock (time.Now); tests stop it.
	Now func() time.Time
}

type bucket struct {
	limiter  *rate.Limiter
	lastSeen time.Time
}

// New returns a limiter of perSecond tokens a second per key, burst at most.
func New(perSecond float64, burst int) *Limiter {
	return &Limiter{PerSecond: rate.Limit(perSecond), Burst: burst, buckets: map[string]*bucket{}, Now: time.Now}
}

// Take spends one token of key's bucket and says what is left, or how long to wait.
func (l *Limiter) Take(key string) (ok bool, remaining int, wait time.Duration) {
	return l.TakeN(key, 1)
}

// TakeN spends n tokens of key's bucket at once (no more than a full bucket: a request of
// more than Burst would wait forever) and says what is left, or how long to wait.
func (l *Limiter) TakeN(key string, n int) (ok bool, remaining int, wait time.Duration) {
	n = min(max(n, 1), max(l.Burst, 1))
	now := l.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > time.Minute {
		// Idle buckets are full again; forgetting them changes nothing.
		for k, b := range l.buckets {
			if now.Sub(b.lastSeen) > time.Minute {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b, found := l.buckets[key]
	if !found {
		b = &bucket{limiter: rate.NewLimiter(l.PerSecond, l.Burst)}
		l.buckets[key] = b
	}
	b.lastSeen = now
	if b.limiter.AllowN(now, n) {
		return true, int(math.Floor(b.limiter.TokensAt(now))), 0
	}
	r := b.limiter.ReserveN(now, n)
	wait = r.DelayFrom(now)
	r.CancelAt(now)
	return false, 0, wait
}

// Exhausted reports, without spending anything, whether key's bucket is empty and how
// long until it holds a token again.
func (l *Limiter) Exhausted(key string) (bool, time.Duration) {
	now := l.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, found := l.buckets[key]
	if !found || b.limiter.TokensAt(now) >= 1 {
		return false, 0
	}
	r := b.limiter.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return true, wait
}

// RetryAfter is a wait in whole seconds, at least one, as Retry-After gives it.
func RetryAfter(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}
