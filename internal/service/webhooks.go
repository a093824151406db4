package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/webhook"
)

// WebhookOptions are what the webhook operations need besides the store.
type WebhookOptions struct {
	// Box seals signing secrets; nil (no WEBHOOK_SECRET_KEY) refuses to make or rotate one.
	Box *webhook.Box
	// Guard says which URLs are accepted; the dispatcher checks again when it sends.
	Guard webhook.Guard
}

// rotationOverlap is how long the old secret signs beside the new one after a rotation.
const rotationOverlap = 24 * time.Hour

// maxDescription bounds a webhook's description.
const maxDescription = 500

// Delivery is a webhook delivery with its attempts, oldest first.
type Delivery struct {
	*store.WebhookDelivery
	Attempts []store.WebhookAttempt
}

// WebhookChange is a change to a webhook: only the fields set change. A RateLimit of 0
// removes the webhook's own rate limit.
type WebhookChange struct {
	URL         *string
	Events      *[]string
	Description *string
	Enabled     *bool
	RateLimit   *int
}

// MaxWebhookRateLimit bounds a webhook's own rate limit, in messages per second.
const MaxWebhookRateLimit = 10000

// box is the sealing box, or a refusal when none is configured.
func (s *Service) box() (*webhook.Box, error) {
	if s.Webhooks.Box == nil {
		return nil, refuse(Unavailable, "Webhook signing secrets cannot be kept: the service has no WEBHOOK_SECRET_KEY.")
	}
	return s.Webhooks.Box, nil
}

// newSealedSecret makes a signing secret and its sealed form.
func (s *Service) newSealedSecret() (secret, sealed string, err error) {
	box, err := s.box()
	if err != nil {
		return "", "", err
	}
	if secret, err = webhook.NewSecret(); err != nil {
		return "", "", err
	}
	sealed, err = box.Seal(secret)
	return secret, sealed, err
}

// checkWebhook validates the fields of a webhook that are set.
func (s *Service) checkWebhook(ch WebhookChange) ([]string, []orders.FieldError) {
	var errs []orders.FieldError
	if ch.URL != nil {
		if err := s.Webhooks.Guard.CheckURL(*ch.URL); err != nil {
			errs = append(errs, field("url", err.Error()))
		}
	}
	var entries []string
	if ch.Events != nil {
		var err error
		if entries, err = events.NormalizeEntries(*ch.Events); err != nil {
			errs = append(errs, field("events", err.Error()))
		}
	}
	if ch.Description != nil && len(*ch.Description) > maxDescription {
		errs = append(errs, field("description", "must be at most 500 characters"))
	}
	if ch.RateLimit != nil && (*ch.RateLimit < 0 || *ch.RateLimit > MaxWebhookRateLimit) {
		errs = append(errs, field("rateLimit", fmt.Sprintf("must be from 1 to %d messages per second, or null for none", MaxWebhookRateLimit)))
	}
	return entries, errs
}

// ListWebhooks pages through the caller's app's webhooks, oldest first.
func (s *Service) ListWebhooks(ctx context.Context, who Caller, pg Page) ([]store.WebhookConfig, string, error) {
	if err := developer(who); err != nil {
		return nil, "", err
	}
	list, err := s.Store.ListWebhookConfigs(ctx, who.OrgID, who.App)
	if err != nil {
		return nil, "", err
	}
	list, next := pageOf(list, pg, false, func(c *store.WebhookConfig) string { return c.ID })
	return list, next, nil
}

// GetWebhook reads one webhook of the caller's app; any other is not found.
func (s *Service) GetWebhook(ctx context.Context, who Caller, id string) (*store.WebhookConfig, error) {
	if err := developer(who); err != nil {
		return nil, err
	}
	c, err := s.Store.WebhookConfig(ctx, who.OrgID, id)
	return ofOwnApp(who, "webhook", c, err, func(c *store.WebhookConfig) string { return c.App })
}

