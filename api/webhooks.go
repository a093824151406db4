package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// webhookHandlers serve /developer/webhooks: an app's webhook endpoints, their deliveries
// and attempts.
type webhookHandlers struct {
	svc *service.Service
	log *slog.Logger
}

func webhookJSON(c *store.WebhookConfig) apitypes.Webhook {
	entries := c.EventList()
	if entries == nil {
		entries = []string{}
	}
	out := apitypes.Webhook{ID: c.ID, App: c.App, URL: c.URL, Events: entries, Description: c.Description, Enabled: c.Enabled,
		DisabledReason: c.DisabledReason, FailingSince: timeOrNull(c.FailingSince), RateLimit: c.RateLimit,
		Creator: creatorJSON(c.Creator), CreatedAt: timeOf(c.CreatedAt), UpdatedAt: timeOf(c.UpdatedAt)}
	if c.PreviousSecret != nil && c.PreviousSecretUntil != nil {
		out.PreviousSecretExpiresAt = timeOrNull(c.PreviousSecretUntil)
	}
	return out
}

func webhookDeliveryJSON(d *service.Delivery) apitypes.WebhookDelivery {
	out := apitypes.WebhookDelivery{ID: d.ID, MessageID: d.MessageID, Event: d.Event, EventID: d.EventID, OrderID: d.OrderID,
		Status: d.Status, Attempts: make([]apitypes.DeliveryAttempt, len(d.Attempts)), CreatedAt: timeOf(d.CreatedAt),
		CompletedAt: timeOrNull(d.CompletedAt)}
	if d.Status == store.DeliveryPending {
		out.NextAttemptAt = timeOrNull(d.NextAttemptAt)
	}
	for i, a := range d.Attempts {
		out.Attempts[i] = apitypes.DeliveryAttempt{At: timeOf(a.At), StatusCode: a.StatusCode, LatencyMs: a.LatencyMs,
			Error: a.Error, Response: a.Response}
	}
	return out
}

// list answers GET /developer/webhooks.
func (h *webhookHandlers) list(c *gin.Context) {
	listPage(c, h.log, h.svc.ListWebhooks, webhookJSON)
}

// get answers GET /developer/webhooks/{id}.
func (h *webhookHandlers) get(c *gin.Context) {
	respond(c, h.log, http.StatusOK, webhookJSON)(h.svc.GetWebhook(c.Request.Context(), caller(c), c.Param("id")))
}

// create answers POST /developer/webhooks {url, events, description?}: the secret is in
// this answer only.
func (h *webhookHandlers) create(c *gin.Context) {
	var req apitypes.WebhookRequest
	if !bindStrict(c, &req, "url", "events", "description", "rateLimit") {
		return
	}
	if req.RateLimit != nil && *req.RateLimit == 0 {
		validationFailed(c, []orders.FieldError{{Field: "rateLimit", Message: "must be from 1 to 10000 messages per second, or absent for none"}})
		return
	}
	withSecret(c, h.log, http.StatusCreated, webhookJSON, "secret")(h.svc.CreateWebhook(c.Request.Context(), caller(c), req.URL, req.Events,
		req.Description, req.RateLimit))
}

// update answers PATCH /developer/webhooks/{id} {url?, events?, description?, enabled?,
// rateLimit?}: a rateLimit of null removes the webhook's own limit.
func (h *webhookHandlers) update(c *gin.Context) {
	var req struct {
		URL         *string         `json:"url"`
		Events      *[]string       `json:"events"`
		Description *string         `json:"description"`
		Enabled     *bool           `json:"enabled"`
		RateLimit   json.RawMessage `json:"rateLimit"`
	}
	if !bindStrict(c, &req, "url", "events", "description", "enabled", "rateLimit") {
		return
	}
	ch := service.WebhookChange{URL: req.URL, Events: req.Events, Description: req.Description, Enabled: req.Enabled}
	if len(req.RateLimit) > 0 {
		n := 0
		if string(req.RateLimit) != "null" {
			if err := json.Unmarshal(req.RateLimit, &n); err != nil || n == 0 {
				validationFailed(c, []orders.FieldError{{Field: "rateLimit", Message: "must be from 1 to 10000 messages per second, or null for none"}})
				return
			}
		}
		ch.RateLimit = &n
	}
	respond(c, h.log, http.StatusOK, webhookJSON)(h.svc.UpdateWebhook(c.Request.Context(), caller(c), c.Param("id"), ch))
}

