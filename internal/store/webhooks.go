package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/migrations"
)

// WebhookConfig is an app's webhook endpoint (SPEC 6).
type WebhookConfig struct {
	ID          string
	OrgID       string
	App         string
	URL         string `gorm:"column:url"`
	Events      string
	Description string
	Enabled     bool
	// DisabledReason says why the service disabled the config; nil when a person did, or
	// when it is enabled.
	DisabledReason *string
	// Secret and PreviousSecret are sealed (webhook.Box). The previous secret signs too
	// until PreviousSecretUntil.
	Secret              string
	PreviousSecret      *string
	PreviousSecretUntil *time.Time
	// FailingSince is when the first of an unbroken run of failed attempts was made.
	FailingSince *time.Time
	// RateLimit bounds the messages sent to the endpoint per second; nil: no bound of its
	// own.
	RateLimit *int
	Creator   `gorm:"embedded"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (WebhookConfig) TableName() string { return "webhook_configs" }

// EventList returns the subscription entries.
func (c *WebhookConfig) EventList() []string {
	if c.Events == "" {
		return nil
	}
	return strings.Split(c.Events, ",")
}

// Subscription is the config as events are matched against it.
func (c *WebhookConfig) Subscription() events.Subscription {
	return events.Subscription{ID: c.ID, OrgID: c.OrgID, App: c.App, Entries: c.EventList(), Enabled: c.Enabled}
}

// Statuses of a webhook delivery. A skipped delivery is a message the webhook wanted
// while it was disabled: recorded, never sent, until a recovery sends it.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
	DeliverySkipped   = "skipped"
)

// WebhookDelivery is one message to one config: the first delivery of an event, or a
// redelivery of the same message.
type WebhookDelivery struct {
	ID string
	// MessageID is the webhook-id header, the same on every attempt and redelivery.
	MessageID     string
	ConfigID      string
	EventID       string
	Event         string
	OrderID       string
	CorrelationID string
	// Payload is the body sent: the event's data.
	Payload    string
	Redelivery int
	Status     string
	// Attempts counts every attempt made; Throttled those of them the receiver answered
	// 429 or 503 with Retry-After, which the retry schedule does not count.
	Attempts      int
	Throttled     int
	NextAttemptAt *time.Time
	LeaseUntil    *time.Time
	LeasedBy      *string
	CreatedAt     time.Time
	CompletedAt   *time.Time
}

func (WebhookDelivery) TableName() string { return "webhook_deliveries" }

// Again is a new delivery of the same message (same webhook-id and body), redelivery n,
// due at now.
func (d *WebhookDelivery) Again(n int, now time.Time) *WebhookDelivery {
	return &WebhookDelivery{ID: ids.New(ids.WebhookDelivery), MessageID: d.MessageID, ConfigID: d.ConfigID, EventID: d.EventID,
		Event: d.Event, OrderID: d.OrderID, CorrelationID: d.CorrelationID, Payload: d.Payload, Redelivery: n,
		Status: DeliveryPending, NextAttemptAt: &now, CreatedAt: now}
}

// WebhookAttempt is one attempt of a delivery.
type WebhookAttempt struct {
	DeliveryID string `gorm:"primaryKey"`
	N          int    `gorm:"primaryKey;column:n"`
	At         time.Time
	StatusCode *int
	LatencyMs  float64
	Error      *string
	// Response is the start of the receiver's answer.
	Response *string
}

func (WebhookAttempt) TableName() string { return "webhook_attempts" }

// CreateWebhookConfig stores a new config.
func (s *Store) CreateWebhookConfig(ctx context.Context, c *WebhookConfig) error {
	return s.with(ctx).Create(c).Error
}

// WebhookConfig returns a config of an organisation.
func (s *Store) WebhookConfig(ctx context.Context, orgID, id string) (*WebhookConfig, error) {
	var c WebhookConfig
	if err := s.with(ctx).Where("id = ? AND org_id = ?", id, orgID).Take(&c).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// WebhookConfigsByID returns the configs with these ids, by id.
func (s *Store) WebhookConfigsByID(ctx context.Context, ids []string) (map[string]*WebhookConfig, error) {
	var list []WebhookConfig
	if err := s.with(ctx).Where("id IN ?", ids).Find(&list).Error; err != nil {
		return nil, err
	}
	out := make(map[string]*WebhookConfig, len(list))
	for i := range list {
		out[list[i].ID] = &list[i]
	}
	return out, nil
}

// ListWebhookConfigs lists an app's configs, oldest first.
func (s *Store) ListWebhookConfigs(ctx context.Context, orgID, app string) ([]WebhookConfig, error) {
	var out []WebhookConfig
	err := s.with(ctx).Where("org_id = ? AND app = ?", orgID, app).Order("id").Find(&out).Error
	return out, err
}

// SaveWebhookConfig writes a config's url, events, description, state and secrets.
func (s *Store) SaveWebhookConfig(ctx context.Context, c *WebhookConfig) error {
	res := s.with(ctx).Model(c).Where("org_id = ?", c.OrgID).
		Select("url", "events", "description", "enabled", "disabled_reason", "secret", "previous_secret",
			"previous_secret_until", "failing_since", "rate_limit", "updated_at").Updates(c)
	if res.Error == nil && res.RowsAffected == 0 {
		return ErrNotFound
	}
	return res.Error
}

// DeleteWebhookConfig removes a config with its deliveries and their attempts.
func (s *Store) DeleteWebhookConfig(ctx context.Context, orgID, id string) error {
	res := s.with(ctx).Where("id = ? AND org_id = ?", id, orgID).Delete(&WebhookConfig{})
	if res.Error == nil && res.RowsAffected == 0 {
		return ErrNotFound
	}
	return res.Error
}

// queueWebhooks writes, in the transaction that appends ev, one delivery for every
// webhook config of the event's organisation and app that wants it: due now when the
// config is enabled, skipped when it is disabled (a recovery sends it later).
func (s *Store) queueWebhooks(ctx context.Context, ev *Event) error {
	configs, err := s.subscribedConfigs(ctx, ev.OrgID, ev.App)
	if err != nil || len(configs) == 0 {
		return err
	}
	rec := ev.Record()
	for i := range configs {
		sub := configs[i].Subscription()
		sub.Enabled = true
		if !sub.Wants(&rec) {
			continue
		}
		at := ev.OccurredAt
		d := &WebhookDelivery{ID: ids.New(ids.WebhookDelivery), MessageID: ids.New(ids.WebhookMessage), ConfigID: configs[i].ID,
			EventID: ev.ID, Event: ev.Event, OrderID: ev.OrderID, CorrelationID: ev.CorrelationID, Payload: ev.Data,
			Status: DeliveryPending, NextAttemptAt: &at, CreatedAt: at}
		if !configs[i].Enabled {
			d.Status, d.NextAttemptAt, d.CompletedAt = DeliverySkipped, nil, &at
		}
		if _, err := s.insert(ctx, d, insertOrSkip); err != nil {
			return err
		}
	}
	return nil
}

// subscribedConfigs reads what queueWebhooks needs of an app's webhook configs (every
// event reads them, so by hand, see plans.go).
func (s *Store) subscribedConfigs(ctx context.Context, orgID, app string) ([]WebhookConfig, error) {
	rows, err := s.query(ctx, appWebhookConfigs, orgID, app)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var configs []WebhookConfig
	for rows.Next() {
		c := WebhookConfig{OrgID: orgID, App: app}
		if err := rows.Scan(&c.ID, &c.Events, &c.Enabled); err != nil {
			return nil, err
		}
		configs = append(configs, c)
	}
	return configs, rows.Err()
}

var appWebhookConfigs = sqlStatement(`SELECT id, events, enabled FROM webhook_configs WHERE org_id = ? AND app = ?`)

// CreateWebhookDelivery queues a delivery made outside the lifecycle: a test message or a
// redelivery.
func (s *Store) CreateWebhookDelivery(ctx context.Context, d *WebhookDelivery) error {
	return s.with(ctx).Create(d).Error
}

// WebhookDelivery returns a delivery of a config.
func (s *Store) WebhookDelivery(ctx context.Context, configID, id string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if err := s.with(ctx).Where("id = ? AND config_id = ?", id, configID).Take(&d).Error; err != nil {
		return nil, notFound(err)
	}
	return &d, nil
}

// NextRedelivery is the number the next redelivery of a message to a config takes.
func (s *Store) NextRedelivery(ctx context.Context, configID, eventID string) (int, error) {
	var n *int
	err := s.with(ctx).Model(&WebhookDelivery{}).Select("MAX(redelivery)").
		Where("config_id = ? AND event_id = ?", configID, eventID).Scan(&n).Error
	if err != nil || n == nil {
		return 0, err
	}
	return *n + 1, nil
}

// DeliveryFilter selects a config's deliveries.
type DeliveryFilter struct {
	ConfigID      string
	Status, Event string
	AfterID       string
	Limit         int
}

// ListWebhookDeliveries pages through a config's deliveries, newest first, with the
// attempts of each, oldest first.
func (s *Store) ListWebhookDeliveries(ctx context.Context, f DeliveryFilter) ([]WebhookDelivery, map[string][]WebhookAttempt, error) {
	q := s.with(ctx).Where("config_id = ?", f.ConfigID)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Event != "" {
		q = q.Where("event = ?", f.Event)
	}
	list, err := page[WebhookDelivery](q, f.AfterID, newestFirst, f.Limit)
	if err != nil || len(list) == 0 {
		return list, nil, err
	}
	deliveryIDs := make([]string, len(list))
	for i := range list {
		deliveryIDs[i] = list[i].ID
	}
	attempts, err := s.webhookAttempts(ctx, deliveryIDs)
	return list, attempts, err
}

func (s *Store) webhookAttempts(ctx context.Context, deliveryIDs []string) (map[string][]WebhookAttempt, error) {
	var rows []WebhookAttempt
	if err := s.with(ctx).Where("delivery_id IN ?", deliveryIDs).Order("delivery_id, n").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string][]WebhookAttempt, len(deliveryIDs))
	for _, a := range rows {
		out[a.DeliveryID] = append(out[a.DeliveryID], a)
	}
	return out, nil
}

// LeaseWebhookDeliveries takes up to limit pending deliveries that are due at now, of
// enabled configs other than those in skip, for the worker until the lease ends: no other
// worker takes them meanwhile. On PostgreSQL several workers lease at once, each skipping
// the rows another is taking (FOR UPDATE SKIP LOCKED); on SQLite writes take turns anyway.
func (s *Store) LeaseWebhookDeliveries(ctx context.Context, worker string, now, until time.Time, limit int, skip ...string) ([]WebhookDelivery, error) {
	lock, skipped := "", ""
	if s.dialect == migrations.Postgres {
		lock = " FOR UPDATE OF d SKIP LOCKED"
	}
	args := []any{until.UTC(), worker, DeliveryPending, now.UTC(), now.UTC()}
	if len(skip) > 0 {
		skipped = " AND d.config_id NOT IN ?"
		args = append(args, skip)
	}
	args = append(args, limit)
	var out []WebhookDelivery
	err := s.with(ctx).Raw(`UPDATE webhook_deliveries SET lease_until = ?, leased_by = ?
WHERE id IN (
  SELECT d.id FROM webhook_deliveries d JOIN webhook_configs c ON c.id = d.config_id
  WHERE d.status = ? AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until < ?) AND c.enabled`+skipped+`
  ORDER BY d.next_attempt_at LIMIT ?`+lock+`)
