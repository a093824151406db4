package store_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

func mustWebhook(t *testing.T, s *store.Store, org, app, events string, enabled bool) *store.WebhookConfig {
	t.Helper()
	now := time.Now().UTC()
	c := &store.WebhookConfig{ID: ids.New(ids.WebhookConfig), OrgID: org, App: app, URL: "https://example.com/hook", Events: events,
		Enabled: enabled, Secret: "sealed", CreatedAt: now, UpdatedAt: now}
	if err := s.CreateWebhookConfig(ctx, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func deliveriesOf(t *testing.T, s *store.Store, configID string) []store.WebhookDelivery {
	t.Helper()
	list, _, err := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{ConfigID: configID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// The transaction that commits an event queues one delivery for each enabled config of
// the event's organisation and app that wants it, records one skipped for a disabled one,
// and none for any other; a retried step queues nothing twice.
func TestEventsQueueWebhookDeliveries(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		all := mustWebhook(t, s, org, "pay", "*", true)
		submitted := mustWebhook(t, s, org, "pay", "order.submitted", true)
		disabled := mustWebhook(t, s, org, "pay", "*", false)
		otherApp := mustWebhook(t, s, org, "trade", "*", true)
		otherOrg := mustWebhook(t, s, mustOrg(t, s), "pay", "*", true)

		o := mustDraft(t, s, org, "TRANSFER")
		step := store.OrderChange{OrderID: o.ID, Step: "submitted", To: "submitted", CorrelationID: "corr-submit",
			Event: &store.EventSpec{Name: "Order.Submitted"}}
		for range 2 {
			if _, err := s.ApplyOrderStep(ctx, step); err != nil {
				t.Fatal(err)
			}
		}
		got := deliveriesOf(t, s, all.ID)
		if len(got) != 2 || got[0].Event != "Order.Submitted" || got[1].Event != "Order.Created" {
			t.Fatalf("the * config has %+v", got)
		}
		d := got[0]
		if d.Status != store.DeliveryPending || d.OrderID != o.ID || d.CorrelationID != "corr-submit" || d.NextAttemptAt == nil ||
			!ids.HasPrefix(d.MessageID, ids.WebhookMessage) || d.Payload == "" || d.Attempts != 0 {
			t.Fatalf("delivery %+v", d)
		}
		if got := deliveriesOf(t, s, submitted.ID); len(got) != 1 || got[0].Event != "Order.Submitted" || got[0].MessageID == d.MessageID {
			t.Fatalf("the order.submitted config has %+v", got)
		}
		skipped := deliveriesOf(t, s, disabled.ID)
		if len(skipped) != 2 {
			t.Fatalf("the disabled config has %d deliveries", len(skipped))
		}
		for _, d := range skipped {
			if d.Status != store.DeliverySkipped || d.NextAttemptAt != nil || d.CompletedAt == nil {
				t.Errorf("the disabled config's delivery %+v", d)
			}
		}
		for name, c := range map[string]*store.WebhookConfig{"other app": otherApp, "other org": otherOrg} {
			if got := deliveriesOf(t, s, c.ID); len(got) != 0 {
				t.Errorf("the %s config has %d deliveries", name, len(got))
			}
		}
	})
}

// Workers lease due deliveries without overlap; a lease that ends lets another worker
// take the delivery; an outcome recorded under a lost lease is dropped; the schedule and
// the run of failures are kept, and a config failing for too long is disabled.
func TestWebhookLeasesAndOutcomes(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		c := mustWebhook(t, s, org, "pay", "*", true)
		everything := mustWebhook(t, s, org, "pay", "*", false)
		watcher := mustWebhook(t, s, org, "pay", "webhook.*", false)
		for range 3 {
			mustDraft(t, s, org, "TRANSFER")
		}
		now := time.Now().UTC().Add(time.Second).Truncate(time.Millisecond)
		a, err := s.LeaseWebhookDeliveries(ctx, "worker-a", now, now.Add(10*time.Minute), 2)
		if err != nil || len(a) != 2 {
			t.Fatalf("worker a leased %d: %v", len(a), err)
		}
		b, err := s.LeaseWebhookDeliveries(ctx, "worker-b", now, now.Add(time.Minute), 10)
		if err != nil || len(b) != 1 {
			t.Fatalf("worker b leased %d: %v", len(b), err)
		}
		leased := []string{a[0].ID, a[1].ID, b[0].ID}
		sort.Strings(leased)
		if leased[0] == leased[1] || leased[1] == leased[2] {
			t.Fatalf("one delivery leased twice: %v", leased)
		}
		if more, _ := s.LeaseWebhookDeliveries(ctx, "worker-c", now, now.Add(time.Minute), 10); len(more) != 0 {
			t.Fatalf("leased again while held: %d", len(more))
		}
		// Worker b dies: once its lease ends, worker c takes its delivery.
		later := now.Add(2 * time.Minute)
		c2, err := s.LeaseWebhookDeliveries(ctx, "worker-c", later, later.Add(time.Minute), 10)
		if err != nil || len(c2) != 1 || c2[0].ID != b[0].ID {
			t.Fatalf("after the lease ended worker c leased %+v: %v", c2, err)
		}

		code := 500
		retry := now.Add(5 * time.Second)
		outcomes := []store.AttemptOutcome{
			{Attempt: store.WebhookAttempt{DeliveryID: a[0].ID, N: 1, At: now, StatusCode: &code, LatencyMs: 3}, Worker: "worker-a",
				NextAttemptAt: &retry, ConfigID: c.ID},
			{Attempt: store.WebhookAttempt{DeliveryID: a[1].ID, N: 1, At: now, LatencyMs: 2}, Worker: "worker-a", Succeeded: true, ConfigID: c.ID},
			// Worker b's lease is lost: what it reports now changes nothing.
			{Attempt: store.WebhookAttempt{DeliveryID: b[0].ID, N: 1, At: now, LatencyMs: 1}, Worker: "worker-b", Succeeded: true, ConfigID: c.ID},
		}
		if disabled, err := s.RecordWebhookAttempts(ctx, outcomes, now.Add(-time.Hour), "failing"); err != nil || len(disabled) != 0 {
			t.Fatalf("disabled %v: %v", disabled, err)
		}
		byID := map[string]store.WebhookDelivery{}
		list, attempts, err := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{ConfigID: c.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list {
			byID[d.ID] = d
		}
		if d := byID[a[0].ID]; d.Status != store.DeliveryPending || d.Attempts != 1 || d.LeasedBy != nil || !d.NextAttemptAt.Equal(retry) ||
			len(attempts[d.ID]) != 1 || *attempts[d.ID][0].StatusCode != 500 {
			t.Fatalf("the retried delivery %+v %+v", d, attempts[d.ID])
		}
		if d := byID[a[1].ID]; d.Status != store.DeliverySucceeded || d.CompletedAt == nil {
			t.Fatalf("the delivered one %+v", d)
		}
		if d := byID[b[0].ID]; d.Status != store.DeliveryPending || *d.LeasedBy != "worker-c" || len(attempts[d.ID]) != 0 {
			t.Fatalf("the delivery of the lost lease %+v %+v", d, attempts[d.ID])
		}
		got, _ := s.WebhookConfig(ctx, org, c.ID)
		if got.FailingSince != nil || !got.Enabled {
			t.Fatalf("a success among the failures: failing since %v, enabled %v", got.FailingSince, got.Enabled)
		}

		// Every attempt failing since before the window: the config is disabled, and its
		// deliveries are no longer leased.
		if _, err := s.LeaseWebhookDeliveries(ctx, "worker-a", retry, retry.Add(time.Minute), 10); err != nil {
			t.Fatal(err)
		}
		failAt := retry
		outcome := store.AttemptOutcome{Attempt: store.WebhookAttempt{DeliveryID: a[0].ID, N: 2, At: failAt, StatusCode: &code},
			Worker: "worker-a", ConfigID: c.ID}
		disabled, err := s.RecordWebhookAttempts(ctx, []store.AttemptOutcome{outcome}, failAt.Add(time.Second), "every delivery failed")
		if err != nil || len(disabled) != 1 || disabled[0] != (store.DisabledWebhook{ID: c.ID, OrgID: org, App: "pay"}) {
			t.Fatalf("disabled %v: %v", disabled, err)
		}
		got, _ = s.WebhookConfig(ctx, org, c.ID)
		if got.Enabled || got.DisabledReason == nil || *got.DisabledReason != "every delivery failed" {
			t.Fatalf("config %+v", got)
		}
		// Webhook.Disabled is an event of the app: a config that names it (webhook.*) has
		// it, one of * does not.
		if got := deliveriesOf(t, s, watcher.ID); len(got) != 1 || got[0].Event != "Webhook.Disabled" ||
			!strings.Contains(got[0].Payload, `"webhookId":"`+c.ID+`"`) || !strings.Contains(got[0].Payload, `"disabledReason":"every delivery failed"`) {
			t.Fatalf("the webhook.* config has %+v", got)
		}
		for _, d := range deliveriesOf(t, s, everything.ID) {
			if d.Event == "Webhook.Disabled" {
				t.Fatal("a * config has Webhook.Disabled")
			}
		}
		far := retry.Add(time.Hour)
		if more, _ := s.LeaseWebhookDeliveries(ctx, "worker-a", far, far.Add(time.Minute), 10); len(more) != 0 {
			t.Fatalf("a disabled config's deliveries were leased: %d", len(more))
		}
	})
}