// CreateWebhook registers an endpoint of the caller's app for the events its entries name
// (SPEC 6); its signing secret is in this answer and nowhere else, ever.
func (s *Service) CreateWebhook(ctx context.Context, who Caller, url string, entries []string, description string, rateLimit *int) (*store.WebhookConfig, string, error) {
	if err := developer(who); err != nil {
		return nil, "", err
	}
	normal, errs := s.checkWebhook(WebhookChange{URL: &url, Events: &entries, Description: &description, RateLimit: rateLimit})
	if len(errs) > 0 {
		return nil, "", invalid(errs...)
	}
	secret, sealed, err := s.newSealedSecret()
	if err != nil {
		return nil, "", err
	}
	now := s.now()
	c := &store.WebhookConfig{ID: ids.New(ids.WebhookConfig), OrgID: who.OrgID, App: who.App, URL: url,
		Events: strings.Join(normal, ","), Description: description, Enabled: true, RateLimit: ownRateLimit(rateLimit), Secret: sealed,
		Creator: creatorOf(who), CreatedAt: now, UpdatedAt: now}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.CreateWebhookConfig(ctx, c) },
		"webhook.created", "webhook", c.ID, map[string]any{"url": url, "events": normal, "rateLimit": c.RateLimit})
	if err != nil {
		return nil, "", err
	}
	return c, secret, nil
}

// UpdateWebhook changes a webhook's URL, events, description or state. Enabling it again
// clears why the service disabled it, and its run of failures.
func (s *Service) UpdateWebhook(ctx context.Context, who Caller, id string, ch WebhookChange) (*store.WebhookConfig, error) {
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return nil, err
	}
	normal, errs := s.checkWebhook(ch)
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	changed := map[string]any{}
	if ch.URL != nil {
		c.URL, changed["url"] = *ch.URL, *ch.URL
	}
	if ch.Events != nil {
		c.Events, changed["events"] = strings.Join(normal, ","), normal
	}
	if ch.Description != nil {
		c.Description, changed["description"] = *ch.Description, *ch.Description
	}
	if ch.RateLimit != nil {
		c.RateLimit = ownRateLimit(ch.RateLimit)
		changed["rateLimit"] = c.RateLimit
	}
	if ch.Enabled != nil {
		if *ch.Enabled && !c.Enabled {
			c.DisabledReason, c.FailingSince = nil, nil
		}
		c.Enabled, changed["enabled"] = *ch.Enabled, *ch.Enabled
	}
	c.UpdatedAt = s.now()
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.SaveWebhookConfig(ctx, c) },
		"webhook.updated", "webhook", c.ID, changed)
	if err != nil {
		return nil, err
	}
	if ch.Enabled != nil && *ch.Enabled {
		// Deliveries held while it was disabled are due again.
		s.announce(ctx, who, events.Control{Kind: events.ControlWebhooksQueued, OrgID: c.OrgID, ConfigID: c.ID})
	}
	return c, nil
}

// ownRateLimit is the rate limit a webhook keeps for a requested one: nil for none (0).
func ownRateLimit(requested *int) *int {
	if requested == nil || *requested == 0 {
		return nil
	}
	n := *requested
	return &n
}

// DeleteWebhook removes a webhook with its deliveries.
func (s *Service) DeleteWebhook(ctx context.Context, who Caller, id string) error {
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return err
	}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.DeleteWebhookConfig(ctx, c.OrgID, c.ID) },
		"webhook.deleted", "webhook", c.ID, nil)
	if errors.Is(err, store.ErrNotFound) {
		return refuse(NotFound, "No webhook with this id.")
	}
	return err
}

