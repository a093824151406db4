package store_test

import (
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// runRecovery advances a recovery page by page until it ends.
func runRecovery(t *testing.T, s *store.Store, r *store.WebhookRecovery, size int) *store.WebhookRecovery {
	t.Helper()
	for range 100 {
		var err error
		if r, err = s.RecoverWebhookPage(ctx, r, size, time.Now()); err != nil {
			t.Fatal(err)
		}
		if r.Status != store.RecoveryRunning {
			return r
		}
	}
	t.Fatal("the recovery never ended")
	return nil
}

func newRecovery(t *testing.T, s *store.Store, c *store.WebhookConfig, since, until time.Time) *store.WebhookRecovery {
	t.Helper()
	now := time.Now()
	r := &store.WebhookRecovery{ID: ids.New(ids.WebhookRecovery), OrgID: c.OrgID, ConfigID: c.ID, Since: since, Until: until,
		Status: store.RecoveryRunning, Creator: store.Creator{CreatedBy: "key_test"}, CorrelationID: "corr", CreatedAt: now, UpdatedAt: now}
	if err := s.CreateWebhookRecovery(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// A recovery sends again, with the same webhook-id, each message of its window whose last
// delivery failed or was skipped while the webhook was disabled, and no other; a page
// retried after it committed, and a second recovery of the same window, send nothing
// twice.
func TestWebhookRecoveryRequeuesFailedAndSkippedMessagesOnce(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		c := mustWebhook(t, s, org, "pay", "*", true)
		before := mustDraft(t, s, org, "TRANSFER")
		since := time.Now()
		wait.For(t, time.Second, "the clock to pass a millisecond after since", func() bool {
			return time.Now().After(since.Add(time.Millisecond))
		})
		b, cc, d := mustDraft(t, s, org, "TRANSFER"), mustDraft(t, s, org, "TRANSFER"), mustDraft(t, s, org, "TRANSFER")

		at := time.Now().Add(time.Second)
		leased, err := s.LeaseWebhookDeliveries(ctx, "worker", at, at.Add(time.Minute), 10)
		if err != nil || len(leased) != 4 {
			t.Fatalf("leased %d: %v", len(leased), err)
		}
		retry := at.Add(time.Hour)
		var outcomes []store.AttemptOutcome
		for _, dl := range leased {
			o := store.AttemptOutcome{Attempt: store.WebhookAttempt{DeliveryID: dl.ID, N: 8, At: at}, Worker: "worker", ConfigID: c.ID}
			switch dl.OrderID {
			case b.ID:
				o.Succeeded = true
			case d.ID:
				o.NextAttemptAt = &retry
			}
			outcomes = append(outcomes, o)
		}
		if _, err := s.RecordWebhookAttempts(ctx, outcomes, at.Add(-time.Hour), "failing"); err != nil {
			t.Fatal(err)
		}
		c.Enabled = false
		if err := s.SaveWebhookConfig(ctx, c); err != nil {
			t.Fatal(err)
		}
		e, f := mustDraft(t, s, org, "TRANSFER"), mustDraft(t, s, org, "TRANSFER")
		c.Enabled = true
		if err := s.SaveWebhookConfig(ctx, c); err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(time.Hour)

		r := newRecovery(t, s, c, since, until)
		done := runRecovery(t, s, r, 2)
		if done.Status != store.RecoveryCompleted || done.Scanned != 5 || done.Requeued != 3 || done.CompletedAt == nil {
			t.Fatalf("recovery %+v", done)
		}
		byOrder := map[string][]store.WebhookDelivery{}
		all := deliveriesOf(t, s, c.ID)
		for _, dl := range all {
			byOrder[dl.OrderID] = append(byOrder[dl.OrderID], dl)
		}
		for _, o := range []*store.Order{cc, e, f} {
			got := byOrder[o.ID] // newest first
			if len(got) != 2 || got[0].Redelivery != 1 || got[0].Status != store.DeliveryPending || got[0].MessageID != got[1].MessageID ||
				got[0].Payload != got[1].Payload {
				t.Errorf("order %s: %+v", o.ID, got)
			}
		}
		for _, o := range []*store.Order{before, b, d} {
			if got := byOrder[o.ID]; len(got) != 1 {
				t.Errorf("order %s was sent again: %+v", o.ID, got)
			}
		}

		// The first page again, as a retry after its commit would run it: nothing more.
		again, err := s.RecoverWebhookPage(ctx, r, 2, time.Now())
		if err != nil || again.Requeued != 3 || again.Status != store.RecoveryCompleted {
			t.Fatalf("a retried page: %+v, %v", again, err)
		}
		second := runRecovery(t, s, newRecovery(t, s, c, since, until), 10)
		if second.Scanned != 5 || second.Requeued != 0 {
			t.Fatalf("a second recovery: %+v", second)
		}
		if n := len(deliveriesOf(t, s, c.ID)); n != len(all) {
			t.Fatalf("%d deliveries, then %d", len(all), n)
		}
	})
}

// A throttled attempt (429 or 503 with Retry-After) is recorded, waits as asked, and is
// no failure: the config's run of failures neither starts nor ends with it.
func TestThrottledAttemptsAreNotFailures(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		c := mustWebhook(t, s, org, "pay", "*", true)
		mustDraft(t, s, org, "TRANSFER")
		at := time.Now().Add(time.Second)
		leased, err := s.LeaseWebhookDeliveries(ctx, "worker", at, at.Add(time.Minute), 10)
		if err != nil || len(leased) != 1 {
			t.Fatalf("leased %d: %v", len(leased), err)
		}
		code, later := 429, at.Add(time.Minute)
		o := store.AttemptOutcome{Attempt: store.WebhookAttempt{DeliveryID: leased[0].ID, N: 1, At: at, StatusCode: &code},
			Worker: "worker", ConfigID: c.ID, NextAttemptAt: &later, Throttled: true}
		if _, err := s.RecordWebhookAttempts(ctx, []store.AttemptOutcome{o}, at.Add(time.Hour), "failing"); err != nil {
			t.Fatal(err)
		}
		got, _ := s.WebhookConfig(ctx, org, c.ID)
		if got.FailingSince != nil || !got.Enabled {
			t.Fatalf("a throttled attempt counted as a failure: %+v", got)
		}
		list, attempts, err := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{ConfigID: c.ID, Limit: 10})
		if err != nil || len(list) != 1 || list[0].Attempts != 1 || list[0].Throttled != 1 || list[0].Status != store.DeliveryPending ||
			list[0].NextAttemptAt.Sub(later).Abs() > time.Millisecond || len(attempts[list[0].ID]) != 1 {
			t.Fatalf("delivery %+v %+v: %v", list, attempts, err)
		}
	})
}
