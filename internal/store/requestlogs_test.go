package store_test

import (
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

func TestRequestLogsRetentionAndPaging(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		now := time.Now().UTC()
		row := func(app string, at time.Time) store.RequestLog {
			return store.RequestLog{ID: ids.New("req"), OrgID: "org_1", App: app, Method: "GET", Path: "/api/v1/payments",
				Status: 200, LatencyMs: 1.5, KeyID: "key_1", CorrelationID: "c", At: at}
		}
		old, recent, other := row("pay", now.Add(-8*24*time.Hour)), row("pay", now), row("trade", now)
		if err := s.AppendRequestLogs(ctx, []store.RequestLog{old, recent, other}); err != nil {
			t.Fatal(err)
		}
		d, err := s.DeleteExpired(ctx, store.ExpiringRequestLogs, now.Add(-7*24*time.Hour), 1000, nil)
		if err != nil || d.Rows != 1 {
			t.Fatalf("deleted %+v, %v", d, err)
		}
		list, err := s.ListRequestLogs(ctx, "org_1", "pay", store.RequestLogFilter{}, "", 10)
		if err != nil || len(list) != 1 || list[0].ID != recent.ID {
			t.Fatalf("pay logs %+v %v", list, err)
		}
		if list, _ := s.ListRequestLogs(ctx, "org_1", "pay", store.RequestLogFilter{}, recent.ID, 10); len(list) != 0 {
			t.Fatalf("page after the last: %+v", list)
		}
	})
}
