package storetest

import (
	"context"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

// Traffic writes the service's traffic to a store an hour at a time, at times the caller
// chooses (a soak compresses days into seconds this way): every kind of row the hourly
// maintenance keeps bounded, written the way the service writes it. Each order commits
// three events (created, submitted, confirmed), each of which queues a delivery to the one
// webhook; at the end of each hour a worker attempts every delivery that is due: one in
// four fails and is retried half an hour later (in the next hour, where it succeeds), one
// in ten fails for good. Each order's request carries an Idempotency-Key.
type Traffic struct {
	Store              *store.Store
	OrdersPerHour      int
	RequestLogsPerHour int
	TokensPerHour      int
	// IdempotencyRetention and TokenTTL set the expiry of the Idempotency-Key records and
	// the OAuth tokens written, as the API does.
	IdempotencyRetention, TokenTTL time.Duration

	// Written tells, per table, how many rows the traffic wrote and how long the calls that
	// wrote them took (see Writes).
	Written map[string]Writes

	org, wallet, webhook, client string
	deliveries                   int
}

// Writes is what the traffic wrote to one table. The calls are the service's own, and
// several write more than one table: Took for events is the order transactions' (which
// write the order, its history and the webhook deliveries too; webhook_deliveries has no
// time of its own), and Took for webhook_attempts is the leases' and the outcomes'.
type Writes struct {
	Rows int64
	Took time.Duration
}

// Setup writes what the traffic hangs off: an organisation with a wallet, a webhook that
// wants every event of its app, and an OAuth client.
func (t *Traffic) Setup(ctx context.Context, at time.Time) error {
	t.Written = map[string]Writes{}
	t.org, t.wallet = ids.New(ids.Organization), ids.New(ids.Wallet)
	t.webhook, t.client = ids.New(ids.WebhookConfig), ids.New(ids.OAuthClient)
	if err := t.Store.CreateOrganization(ctx, &store.Organization{ID: t.org, Name: "Soak", CreatedAt: at}); err != nil {
		return err
	}
	if err := t.Store.CreateWallet(ctx, &store.Wallet{ID: t.wallet, OrgID: t.org, Chain: "ethereum", Address: ids.New("addr"),
		PublicKey: "pk", CreatedAt: at}); err != nil {
		return err
	}
	if err := t.Store.CreateWebhookConfig(ctx, &store.WebhookConfig{ID: t.webhook, OrgID: t.org, App: "pay",
		URL: "https://example.com/hook", Events: "*", Enabled: true, Secret: "sealed", CreatedAt: at, UpdatedAt: at}); err != nil {
		return err
	}
	return t.Store.CreateOAuthClient(ctx, &store.OAuthClient{ID: t.client, OrgID: t.org, App: "pay", SecretHash: ids.New("hash"),
		Scopes: "pay", Label: "soak", CreatedAt: at})
}

// Hour writes one hour of traffic, spread evenly over the hour from start.
func (t *Traffic) Hour(ctx context.Context, start time.Time) error {
	start = start.UTC()
	for i := range t.OrdersPerHour {
		if err := t.order(ctx, start.Add(spread(i, t.OrdersPerHour))); err != nil {
			return err
		}
	}
	if err := t.attempt(ctx, start.Add(59*time.Minute)); err != nil {
		return err
	}
	logs := make([]store.RequestLog, t.RequestLogsPerHour)
	for i := range logs {
		logs[i] = store.RequestLog{ID: ids.New("req"), OrgID: t.org, App: "pay", Method: "GET", Path: "/api/v1/payments",
			Status: 200, LatencyMs: 1, KeyID: t.client, CorrelationID: "soak", At: start.Add(spread(i, len(logs)))}
	}
	if err := t.timed("request_logs", int64(len(logs)), func() error { return t.Store.AppendRequestLogs(ctx, logs) }); err != nil {
		return err
	}
	for i := range t.TokensPerHour {
		at := start.Add(spread(i, t.TokensPerHour))
		tok := &store.OAuthToken{TokenHash: ids.New("tok"), ClientID: t.client, OrgID: t.org, App: "pay", Actions: "read",
			Scope: "pay", CreatedAt: at, ExpiresAt: at.Add(t.TokenTTL)}
		if err := t.timed("oauth_tokens", 1, func() error { return t.Store.CreateOAuthToken(ctx, tok) }); err != nil {
			return err
		}
	}
	return nil
}

// order writes one payment's request and lifecycle: its Idempotency-Key record and the
// transactions that commit its three events.
func (t *Traffic) order(ctx context.Context, at time.Time) error {
	rec := &store.IdempotencyRecord{OrgID: t.org, Key: ids.New("idem"), Method: "POST", Path: "/api/v1/payments",
		Fingerprint: "soak", CreatedAt: at, ExpiresAt: at.Add(t.IdempotencyRetention)}
	err := t.timed("idempotency_records", 1, func() error {
		if _, err := t.Store.ClaimIdempotencyKey(ctx, rec, at.Add(-time.Minute)); err != nil {
			return err
		}
		return t.Store.CompleteIdempotencyKey(ctx, t.org, rec.Key, at, 201, "", []byte("{}"))
	})
	if err != nil {
		return err
	}
	o := &store.Order{ID: ids.New(ids.Order), OrgID: t.org, App: "pay", Domain: "payment", Status: "draft", WalletID: t.wallet,
		Chain: "ethereum", Details: orders.Fields{Details: &orders.Payment{Asset: "USDC", Amount: decimal.RequireFromString("5")}}, PayloadHash: "h", CreatedBy: t.client,
		CorrelationID: "soak", CreatedAt: at, UpdatedAt: at}
	o.WorkflowID = "order-" + o.ID
	steps := []store.OrderChange{
		{Step: "submitted", To: "submitted", Event: &store.EventSpec{Name: "Order.Submitted"}},
		{Step: "confirmed", To: "confirmed", Event: &store.EventSpec{Name: "Order.Confirmed"}},
	}
	err = t.timed("events", 1+int64(len(steps)), func() error {
		if _, err := t.Store.CreateOrder(ctx, o, nil, store.EventSpec{Name: "Order.Created"}, nil, nil); err != nil {
			return err
		}
		for i, ch := range steps {
			ch.OrderID, ch.CorrelationID, ch.At = o.ID, "soak", at.Add(time.Duration(i+1)*time.Second)
			if _, err := t.Store.ApplyOrderStep(ctx, ch); err != nil {
				return err
			}
		}
		return nil
	})
	// One delivery per event, written by the event's transaction: the webhook wants them all.
	t.add("webhook_deliveries", 1+int64(len(steps)), 0)
	return err
}

// attempt leases every delivery due at now and records an attempt of each.
func (t *Traffic) attempt(ctx context.Context, now time.Time) error {
	var leased []store.WebhookDelivery
	err := t.timed("webhook_attempts", 0, func() error {
		var err error
		leased, err = t.Store.LeaseWebhookDeliveries(ctx, "soak", now, now.Add(time.Minute), 1<<20)
		if err != nil || len(leased) == 0 {
			return err
		}
		outcomes := make([]store.AttemptOutcome, len(leased))
		retry, code := now.Add(30*time.Minute), 500
		for i, d := range leased {
			t.deliveries++
			o := store.AttemptOutcome{Attempt: store.WebhookAttempt{DeliveryID: d.ID, N: d.Attempts + 1, At: now, LatencyMs: 1},
				Worker: "soak", Succeeded: true, ConfigID: t.webhook}
			switch {
			case d.Attempts > 0: // a retry: it goes through
			case t.deliveries%10 == 0:
				o.Succeeded, o.Attempt.StatusCode = false, &code
			case t.deliveries%4 == 0:
				o.Succeeded, o.Attempt.StatusCode, o.NextAttemptAt = false, &code, &retry
			}
			outcomes[i] = o
		}
		// No failure ever lasts long enough to disable the webhook.
		_, err = t.Store.RecordWebhookAttempts(ctx, outcomes, time.Time{}, "soak")
		return err
	})
	t.add("webhook_attempts", int64(len(leased)), 0)
	return err
}

// timed runs write, counting rows written to table and the time write took.
func (t *Traffic) timed(table string, rows int64, write func() error) error {
	start := time.Now()
	if err := write(); err != nil {
		return fmt.Errorf("soak traffic, %s: %w", table, err)
	}
	t.add(table, rows, time.Since(start))
	return nil
}

func (t *Traffic) add(table string, rows int64, took time.Duration) {
	w := t.Written[table]
	w.Rows += rows
	w.Took += took
	t.Written[table] = w
}

// spread is the offset of the i-th of n things spread evenly over an hour.
func spread(i, n int) time.Duration { return time.Duration(i) * time.Hour / time.Duration(max(n, 1)) }