RETURNING *`, args...).Scan(&out).Error
	return out, err
}

// ReleaseWebhookLeases gives back the leases a worker holds on pending deliveries.
func (s *Store) ReleaseWebhookLeases(ctx context.Context, worker string) error {
	return s.with(ctx).Model(&WebhookDelivery{}).Where("leased_by = ? AND status = ?", worker, DeliveryPending).
		Updates(map[string]any{"lease_until": nil, "leased_by": nil}).Error
}

// NextWebhookDue is when the earliest pending delivery of an enabled config that no
// worker holds at now falls due, or nil when there is none.
func (s *Store) NextWebhookDue(ctx context.Context, now time.Time) (*time.Time, error) {
	var d WebhookDelivery
	err := s.with(ctx).Select("webhook_deliveries.next_attempt_at").
		Joins("JOIN webhook_configs ON webhook_configs.id = webhook_deliveries.config_id").
		Where("webhook_deliveries.status = ? AND webhook_configs.enabled", DeliveryPending).
		Where("webhook_deliveries.lease_until IS NULL OR webhook_deliveries.lease_until < ?", now.UTC()).
		Order("webhook_deliveries.next_attempt_at").Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return d.NextAttemptAt, err
}

// AttemptOutcome is what became of one leased delivery's attempt.
type AttemptOutcome struct {
	Attempt WebhookAttempt
	// Worker is the worker that held the lease: an outcome of a lease that was lost (it
	// ended and another worker took the delivery) is dropped.
	Worker string
	// Succeeded: 2xx. Otherwise NextAttemptAt is when to try again, nil when the schedule
	// is spent and the delivery has failed.
	Succeeded     bool
	NextAttemptAt *time.Time
	// Throttled: the receiver asked for a later attempt (429 or 503 with Retry-After). It
	// neither continues nor ends the config's run of failures.
	Throttled bool
	ConfigID  string
}

// DisabledWebhook is a config the dispatcher disabled.
type DisabledWebhook struct {
	ID, OrgID, App string
}

// RecordWebhookAttempts writes outcomes in one transaction: each attempt, its delivery's
// new state, and its config's run of failures. A config whose attempts have all failed
// since before disableBefore is disabled with a reason, and Webhook.Disabled tells the
// app's other webhooks and live channel; the configs disabled are returned.
func (s *Store) RecordWebhookAttempts(ctx context.Context, outcomes []AttemptOutcome, disableBefore time.Time, reason string) ([]DisabledWebhook, error) {
	var disabled []DisabledWebhook
	err := s.Tx(ctx, func(tx *Store) error {
		disabled = disabled[:0]
		db := tx.with(ctx)
		attempts := make([]WebhookAttempt, 0, len(outcomes))
		// The latest outcome of each config in the batch says whether its run of failures
		// goes on; the earliest failure since its last success starts one.
		succeeded, failedAt := map[string]bool{}, map[string]time.Time{}
		for _, o := range outcomes {
			a := o.Attempt
			a.At = a.At.UTC()
			updates := map[string]any{"attempts": a.N, "lease_until": nil, "leased_by": nil, "next_attempt_at": o.NextAttemptAt}
			switch {
			case o.Throttled:
				updates["throttled"] = gorm.Expr("throttled + 1")
			case o.Succeeded:
				updates["status"], updates["completed_at"] = DeliverySucceeded, a.At
			case o.NextAttemptAt == nil:
				updates["status"], updates["completed_at"] = DeliveryFailed, a.At
			}
			res := db.Model(&WebhookDelivery{}).Where("id = ? AND leased_by = ? AND status = ?", a.DeliveryID, o.Worker, DeliveryPending).
				Updates(updates)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				continue
			}
			attempts = append(attempts, a)
			if o.Throttled {
				continue
			}
			succeeded[o.ConfigID] = o.Succeeded
			if o.Succeeded {
				delete(failedAt, o.ConfigID)
			} else if at, ok := failedAt[o.ConfigID]; !ok || a.At.Before(at) {
				failedAt[o.ConfigID] = a.At
			}
		}
		if len(attempts) > 0 {
			if err := db.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(attempts, 200).Error; err != nil {
				return err
			}
		}
		for configID, ok := range succeeded {
			cfg := db.Model(&WebhookConfig{}).Where("id = ?", configID)
			if ok {
				if err := cfg.Where("failing_since IS NOT NULL").Update("failing_since", nil).Error; err != nil {
					return err
				}
				continue
			}
			if err := cfg.Where("failing_since IS NULL").Update("failing_since", failedAt[configID]).Error; err != nil {
				return err
			}
			res := db.Model(&WebhookConfig{}).Where("id = ? AND enabled AND failing_since < ?", configID, disableBefore.UTC()).
				Updates(map[string]any{"enabled": false, "disabled_reason": reason, "updated_at": failedAt[configID]})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 1 {
				d, err := tx.announceDisabled(ctx, configID, failedAt[configID])
				if err != nil {
					return err
				}
				disabled = append(disabled, d)
			}
		}
		return nil
	})
	if err != nil {
		// Rolled back: nothing was disabled.
		return nil, err
	}
	return disabled, nil
}

// announceDisabled writes Webhook.Disabled for a config just disabled at at.
func (s *Store) announceDisabled(ctx context.Context, configID string, at time.Time) (DisabledWebhook, error) {
	var c WebhookConfig
	if err := s.with(ctx).Where("id = ?", configID).Take(&c).Error; err != nil {
		return DisabledWebhook{}, err
	}
	body := &events.WebhookEvent{App: c.App, CorrelationID: uuid.NewString(), Event: events.WebhookDisabled,
		ID: ids.New(ids.Event), OccurredAt: events.TimeOf(at.UTC()), WebhookID: c.ID}
	if c.DisabledReason != nil {
		body.DisabledReason = *c.DisabledReason
	}
	if c.FailingSince != nil {
		body.FailingSince = events.TimeOf(c.FailingSince.UTC())
	}
	ev := &Event{ID: body.ID, OrgID: c.OrgID, App: c.App, Event: body.Event, Step: "webhook-disabled-" + body.ID,
		CorrelationID: body.CorrelationID, OccurredAt: body.OccurredAt.Time}
	return DisabledWebhook{ID: c.ID, OrgID: c.OrgID, App: c.App}, s.appendAppEvent(ctx, ev, body)
}

// ReleaseWebhookDeliveries gives back a worker's leases of some pending deliveries, due
// again at once for any worker.
func (s *Store) ReleaseWebhookDeliveries(ctx context.Context, worker string, deliveryIDs []string) error {
	return s.with(ctx).Model(&WebhookDelivery{}).Where("id IN ? AND leased_by = ? AND status = ?", deliveryIDs, worker, DeliveryPending).
		Updates(map[string]any{"lease_until": nil, "leased_by": nil}).Error
}