// RotateWebhookSecret gives a webhook a new signing secret, shown once; the old one signs
// beside it for 24 hours, so receivers can move over without losing a message.
func (s *Service) RotateWebhookSecret(ctx context.Context, who Caller, id string) (*store.WebhookConfig, string, error) {
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return nil, "", err
	}
	secret, sealed, err := s.newSealedSecret()
	if err != nil {
		return nil, "", err
	}
	now := s.now()
	until := now.Add(rotationOverlap)
	previous := c.Secret
	c.PreviousSecret, c.PreviousSecretUntil, c.Secret, c.UpdatedAt = &previous, &until, sealed, now
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.SaveWebhookConfig(ctx, c) },
		"webhook.secret_rotated", "webhook", c.ID, nil)
	if err != nil {
		return nil, "", err
	}
	return c, secret, nil
}

// TestWebhook queues a webhook.test message to a webhook, whatever it subscribes to.
func (s *Service) TestWebhook(ctx context.Context, who Caller, id string) (*Delivery, error) {
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return nil, err
	}
	if !c.Enabled {
		return nil, refuse(Conflict, "The webhook is disabled; enable it to send a test message.")
	}
	now := s.now()
	eventID := ids.New(ids.Event)
	payload, err := events.Encode(&events.TestEvent{ID: eventID, Event: events.WebhookTest, WebhookID: c.ID, App: c.App,
		CorrelationID: who.CorrelationID, OccurredAt: events.TimeOf(now)})
	if err != nil {
		return nil, err
	}
	d := &store.WebhookDelivery{ID: ids.New(ids.WebhookDelivery), MessageID: ids.New(ids.WebhookMessage), ConfigID: c.ID,
		EventID: eventID, Event: events.WebhookTest, CorrelationID: who.CorrelationID, Payload: string(payload),
		Status: store.DeliveryPending, NextAttemptAt: &now, CreatedAt: now}
	return s.queueDelivery(ctx, who, d)
}

// queueDelivery stores a delivery made outside an event's commit and wakes the dispatchers.
func (s *Service) queueDelivery(ctx context.Context, who Caller, d *store.WebhookDelivery) (*Delivery, error) {
	if err := s.Store.CreateWebhookDelivery(ctx, d); err != nil {
		return nil, err
	}
	s.announce(ctx, who, events.Control{Kind: events.ControlWebhooksQueued, OrgID: who.OrgID, ConfigID: d.ConfigID})
	return &Delivery{WebhookDelivery: d, Attempts: []store.WebhookAttempt{}}, nil
}

// DeliveryFilter narrows a webhook's deliveries.
type DeliveryFilter struct {
	Status, Event string
	Page
}

// deliveryStatuses are the statuses a delivery filter takes.
var deliveryStatuses = []string{store.DeliveryPending, store.DeliverySucceeded, store.DeliveryFailed, store.DeliverySkipped}

// ListWebhookDeliveries pages through a webhook's deliveries, newest first, each with its
// attempts.
func (s *Service) ListWebhookDeliveries(ctx context.Context, who Caller, id string, f DeliveryFilter) ([]Delivery, string, error) {
	var errs []orders.FieldError
	if f.Status != "" && !slices.Contains(deliveryStatuses, f.Status) {
		errs = append(errs, field("status", "must be pending, succeeded, failed or skipped"))
	}
	if f.Event != "" {
		name, ok := events.Canonical(f.Event)
		if !ok {
			errs = append(errs, field("event", "is not an event name"))
		}
		f.Event = name
	}
	if len(errs) > 0 {
		return nil, "", invalid(errs...)
	}
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return nil, "", err
	}
	rows, attempts, err := s.Store.ListWebhookDeliveries(ctx, store.DeliveryFilter{ConfigID: c.ID, Status: f.Status, Event: f.Event,
		AfterID: f.After, Limit: f.Limit + 1})
	if err != nil {
		return nil, "", err
	}
	rows, next := trim(rows, f.Limit, func(d *store.WebhookDelivery) string { return d.ID })
	out := make([]Delivery, len(rows))
	for i := range rows {
		out[i] = Delivery{WebhookDelivery: &rows[i], Attempts: attempts[rows[i].ID]}
	}
	return out, next, nil
}

