package api

import (
	"math"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/ratelimit"
)

// rateLimit answers 429 rate_limited once a credential's bucket is empty, and tells every
// caller its budget in RateLimit-* headers.
func rateLimit(l *ratelimit.Limiter, m *metrics.Metrics) gin.HandlerFunc {
	return func(c *gin.Context) {
		p := principalOf(c)
		ok, remaining, wait := l.Take(p.ID)
		c.Header("RateLimit-Limit", strconv.Itoa(l.Burst))
		c.Header("RateLimit-Remaining", strconv.Itoa(remaining))
		if ok {
			refill := time.Duration(float64(l.Burst-remaining) / float64(l.PerSecond) * float64(time.Second))
			c.Header("RateLimit-Reset", strconv.Itoa(int(math.Ceil(refill.Seconds()))))
			c.Next()
			return
		}
		m.RateLimited(metrics.LimiterCredential)
		seconds := retryAfter(wait)
		c.Header("RateLimit-Reset", seconds)
		c.Header("Retry-After", seconds)
		fail(c, apitypes.CodeRateLimited, "Too many requests for this credential; retry after "+seconds+" s.")
	}
}

// retryAfter is a wait in whole seconds, at least one, for Retry-After.
func retryAfter(wait time.Duration) string { return strconv.Itoa(ratelimit.RetryAfter(wait)) }
