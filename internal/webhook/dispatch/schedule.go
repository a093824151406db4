package dispatch

import (
	"math/rand/v2"
	"time"
)

// retryDelays are the waits after each failed attempt: the Svix schedule, about 27.5 hours
// in all (SPEC 6). After the last one fails the delivery has failed.
var retryDelays = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// MaxAttempts is how many attempts a delivery gets: the first and one per retry delay.
var MaxAttempts = len(retryDelays) + 1

// failingWindow is how long a config may fail every attempt before it is disabled.
const failingWindow = 5 * 24 * time.Hour

// jitter spreads a retry by ±20 %, so that receivers that failed together are not tried
// again together.
const jitter = 0.2

// Schedule says when a failed delivery is tried again.
type Schedule struct {
	// Scale multiplies every delay and the failing window: 1 in production; the dev bundle's
	// --webhook-backoff-scale makes retries come in seconds for tests and demos.
	Scale float64
	// Rand returns a number in [0, 1) for the jitter (math/rand when nil).
	Rand func() float64
}

func (s Schedule) scaled(d time.Duration) time.Duration {
	if s.Scale <= 0 {
		return d
	}
	return time.Duration(float64(d) * s.Scale)
}

// After is when to try again after attempt n failed at now, or nil when it was the last.
func (s Schedule) After(n int, now time.Time) *time.Time {
	if n < 1 || n > len(retryDelays) {
		return nil
	}
	r := s.Rand
	if r == nil {
		r = rand.Float64
	}
	wait := s.scaled(retryDelays[n-1])
	wait = time.Duration(float64(wait) * (1 - jitter + 2*jitter*r()))
	at := now.Add(wait)
	return &at
}
