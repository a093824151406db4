package activities

import (
	"context"
	"time"

	"github.com/opentreasury/treasury/store"
)

// Maintenance holds the housekeeping activities.
type Maintenance struct {
	Store *store.Store
	Now   func() time.Time
}

// EventRetention is how long stored events stay listable (SPEC 3.7).
const EventRetention = 30 * 24 * time.Hour

func (m *Maintenance) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// DeleteExpiredIdempotencyKeys removes idempotency records past their retention.
func (m *Maintenance) DeleteExpiredIdempotencyKeys(ctx context.Context) (int64, error) {
	return m.Store.DeleteExpiredIdempotencyKeys(ctx, m.now())
}

// DeleteExpiredEvents removes stored events older than EventRetention.
func (m *Maintenance) DeleteExpiredEvents(ctx context.Context) (int64, error) {
	return m.Store.DeleteEventsBefore(ctx, m.now().Add(-EventRetention))
}

// DeleteExpiredOAuthTokens removes access tokens past their expiry.
func (m *Maintenance) DeleteExpiredOAuthTokens(ctx context.Context) (int64, error) {
	return m.Store.DeleteExpiredOAuthTokens(ctx, m.now())
}

// DeleteExpiredRequestLogs removes request logs older than their retention.
func (m *Maintenance) DeleteExpiredRequestLogs(ctx context.Context) (int64, error) {
	return m.Store.DeleteRequestLogsBefore(ctx, m.now().Add(-store.RequestLogRetention))
}

// DeleteExpiredSessions removes console sessions past their expiry.
func (m *Maintenance) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	return m.Store.DeleteExpiredSessions(ctx, m.now())
}
