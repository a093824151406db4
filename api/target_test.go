package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// A NUL or a byte that is not UTF-8 in a path names nothing, and in a query is refused as
// invalid, on both databases: never a 500 from PostgreSQL refusing it as text.
func TestUnprintableTargetsAreRefusedNotFailed(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		creds, err := seed.Ensure(context.Background(), s, t.TempDir(), seed.URLs{BaseURL: "http://test"}, log)
		if err != nil {
			t.Fatal(err)
		}
		h := NewRouter(Config{Store: s, Log: log, Service: &service.Service{Store: s, Log: log, Webhooks: testWebhooks(t)}})
		for _, tc := range []struct {
			target string
			status int
			code   string
		}{
			{"/api/v1/payments/ord_%00", 404, apitypes.CodeNotFound},
			{"/api/v1/payments/ord_%FF", 404, apitypes.CodeNotFound},
			{"/developer/webhooks/whk_%00", 404, apitypes.CodeNotFound},
			{"/api/v1/events?orderId=%00", 422, apitypes.CodeValidationFailed},
			{"/api/v1/payments?status=%C3", 422, apitypes.CodeValidationFailed},
			{"/api/v1/events?orderId=ord_nothing", 200, ""},
		} {
			req := httptest.NewRequest("GET", tc.target, nil)
			req.Header.Set("Authorization", "Bearer "+creds.Keys["pay"].SK)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var p Problem
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			if rec.Code != tc.status || p.Code != tc.code {
				t.Errorf("GET %s: %d %q, want %d %q (%s)", tc.target, rec.Code, p.Code, tc.status, tc.code, rec.Body)
			}
		}
	})
}
