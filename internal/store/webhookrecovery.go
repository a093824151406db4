package store

import (
	"context"
	"time"

	"gorm.io/gorm/clause"
)

// Statuses of a webhook recovery.
const (
	RecoveryRunning   = "running"
	RecoveryCompleted = "completed"
	RecoveryFailed    = "failed"
)

// WebhookRecovery is a background job that sends a webhook's messages of a time window
// again: those whose last delivery failed, or was skipped while the webhook was disabled.
type WebhookRecovery struct {
	ID       string
	OrgID    string
	ConfigID string
	// Since and Until bound the messages by the time of their event: Since ≤ t < Until.
	Since, Until time.Time
	Status       string
	// Scanned counts the messages looked at so far; Requeued those sent again.
	Scanned, Requeued int
	// LastAt and LastID are the place reached: the last message looked at.
	LastAt        *time.Time
	LastID        string
	Error         string
	Creator       `gorm:"embedded"`
	CorrelationID string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	CompletedAt   *time.Time
}

func (WebhookRecovery) TableName() string { return "webhook_recoveries" }

// CreateWebhookRecovery stores a new recovery.
func (s *Store) CreateWebhookRecovery(ctx context.Context, r *WebhookRecovery) error {
	return s.with(ctx).Create(r).Error
}

// WebhookRecoveryOf reads a recovery of a config; configID "" reads it whatever its
// config (the background job's read).
func (s *Store) WebhookRecoveryOf(ctx context.Context, configID, id string) (*WebhookRecovery, error) {
	q := s.with(ctx).Where("id = ?", id)
	if configID != "" {
		q = q.Where("config_id = ?", configID)
	}
	var r WebhookRecovery
	if err := q.Take(&r).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}

// ListWebhookRecoveries pages through a config's recoveries, newest first.
func (s *Store) ListWebhookRecoveries(ctx context.Context, configID, afterID string, limit int) ([]WebhookRecovery, error) {
	return page[WebhookRecovery](s.with(ctx).Where("config_id = ?", configID), afterID, newestFirst, limit)
}

// FailWebhookRecovery ends a running recovery as failed, saying why.
func (s *Store) FailWebhookRecovery(ctx context.Context, id, reason string, at time.Time) error {
	at = at.UTC()
	return s.with(ctx).Model(&WebhookRecovery{}).Where("id = ? AND status = ?", id, RecoveryRunning).
		Updates(map[string]any{"status": RecoveryFailed, "error": reason, "updated_at": at, "completed_at": at}).Error
}

// RecoverWebhookPage advances a running recovery by one page of up to size messages:
// each whose latest delivery failed or was skipped gets a new delivery of the same
// message (same webhook-id), due at now. The page's deliveries and the recovery's new
// place commit together, and the place is claimed first, so a page retried after its
// commit (or run twice at once) finds the place moved and re-queues nothing twice.
// It returns the recovery as it stands after the page.
func (s *Store) RecoverWebhookPage(ctx context.Context, r *WebhookRecovery, size int, now time.Time) (*WebhookRecovery, error) {
	now = now.UTC()
	var out *WebhookRecovery
	err := s.Tx(ctx, func(tx *Store) error {
		db := tx.with(ctx)
		q := db.Where("config_id = ? AND redelivery = 0 AND created_at >= ? AND created_at < ?", r.ConfigID, r.Since.UTC(), r.Until.UTC())
		if r.LastAt != nil {
			q = q.Where("(created_at > ? OR (created_at = ? AND id > ?))", r.LastAt.UTC(), r.LastAt.UTC(), r.LastID)
		}
		var firsts []WebhookDelivery
		if err := q.Select("id", "event_id", "created_at").Order("created_at, id").Limit(size).Find(&firsts).Error; err != nil {
			return err
		}
		next := *r
		next.UpdatedAt = now
		next.Scanned += len(firsts)
		if len(firsts) > 0 {
			last := firsts[len(firsts)-1]
			next.LastAt, next.LastID = &last.CreatedAt, last.ID
		}
		if len(firsts) < size {
			next.Status, next.CompletedAt = RecoveryCompleted, &now
		}
		place := db.Model(&WebhookRecovery{}).Where("id = ? AND status = ? AND last_id = ?", r.ID, RecoveryRunning, r.LastID)
		claimed := place.Updates(map[string]any{"scanned": next.Scanned, "last_at": next.LastAt, "last_id": next.LastID,
			"status": next.Status, "updated_at": now, "completed_at": next.CompletedAt})
		if claimed.Error != nil || claimed.RowsAffected == 0 {
			return claimed.Error
		}
		requeued, err := tx.requeueLatest(ctx, r.ConfigID, firsts, now)
		if err != nil {
			return err
		}
		if requeued > 0 {
			next.Requeued += requeued
			err := db.Model(&WebhookRecovery{}).Where("id = ?", r.ID).Update("requeued", next.Requeued).Error
			if err != nil {
				return err
			}
		}
		out = &next
		return nil
	})
	if err != nil || out != nil {
		return out, err
	}
	// The place had moved: an earlier attempt of this page committed.
	return s.WebhookRecoveryOf(ctx, "", r.ID)
}

// requeueLatest queues, due at now, a new delivery of each message among firsts whose
// latest delivery failed or was skipped, and says how many it queued.
func (s *Store) requeueLatest(ctx context.Context, configID string, firsts []WebhookDelivery, now time.Time) (int, error) {
	if len(firsts) == 0 {
		return 0, nil
	}
	eventIDs := make([]string, len(firsts))
	for i, d := range firsts {
		eventIDs[i] = d.EventID
	}
	var all []WebhookDelivery
	err := s.with(ctx).Where("config_id = ? AND event_id IN ?", configID, eventIDs).Order("event_id, redelivery").Find(&all).Error
	if err != nil {
		return 0, err
	}
	latest := map[string]WebhookDelivery{}
	for _, d := range all {
		latest[d.EventID] = d
	}
	requeued := 0
	for _, id := range eventIDs {
		d, ok := latest[id]
		if !ok || (d.Status != DeliveryFailed && d.Status != DeliverySkipped) {
			continue
		}
		again := d.Again(d.Redelivery+1, now)
		// A redelivery asked for meanwhile took the number: that one sends the message.
		res := s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(again)
		if res.Error != nil {
			return 0, res.Error
		}
		requeued += int(res.RowsAffected)
	}
	return requeued, nil
}
