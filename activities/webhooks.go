package activities

import (
	"context"
	"errors"
	"time"

	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// RecoveryStore is what a webhook recovery needs of the store (*store.Store).
type RecoveryStore interface {
	WebhookRecoveryOf(ctx context.Context, configID, id string) (*store.WebhookRecovery, error)
	RecoverWebhookPage(ctx context.Context, r *store.WebhookRecovery, size int, now time.Time) (*store.WebhookRecovery, error)
}

// WebhookRecoveries holds the activity of the webhook recovery.
type WebhookRecoveries struct {
	Store RecoveryStore
	Now   func() time.Time
	// PageSize is how many messages a page looks at (RecoveryPageSize when zero).
	PageSize int
}

// RecoveryPageSize is how many messages one activity of a recovery looks at, by default.
const RecoveryPageSize = 500

// RecoveryPage advances a recovery by one page of its webhook's messages: those whose
// last delivery failed or was skipped are queued again, due now, in the transaction that
// moves the recovery's place on (store.RecoverWebhookPage).
func (a *WebhookRecoveries) RecoveryPage(ctx context.Context, in workflows.RecoveryInput) (workflows.RecoveryProgress, error) {
	r, err := a.Store.WebhookRecoveryOf(ctx, "", in.RecoveryID)
	if errors.Is(err, store.ErrNotFound) {
		// Its webhook was deleted, and the recovery with it: nothing is left to do.
		return workflows.RecoveryProgress{Done: true}, nil
	}
	if err != nil {
		return workflows.RecoveryProgress{}, err
	}
	if r.Status == store.RecoveryRunning {
		size := a.PageSize
		if size <= 0 {
			size = RecoveryPageSize
		}
		now := time.Now()
		if a.Now != nil {
			now = a.Now()
		}
		if r, err = a.Store.RecoverWebhookPage(ctx, r, size, now); errors.Is(err, store.ErrNotFound) {
			return workflows.RecoveryProgress{Done: true}, nil
		} else if err != nil {
			// The store being away is waited out by the workflow's retries.
			return workflows.RecoveryProgress{}, err
		}
	}
	return workflows.RecoveryProgress{Scanned: r.Scanned, Requeued: r.Requeued, Done: r.Status != store.RecoveryRunning}, nil
}
