package dispatch

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/opentreasury/treasury/internal/store"
)

// rateLimits are the token buckets of the configs with a rate limit of their own, as one
// dispatcher keeps them: each worker process holds an endpoint to its rate, so N workers
// send it at most N times as many.
type rateLimits map[string]*rate.Limiter

// reserve takes a config's next turn to send: how long to wait for it, and ok false when
// the turn would come later than within, which takes no turn.
func (r rateLimits) reserve(cfg *store.WebhookConfig, now time.Time, within time.Duration) (time.Duration, bool) {
	if cfg.RateLimit == nil || *cfg.RateLimit <= 0 {
		delete(r, cfg.ID)
		return 0, true
	}
	per := rate.Limit(*cfg.RateLimit)
	lim := r[cfg.ID]
	if lim == nil {
		// A burst of one second's worth: the rate holds over any second, not over every
		// gap between two messages.
		lim = rate.NewLimiter(per, *cfg.RateLimit)
		r[cfg.ID] = lim
	} else if lim.Limit() != per {
		lim.SetLimitAt(now, per)
		lim.SetBurstAt(now, *cfg.RateLimit)
	}
	res := lim.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	if !res.OK() || wait > within {
		res.CancelAt(now)
		return 0, false
	}
	return wait, true
}

// spent lists the configs that have no turn to spare at now: leasing more of their
// deliveries would only hold them.
func (r rateLimits) spent(now time.Time) []string {
	var out []string
	for id, lim := range r {
		if lim.TokensAt(now) < 1 {
			out = append(out, id)
		}
	}
	return out
}

// nextTurn is how long until the first config without a turn to spare has one; zero
// when none is without.
func (r rateLimits) nextTurn(now time.Time) time.Duration {
	var next time.Duration
	for _, lim := range r {
		if tokens := lim.TokensAt(now); tokens < 1 {
			wait := time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
			if next == 0 || wait < next {
				next = wait
			}
		}
	}
	return next
}
