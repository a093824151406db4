package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// A delete goes oldest first, a batch at a time, until a batch comes back short, and
// reports each batch as it commits; rows at or after the cutoff stay.
func TestDeleteExpiredGoesInBatchesOldestFirst(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		var rows []store.RequestLog
		for i := range 25 {
			rows = append(rows, store.RequestLog{ID: ids.New("req"), OrgID: "org_1", App: "pay", Method: "GET", Path: "/p",
				Status: 200, KeyID: "key_1", CorrelationID: "c", At: now.Add(time.Duration(i-20) * time.Minute)})
		}
		if err := s.AppendRequestLogs(ctx, rows); err != nil {
			t.Fatal(err)
		}
		var seen []store.Deleted
		d, err := s.DeleteExpired(ctx, store.ExpiringRequestLogs, now, 8, func(d store.Deleted) { seen = append(seen, d) })
		if err != nil || d.Rows != 20 || d.Batches != 3 || d.Longest <= 0 || d.Took < d.Longest {
			t.Fatalf("deleted %+v (%v), want 20 rows in batches of 8, 8 and 4", d, err)
		}
		if len(seen) != 3 || seen[0].Rows != 8 || seen[1].Rows != 16 || seen[2] != d {
			t.Fatalf("progress %+v", seen)
		}
		left, err := s.ListRequestLogs(ctx, "org_1", "pay", store.RequestLogFilter{}, "", 100)
		if err != nil || len(left) != 5 || !left[4].At.Equal(now) {
			t.Fatalf("left %d (%v), the oldest at %v; want the 5 from the cutoff on", len(left), err, left[len(left)-1].At)
		}
		// A batch that comes back empty ends the delete at once.
		if d, err := s.DeleteExpired(ctx, store.ExpiringRequestLogs, now, 8, nil); err != nil || d.Rows != 0 || d.Batches != 1 {
			t.Fatalf("nothing left to delete: %+v %v", d, err)
		}
	})
}

func TestDeleteExpiredStopsWhenItsContextEnds(t *testing.T) {
	s := storetest.NewSQLite(t)
	if err := s.AppendRequestLogs(ctx, []store.RequestLog{{ID: ids.New("req"), OrgID: "org_1", App: "pay", At: time.Unix(0, 0)}}); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if d, err := s.DeleteExpired(ended, store.ExpiringRequestLogs, time.Now(), 10, nil); !errors.Is(err, context.Canceled) || d.Rows != 0 {
		t.Fatalf("deleted %+v (%v) after its context ended", d, err)
	}
	if _, err := s.DeleteExpired(ctx, store.ExpiringRequestLogs, time.Now(), 0, nil); err == nil {
		t.Fatal("a batch of no rows deletes nothing, forever: refused")
	}
}

// Webhook deliveries go once they have ended, by when they did, and their attempts with
// them; a pending delivery stays however old it is.
func TestExpiredWebhookDeliveriesGoWithTheirAttempts(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		c := mustWebhook(t, s, org, "pay", "*", true)
		for range 4 {
			mustDraft(t, s, org, "TRANSFER")
		}
		now := time.Now().UTC().Add(time.Second)
		leased, err := s.LeaseWebhookDeliveries(ctx, "worker-a", now, now.Add(time.Minute), 10)
		if err != nil || len(leased) != 4 {
			t.Fatalf("leased %d: %v", len(leased), err)
		}
		longAgo, code := now.Add(-40*24*time.Hour), 500
		retry := now.Add(time.Hour)
		attempt := func(d store.WebhookDelivery, at time.Time) store.WebhookAttempt {
			return store.WebhookAttempt{DeliveryID: d.ID, N: 1, At: at, StatusCode: &code, LatencyMs: 1}
		}
		outcomes := []store.AttemptOutcome{
			{Attempt: attempt(leased[0], longAgo), Worker: "worker-a", Succeeded: true, ConfigID: c.ID},
			{Attempt: attempt(leased[1], longAgo), Worker: "worker-a", ConfigID: c.ID},                        // failed for good
			{Attempt: attempt(leased[2], longAgo), Worker: "worker-a", NextAttemptAt: &retry, ConfigID: c.ID}, // pending
			{Attempt: attempt(leased[3], now), Worker: "worker-a", Succeeded: true, ConfigID: c.ID},
		}
		if _, err := s.RecordWebhookAttempts(ctx, outcomes, longAgo.Add(-time.Hour), "failing"); err != nil {
			t.Fatal(err)
		}
		d, err := s.DeleteExpired(ctx, store.ExpiringWebhookDeliveries, now.Add(-30*24*time.Hour), 1000, nil)
		if err != nil || d.Rows != 2 {
			t.Fatalf("deleted %+v (%v), want the succeeded and the failed delivery of 40 days ago", d, err)
		}
		left := map[string]bool{}
		for _, dl := range deliveriesOf(t, s, c.ID) {
			left[dl.ID] = true
		}
		if len(left) != 2 || !left[leased[2].ID] || !left[leased[3].ID] {
			t.Fatalf("left %v, want the pending delivery and the recent one", left)
		}
		counts, err := s.RowCounts(ctx)
		if err != nil || counts["webhook_attempts"] != 2 || counts["webhook_deliveries"] != 2 {
			t.Fatalf("rows left %v (%v): the attempts of the deleted deliveries go with them", counts, err)
		}
	})
}
