package dispatch

import (
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/store"
)

// A config's turns: a burst of one second's worth at once, then one per 1/rate; a turn
// later than asked for is not taken; the time to the next turn is what the dispatcher
// waits before leasing for a config that has none to spare.
func TestRateLimitTurns(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	rate := 2
	cfg := &store.WebhookConfig{ID: "whk_1", RateLimit: &rate}
	r := rateLimits{}
	for i := range 2 {
		if wait, ok := r.reserve(cfg, now, time.Minute); !ok || wait != 0 {
			t.Fatalf("turn %d of the burst: %v %v", i, wait, ok)
		}
	}
	if got := r.spent(now); len(got) != 1 || got[0] != "whk_1" || r.nextTurn(now) != 500*time.Millisecond {
		t.Fatalf("after the burst: spent %v, next turn in %v", got, r.nextTurn(now))
	}
	if wait, ok := r.reserve(cfg, now, time.Minute); !ok || wait != 500*time.Millisecond {
		t.Fatalf("the third turn: %v %v", wait, ok)
	}
	if _, ok := r.reserve(cfg, now, 900*time.Millisecond); ok {
		t.Fatal("a turn a second away was taken within 900 ms")
	}
	if wait, ok := r.reserve(cfg, now, time.Minute); !ok || wait != time.Second {
		t.Fatalf("the refused turn was kept: the next is in %v", wait)
	}
	cfg.RateLimit = nil
	if wait, ok := r.reserve(cfg, now, 0); !ok || wait != 0 || len(r.spent(now)) != 0 || r.nextTurn(now) != 0 {
		t.Fatal("a config without a rate limit waits")
	}
}
