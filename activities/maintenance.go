package activities

import (
	"context"
	"math"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/opentreasury/treasury/internal/store"
)

// MaintenanceStore is what the hourly maintenance needs of the store (*store.Store).
type MaintenanceStore interface {
	DeleteExpired(ctx context.Context, kind store.Expiring, cutoff time.Time, batch int, progress func(store.Deleted)) (store.Deleted, error)
}

// Maintenance holds the housekeeping activities: each deletes one kind of row past its
// retention, in batches (store.DeleteExpired), and returns how many rows went.
type Maintenance struct {
	Store     MaintenanceStore
	Retention Retention
	Now       func() time.Time
	// Observe, when set, hears what each delete removed and what its batches cost.
	Observe func(kind store.Expiring, d store.Deleted)
}

// Retention says how long maintenance keeps each kind of row it deletes, and how many rows
// one delete statement takes; assemble reads it from EVENT_RETENTION, WEBHOOK_RETENTION,
// REQUEST_LOG_RETENTION, OAUTH_TOKEN_RETENTION and MAINTENANCE_BATCH. Idempotency records
// and console sessions carry their own expiry, written with them, and go once it passes.
type Retention struct {
	// Events is how long a stored event stays listable (GET /events, SPEC 3.7).
	Events time.Duration
	// Webhooks is how long a webhook delivery that has ended (succeeded, failed or was
	// skipped) is kept, with its attempts, after it ended.
	Webhooks time.Duration
	// RequestLogs is how long a request log is kept.
	RequestLogs time.Duration
	// OAuthTokens is how long an OAuth access token's row outlives its expiry.
	OAuthTokens time.Duration
	// Batch is how many rows one delete statement takes, in a transaction of its own.
	Batch int
}

// Forever, as a retention, keeps every row of its kind.
const Forever time.Duration = math.MaxInt64

// deadlineMargin is how long before its timeout a delete stops and reports what it did.
const deadlineMargin = 15 * time.Second

func (m *Maintenance) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// DeleteExpiredIdempotencyKeys removes idempotency records past their expiry.
func (m *Maintenance) DeleteExpiredIdempotencyKeys(ctx context.Context) (int64, error) {
	return m.deleteExpired(ctx, store.ExpiringIdempotencyRecords, 0)
}

// DeleteExpiredEvents removes stored events older than Retention.Events.
func (m *Maintenance) DeleteExpiredEvents(ctx context.Context) (int64, error) {
	return m.deleteExpired(ctx, store.ExpiringEvents, m.Retention.Events)
}

// DeleteExpiredOAuthTokens removes access tokens expired longer ago than
// Retention.OAuthTokens.
func (m *Maintenance) DeleteExpiredOAuthTokens(ctx context.Context) (int64, error) {
	return m.deleteExpired(ctx, store.ExpiringOAuthTokens, m.Retention.OAuthTokens)
}

// DeleteExpiredRequestLogs removes request logs older than Retention.RequestLogs.
func (m *Maintenance) DeleteExpiredRequestLogs(ctx context.Context) (int64, error) {
	return m.deleteExpired(ctx, store.ExpiringRequestLogs, m.Retention.RequestLogs)
}

// DeleteExpiredSessions removes what lets a person in once it has expired: console
// sessions, one-time sign-in links and wallet registration challenges.
func (m *Maintenance) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	var total int64
	for _, kind := range []store.Expiring{store.ExpiringSessions, store.ExpiringSignInLinks, store.ExpiringWalletChallenges} {
		n, err := m.deleteExpired(ctx, kind, 0)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// DeleteExpiredWebhookDeliveries removes webhook deliveries that ended longer ago than
// Retention.Webhooks, with their attempts; pending ones stay.
func (m *Maintenance) DeleteExpiredWebhookDeliveries(ctx context.Context) (int64, error) {
	return m.deleteExpired(ctx, store.ExpiringWebhookDeliveries, m.Retention.Webhooks)
}

// deleteExpired deletes the rows of a kind whose time is more than keep ago. Run as an
// activity, it heartbeats after every batch, and stops short of its timeout: a backlog too
// large for one run (a retention just shortened, a table that was never cleaned) is worked
// off by the hourly runs that follow, each reporting what it deleted, instead of timing
// out and being retried.
func (m *Maintenance) deleteExpired(ctx context.Context, kind store.Expiring, keep time.Duration) (int64, error) {
	if keep == Forever {
		return 0, nil
	}
	cutoff := m.now().Add(-keep)
	var progress func(store.Deleted)
	stop := ctx
	if activity.IsActivity(ctx) {
		progress = func(d store.Deleted) { activity.RecordHeartbeat(ctx, d.Rows) }
		if deadline := activity.GetInfo(ctx).Deadline; !deadline.IsZero() {
			var cancel context.CancelFunc
			stop, cancel = context.WithDeadline(ctx, deadline.Add(-deadlineMargin))
			defer cancel()
		}
	}
	d, err := m.Store.DeleteExpired(stop, kind, cutoff, m.Retention.Batch, progress)
	if m.Observe != nil {
		m.Observe(kind, d)
	}
	if err != nil && stop.Err() != nil && ctx.Err() == nil {
		return d.Rows, nil // out of time: the next run goes on from here
	}
	return d.Rows, err
}
