package api

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// rateLimiter gives every credential a token bucket (SPEC 8: 50 requests/s, burst 100 by
// default). Buckets live in this process: with N API replicas behind a balancer a client
// may get up to N times the rate; the arithmetic and the trade-off are in docs/api.md.
type rateLimiter struct {
	perSecond rate.Limit
	burst     int
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
	now       func() time.Time
}

type bucket struct {
	limiter  *rate.Limiter
	lastSeen time.Time
}

func newRateLimiter(perSecond float64, burst int) *rateLimiter {
	return &rateLimiter{perSecond: rate.Limit(perSecond), burst: burst, buckets: map[string]*bucket{}, now: time.Now}
}

// take spends one token of key's bucket and says what is left, or how long to wait.
func (l *rateLimiter) take(key string) (ok bool, remaining int, wait time.Duration) {
	now := l.now()
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
		b = &bucket{limiter: rate.NewLimiter(l.perSecond, l.burst)}
		l.buckets[key] = b
	}
	b.lastSeen = now
	if b.limiter.AllowN(now, 1) {
		return true, int(math.Floor(b.limiter.TokensAt(now))), 0
	}
	r := b.limiter.ReserveN(now, 1)
	wait = r.DelayFrom(now)
	r.CancelAt(now)
	return false, 0, wait
}

// exhausted reports, without spending anything, whether key's bucket is empty and how
// long until it holds a token again.
func (l *rateLimiter) exhausted(key string) (bool, time.Duration) {
	now := l.now()
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

// middleware answers 429 rate_limited once a credential's bucket is empty, and tells every
// caller its budget in RateLimit-* headers.
func (l *rateLimiter) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		p := principalOf(c)
		ok, remaining, wait := l.take(p.ID)
		c.Header("RateLimit-Limit", strconv.Itoa(l.burst))
		c.Header("RateLimit-Remaining", strconv.Itoa(remaining))
		if ok {
			refill := time.Duration(float64(l.burst-remaining) / float64(l.perSecond) * float64(time.Second))
			c.Header("RateLimit-Reset", strconv.Itoa(int(math.Ceil(refill.Seconds()))))
			c.Next()
			return
		}
		seconds := retryAfter(wait)
		c.Header("RateLimit-Reset", seconds)
		c.Header("Retry-After", seconds)
		fail(c, CodeRateLimited, "Too many requests for this credential; retry after "+seconds+" s.")
	}
}

// retryAfter is a wait in whole seconds, at least one, for Retry-After.
func retryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
}
