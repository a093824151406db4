package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/events"
)

// WebSocketConfig is a config of the live channel: the events its connections receive.
type WebSocketConfig struct {
	ID  string `json:"id"`
	App string `json:"app"`
	// Events are entries as stored (lowercase): names, prefix.* wildcards or *.
	Events  []string `json:"events"`
	Enabled bool     `json:"enabled"`
	// LiveConnections counts the config's connections on every replica.
	LiveConnections int `json:"liveConnections"`
	// Creator is who made the config: the credential (createdBy) and the person behind it.
	Creator
	CreatedAt time.Time `json:"createdAt"`
	// DeliveryLog is the last five events written to a live connection, newest first.
	DeliveryLog []LiveDelivery `json:"deliveryLog"`
}

// LiveDelivery is an event the live channel delivered.
type LiveDelivery struct {
	EventID string    `json:"eventId"`
	Event   string    `json:"event"`
	At      time.Time `json:"at"`
}

// WebSocketTest is the websocket.test event TestWebSocketConfig sent.
type WebSocketTest struct {
	EventID  string `json:"eventId"`
	Event    string `json:"event"`
	ConfigID string `json:"configId"`
}

// Deleted is the answer to a deletion.
type Deleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// ListWebSocketConfigs reads a page of the app's configs, oldest first.
func (c *Client) ListWebSocketConfigs(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[WebSocketConfig], error) {
	return list[WebSocketConfig](ctx, c, developerPath("websockets"), o.query(), opts)
}

