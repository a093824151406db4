package api

import (
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/service"
)

func TestRateLimitPerCredential(t *testing.T) {
	f := newFixture(t)
	f.handler = NewRouter(Config{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RateLimit: 1, RateBurst: 3, Service: &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	key := f.creds.Keys["treasury"].SK
	for i := range 3 {
		r := f.do(t, "GET", "/api/v1/treasury/portfolio", key, nil)
		if r.status != 200 || r.header.Get("RateLimit-Limit") != "3" || r.header.Get("RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Fatalf("request %d: %d limit %q remaining %q", i, r.status, r.header.Get("RateLimit-Limit"), r.header.Get("RateLimit-Remaining"))
		}
	}
	r := f.do(t, "GET", "/api/v1/treasury/portfolio", key, nil)
	r.wantProblem(t, 429, apitypes.CodeRateLimited)
	if r.header.Get("Retry-After") != "1" || r.header.Get("RateLimit-Remaining") != "0" || r.header.Get("RateLimit-Reset") == "" {
		t.Fatalf("429 headers %v", r.header)
	}
	// Another credential has its own bucket.
	if r := f.do(t, "GET", "/api/v1/treasury/portfolio", f.creds.Keys["treasury"].Read, nil); r.status != 200 {
		t.Fatalf("another key: %d", r.status)
	}
	// A rejected request costs nothing: after a second, one token is back.
	time.Sleep(1100 * time.Millisecond)
	if r := f.do(t, "GET", "/api/v1/treasury/portfolio", key, nil); r.status != 200 {
		t.Fatalf("after the refill: %d %s", r.status, r.body)
	}
}
