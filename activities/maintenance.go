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

// DeleteExpiredIdempotencyKeys removes idempotency records past their retention.
func (m *Maintenance) DeleteExpiredIdempotencyKeys(ctx context.Context) (int64, error) {
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	return m.Store.DeleteExpiredIdempotencyKeys(ctx, now())
}