// WebSocketConfigs iterates over the app's configs, oldest first.
func (c *Client) WebSocketConfigs(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[WebSocketConfig, error] {
	return all[WebSocketConfig](ctx, c, developerPath("websockets"), o.query(), "cursor", opts)
}

// CreateWebSocketConfig creates a config receiving these events: exact names
// (Order.Submitted), prefix.* wildcards (order.*, wallet.*) or *, 1 to 50 of them.
func (c *Client) CreateWebSocketConfig(ctx context.Context, events []string, opts ...CallOption) (*WebSocketConfig, error) {
	body := map[string][]string{"events": events}
	return do[WebSocketConfig](ctx, c, http.MethodPost, developerPath("websockets"), body, opts)
}

// GetWebSocketConfig reads one config.
func (c *Client) GetWebSocketConfig(ctx context.Context, id string, opts ...CallOption) (*WebSocketConfig, error) {
	return get[WebSocketConfig](ctx, c, developerPath("websockets", id), opts)
}

// SetWebSocketConfigEnabled enables or disables a config; disabling closes its
// connections with 4001.
func (c *Client) SetWebSocketConfigEnabled(ctx context.Context, id string, enabled bool, opts ...CallOption) (*WebSocketConfig, error) {
	body := map[string]bool{"enabled": enabled}
	return do[WebSocketConfig](ctx, c, http.MethodPatch, developerPath("websockets", id), body, opts)
}

// DeleteWebSocketConfig deletes a config; its connections close with 4004.
func (c *Client) DeleteWebSocketConfig(ctx context.Context, id string, opts ...CallOption) error {
	_, err := do[Deleted](ctx, c, http.MethodDelete, developerPath("websockets", id), nil, opts)
	return err
}

// TestWebSocketConfig sends websocket.test to every connection of the config, whatever it
// subscribes to; a disabled config is a 409 conflict.
func (c *Client) TestWebSocketConfig(ctx context.Context, id string, opts ...CallOption) (*WebSocketTest, error) {
	return do[WebSocketTest](ctx, c, http.MethodPost, developerPath("websockets", id, "test"), nil, opts)
}

// Webhook is an endpoint of yours that receives the app's events as signed messages. Its
// Secret verifies them (VerifyWebhook); it is in the answers of CreateWebhook and
// RotateWebhookSecret only.
type Webhook = apitypes.Webhook

// WebhookRequest is a new webhook.
type WebhookRequest = apitypes.WebhookRequest

// WebhookChange changes a webhook: the fields that are set (non-nil) are replaced.
type WebhookChange struct {
	URL         *string  `json:"url,omitempty"`
	Events      []string `json:"events,omitempty"`
	Description *string  `json:"description,omitempty"`
	// Enabled false holds messages back; true again sends what was held.
	Enabled *bool `json:"enabled,omitempty"`
	// RateLimit sets the most messages sent to the endpoint per second;
	// RemoveRateLimit removes it.
	RateLimit       *int `json:"rateLimit,omitempty"`
	RemoveRateLimit bool `json:"-"`
}

// MarshalJSON writes the change, with rateLimit null when RemoveRateLimit.
func (ch WebhookChange) MarshalJSON() ([]byte, error) {
	type fields WebhookChange
	if !ch.RemoveRateLimit {
		return json.Marshal(fields(ch))
	}
	return json.Marshal(struct {
		fields
		RateLimit *int `json:"rateLimit"`
	}{fields: fields(ch)})
}

// WebhookRecovery is a background job that sends a webhook's failed and skipped messages
// of a window again, with where it stands.
type WebhookRecovery = apitypes.WebhookRecovery

// WebhookDelivery is one message to one webhook, with its attempts.
type WebhookDelivery = apitypes.WebhookDelivery

// DeliveryAttempt is one try at sending a message.
type DeliveryAttempt = apitypes.DeliveryAttempt

// DeliveryFilter narrows a webhook's deliveries.
type DeliveryFilter struct {
	Status string // pending, succeeded, failed or skipped
	Event  string
	Limit  int
	Cursor string
}

func (f DeliveryFilter) query() url.Values {
	q := url.Values{}
	set(q, "status", f.Status)
	set(q, "event", f.Event)
	setPage(q, f.Limit, f.Cursor)
	return q
}

// ListWebhooks reads a page of the app's webhooks, oldest first.
func (c *Client) ListWebhooks(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[Webhook], error) {
	return list[Webhook](ctx, c, developerPath("webhooks"), o.query(), opts)
}

// Webhooks iterates over the app's webhooks, oldest first.
func (c *Client) Webhooks(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[Webhook, error] {
	return all[Webhook](ctx, c, developerPath("webhooks"), o.query(), "cursor", opts)
}

// CreateWebhook creates a webhook; its Secret is in this answer only.
func (c *Client) CreateWebhook(ctx context.Context, req WebhookRequest, opts ...CallOption) (*Webhook, error) {
	return do[Webhook](ctx, c, http.MethodPost, developerPath("webhooks"), req, opts)
}

// GetWebhook reads one webhook.
func (c *Client) GetWebhook(ctx context.Context, id string, opts ...CallOption) (*Webhook, error) {
	return get[Webhook](ctx, c, developerPath("webhooks", id), opts)
}

// UpdateWebhook changes a webhook (PATCH).
func (c *Client) UpdateWebhook(ctx context.Context, id string, ch WebhookChange, opts ...CallOption) (*Webhook, error) {
	return do[Webhook](ctx, c, http.MethodPatch, developerPath("webhooks", id), ch, opts)
}

// DeleteWebhook deletes a webhook and its deliveries.
func (c *Client) DeleteWebhook(ctx context.Context, id string, opts ...CallOption) error {
	_, err := do[Deleted](ctx, c, http.MethodDelete, developerPath("webhooks", id), nil, opts)
	return err
}

// RotateWebhookSecret gives the webhook a new Secret, in this answer only; the old one
// keeps signing beside it for 24 hours.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string, opts ...CallOption) (*Webhook, error) {
	return do[Webhook](ctx, c, http.MethodPost, developerPath("webhooks", id, "rotate-secret"), nil, opts)
}

// TestWebhook queues a webhook.test message, whatever the webhook subscribes to; a
// disabled webhook is a 409 conflict.
func (c *Client) TestWebhook(ctx context.Context, id string, opts ...CallOption) (*WebhookDelivery, error) {
	return do[WebhookDelivery](ctx, c, http.MethodPost, developerPath("webhooks", id, "test"), nil, opts)
}

// ListWebhookDeliveries reads a page of a webhook's deliveries, newest first.
func (c *Client) ListWebhookDeliveries(ctx context.Context, webhookID string, f DeliveryFilter, opts ...CallOption) (*Page[WebhookDelivery], error) {
	return list[WebhookDelivery](ctx, c, developerPath("webhooks", webhookID, "deliveries"), f.query(), opts)
}

// WebhookDeliveries iterates over a webhook's deliveries, newest first.
func (c *Client) WebhookDeliveries(ctx context.Context, webhookID string, f DeliveryFilter, opts ...CallOption) iter.Seq2[WebhookDelivery, error] {
	return all[WebhookDelivery](ctx, c, developerPath("webhooks", webhookID, "deliveries"), f.query(), "cursor", opts)
}

// RedeliverWebhookDelivery sends a delivery's message again (same webhook-id), due now.
func (c *Client) RedeliverWebhookDelivery(ctx context.Context, webhookID, deliveryID string, opts ...CallOption) (*WebhookDelivery, error) {
	path := developerPath("webhooks", webhookID, "deliveries", deliveryID, "redeliver")
	return do[WebhookDelivery](ctx, c, http.MethodPost, path, nil, opts)
}

// RecoverWebhook sends again, with their webhook-ids, the webhook's messages whose event
// falls in [since, until) and whose last delivery failed or was skipped while it was
// disabled; until is now when zero. It answers the recovery, a background job: follow it
// with GetWebhookRecovery. Give it an Idempotency-Key (WithIdempotencyKey) to repeat it
// safely.
func (c *Client) RecoverWebhook(ctx context.Context, webhookID string, since, until time.Time, opts ...CallOption) (*WebhookRecovery, error) {
	req := apitypes.WebhookRecoveryRequest{Since: events.TimeOf(since.UTC())}
	if !until.IsZero() {
		u := events.TimeOf(until.UTC())
		req.Until = &u
	}
	return do[WebhookRecovery](ctx, c, http.MethodPost, developerPath("webhooks", webhookID, "recover"), req, opts)
}

// GetWebhookRecovery reads where a recovery stands.
func (c *Client) GetWebhookRecovery(ctx context.Context, webhookID, recoveryID string, opts ...CallOption) (*WebhookRecovery, error) {
	return get[WebhookRecovery](ctx, c, developerPath("webhooks", webhookID, "recoveries", recoveryID), opts)
}

// ListWebhookRecoveries reads a page of a webhook's recoveries, newest first.
func (c *Client) ListWebhookRecoveries(ctx context.Context, webhookID string, o ListOptions, opts ...CallOption) (*Page[WebhookRecovery], error) {
	return list[WebhookRecovery](ctx, c, developerPath("webhooks", webhookID, "recoveries"), o.query(), opts)
}
