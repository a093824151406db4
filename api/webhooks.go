package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/service"
	"github.com/opentreasury/treasury/store"
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
		DisabledReason: c.DisabledReason, CreatedAt: timeOf(c.CreatedAt), UpdatedAt: timeOf(c.UpdatedAt)}
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
	if !bindStrict(c, &req, "url", "events", "description") {
		return
	}
	withSecret(c, h.log, http.StatusCreated, webhookJSON, "secret")(h.svc.CreateWebhook(c.Request.Context(), caller(c), req.URL, req.Events, req.Description))
}

// update answers PATCH /developer/webhooks/{id} {url?, events?, description?, enabled?}.
func (h *webhookHandlers) update(c *gin.Context) {
	var req struct {
		URL         *string   `json:"url"`
		Events      *[]string `json:"events"`
		Description *string   `json:"description"`
		Enabled     *bool     `json:"enabled"`
	}
	if !bindStrict(c, &req, "url", "events", "description", "enabled") {
		return
	}
	ch := service.WebhookChange{URL: req.URL, Events: req.Events, Description: req.Description, Enabled: req.Enabled}
	respond(c, h.log, http.StatusOK, webhookJSON)(h.svc.UpdateWebhook(c.Request.Context(), caller(c), c.Param("id"), ch))
}

// remove answers DELETE /developer/webhooks/{id}: it and its deliveries are gone.
func (h *webhookHandlers) remove(c *gin.Context) {
	id := c.Param("id")
	if err := h.svc.DeleteWebhook(c.Request.Context(), caller(c), id); err != nil {
		failed(c, h.log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "deleted": true})
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
	pg, errs := listParams(c)
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	list, next, err := h.svc.ListWebhookDeliveries(c.Request.Context(), caller(c), c.Param("id"),
		service.DeliveryFilter{Status: c.Query("status"), Event: c.Query("event"), Page: pg})
	if err != nil {
		failed(c, h.log, err)
		return
	}
	writeList(c, list, next, webhookDeliveryJSON)
}

// redeliver answers POST /developer/webhooks/{id}/deliveries/{deliveryId}/redeliver: the
// message again, same webhook-id.
func (h *webhookHandlers) redeliver(c *gin.Context) {
	respond(c, h.log, http.StatusAccepted, webhookDeliveryJSON)(h.svc.Redeliver(c.Request.Context(), caller(c), c.Param("id"), c.Param("deliveryId")))
}