// remove answers DELETE /developer/webhooks/{id}: it and its deliveries are gone.
func (h *webhookHandlers) remove(c *gin.Context) {
	id := c.Param("id")
	if err := h.svc.DeleteWebhook(c.Request.Context(), caller(c), id); err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"id": id, "deleted": true})
}

// rotate answers POST /developer/webhooks/{id}/rotate-secret: the new secret, once; the
// old one signs beside it for 24 hours.
func (h *webhookHandlers) rotate(c *gin.Context) {
	withSecret(c, h.log, http.StatusOK, webhookJSON, "secret")(h.svc.RotateWebhookSecret(c.Request.Context(), caller(c), c.Param("id")))
}

// test answers POST /developer/webhooks/{id}/test: a webhook.test message is queued.
func (h *webhookHandlers) test(c *gin.Context) {
	respond(c, h.log, http.StatusAccepted, webhookDeliveryJSON)(h.svc.TestWebhook(c.Request.Context(), caller(c), c.Param("id")))
}

// deliveries answers GET /developer/webhooks/{id}/deliveries?status=&event=.
func (h *webhookHandlers) deliveries(c *gin.Context) {
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	respondList(c, h.log, webhookDeliveryJSON)(h.svc.ListWebhookDeliveries(c.Request.Context(), caller(c), c.Param("id"),
		service.DeliveryFilter{Status: c.Query("status"), Event: c.Query("event"), Page: pg}))
}

// redeliver answers POST /developer/webhooks/{id}/deliveries/{deliveryId}/redeliver: the
// message again, same webhook-id.
func (h *webhookHandlers) redeliver(c *gin.Context) {
	respond(c, h.log, http.StatusAccepted, webhookDeliveryJSON)(h.svc.Redeliver(c.Request.Context(), caller(c), c.Param("id"), c.Param("deliveryId")))
}

func webhookRecoveryJSON(r *store.WebhookRecovery) apitypes.WebhookRecovery {
	out := apitypes.WebhookRecovery{ID: r.ID, WebhookID: r.ConfigID, Since: timeOf(r.Since), Until: timeOf(r.Until), Status: r.Status,
		Scanned: r.Scanned, Requeued: r.Requeued, Creator: creatorJSON(r.Creator), CreatedAt: timeOf(r.CreatedAt), UpdatedAt: timeOf(r.UpdatedAt),
		CompletedAt: timeOrNull(r.CompletedAt)}
	if r.Error != "" {
		out.Error = &r.Error
	}
	return out
}

// startRecovery answers POST /developer/webhooks/{id}/recover {since, until?}: 202 the recovery,
// which sends the window's failed and skipped messages again in the background.
func (h *webhookHandlers) startRecovery(c *gin.Context) {
	var req struct {
		Since string  `json:"since"`
		Until *string `json:"until"`
	}
	if !bindStrict(c, &req, "since", "until") {
		return
	}
	var errs []orders.FieldError
	since, err := time.Parse(time.RFC3339Nano, req.Since)
	if err != nil {
		errs = append(errs, orders.FieldError{Field: "since", Message: "must be an ISO 8601 timestamp such as 2026-11-22T01:24:34.123Z"})
	}
	var until *time.Time
	if req.Until != nil {
		t, err := time.Parse(time.RFC3339Nano, *req.Until)
		if err != nil {
			errs = append(errs, orders.FieldError{Field: "until", Message: "must be an ISO 8601 timestamp such as 2026-11-22T01:24:34.123Z"})
		}
		until = &t
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	respond(c, h.log, http.StatusAccepted, webhookRecoveryJSON)(h.svc.RecoverWebhook(c.Request.Context(), caller(c), c.Param("id"), since, until))
}

// recovery answers GET /developer/webhooks/{id}/recoveries/{recoveryId}.
func (h *webhookHandlers) recovery(c *gin.Context) {
	respond(c, h.log, http.StatusOK, webhookRecoveryJSON)(h.svc.WebhookRecovery(c.Request.Context(), caller(c), c.Param("id"), c.Param("recoveryId")))
}

// recoveries answers GET /developer/webhooks/{id}/recoveries: newest first.
func (h *webhookHandlers) recoveries(c *gin.Context) {
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	respondList(c, h.log, webhookRecoveryJSON)(h.svc.WebhookRecoveries(c.Request.Context(), caller(c), c.Param("id"), pg))
}