// Redeliver sends a delivery's message again, with the same webhook-id, whatever became of
// it: a new delivery of the same message, due now.
func (s *Service) Redeliver(ctx context.Context, who Caller, id, deliveryID string) (*Delivery, error) {
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return nil, err
	}
	if !c.Enabled {
		return nil, refuse(Conflict, "The webhook is disabled; enable it to redeliver.")
	}
	old, err := s.Store.WebhookDelivery(ctx, c.ID, deliveryID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(NotFound, "No delivery of this webhook with this id.")
	}
	if err != nil {
		return nil, err
	}
	n, err := s.Store.NextRedelivery(ctx, c.ID, old.EventID)
	if err != nil {
		return nil, err
	}
	return s.queueDelivery(ctx, who, old.Again(n, s.now()))
}

// RecoveryStarter starts the background job of a webhook recovery.
type RecoveryStarter interface {
	StartWebhookRecovery(ctx context.Context, recoveryID string) error
}

// RecoverWebhook sends again a webhook's messages of [since, until) whose last delivery
// failed or was skipped while it was disabled, as a background job whose progress the
// recovery shows. until is now when nil, and never later. Each message keeps its
// webhook-id, so receivers deduplicate what they had after all.
func (s *Service) RecoverWebhook(ctx context.Context, who Caller, id string, since time.Time, until *time.Time) (*store.WebhookRecovery, error) {
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	end := now
	if until != nil && until.Before(now) {
		end = *until
	}
	if !since.Before(end) {
		return nil, invalid(field("since", "must be before until and before now"))
	}
	if !c.Enabled {
		return nil, refuse(Conflict, "The webhook is disabled; enable it to recover its messages.")
	}
	if s.Recoveries == nil {
		return nil, ErrWorkflowsUnavailable
	}
	r := &store.WebhookRecovery{ID: ids.New(ids.WebhookRecovery), OrgID: c.OrgID, ConfigID: c.ID, Since: since.UTC(), Until: end.UTC(),
		Status: store.RecoveryRunning, Creator: creatorOf(who), CorrelationID: who.CorrelationID, CreatedAt: now, UpdatedAt: now}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.CreateWebhookRecovery(ctx, r) },
		"webhook.recovery_started", "webhook", c.ID, map[string]any{"recoveryId": r.ID, "since": r.Since, "until": r.Until})
	if err != nil {
		return nil, err
	}
	// Started after the commit, so that the workflow finds its recovery; one that could
	// not be started ends failed, saying so, rather than stay running for ever.
	if err := s.Recoveries.StartWebhookRecovery(ctx, r.ID); err != nil {
		s.Log.Error("webhook recovery not started", "recoveryId", r.ID, "error", err)
		if err := s.Store.FailWebhookRecovery(context.WithoutCancel(ctx), r.ID, "its background job could not be started", s.now()); err != nil {
			s.Log.Error("webhook recovery not marked failed", "recoveryId", r.ID, "error", err)
		}
		return nil, refuse(Unavailable, "The recovery could not be started; try again.")
	}
	return r, nil
}

// WebhookRecovery reads a recovery of a webhook: where it stands.
func (s *Service) WebhookRecovery(ctx context.Context, who Caller, id, recoveryID string) (*store.WebhookRecovery, error) {
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return nil, err
	}
	r, err := s.Store.WebhookRecoveryOf(ctx, c.ID, recoveryID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(NotFound, "No recovery of this webhook with this id.")
	}
	return r, err
}

// WebhookRecoveries pages through a webhook's recoveries, newest first.
func (s *Service) WebhookRecoveries(ctx context.Context, who Caller, id string, pg Page) ([]store.WebhookRecovery, string, error) {
	c, err := s.GetWebhook(ctx, who, id)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.Store.ListWebhookRecoveries(ctx, c.ID, pg.After, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	rows, next := trim(rows, pg.Limit, func(r *store.WebhookRecovery) string { return r.ID })
	return rows, next, nil
}
