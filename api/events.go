package api

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/service"
	"github.com/opentreasury/treasury/store"
)

type recordHandlers struct {
	store *store.Store
	log   *slog.Logger
}

// events answers GET /events: stored events oldest first, for reconciliation after a gap.
func (h *recordHandlers) events(c *gin.Context) {
	pg, errs := listParams(c, "orderId", "after", "limit")
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	p := principalOf(c)
	list, err := h.store.ListEvents(c.Request.Context(), store.EventFilter{OrgID: p.OrgID, Apps: service.AppsFor(p, auth.ActionRead),
		WalletIDs: p.ResourceIDs, OrderID: c.Query("orderId"), AfterID: c.Query("after"), Limit: pg.Limit + 1})
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	list, more := trimPage(list, pg.Limit)
	out := make([]json.RawMessage, len(list))
	for i, ev := range list {
		out[i] = json.RawMessage(ev.Data)
	}
	var cursor *string
	if more {
		last := list[len(list)-1].ID
		cursor = &last
	}
	c.JSON(http.StatusOK, listResponse[json.RawMessage]{Data: out, NextCursor: cursor})
}

type auditResponse struct {
	ID            string          `json:"id"`
	App           string          `json:"app"`
	Actor         map[string]any  `json:"actor"`
	Action        string          `json:"action"`
	ResourceType  string          `json:"resourceType"`
	ResourceID    string          `json:"resourceId"`
	CorrelationID string          `json:"correlationId"`
	Details       json.RawMessage `json:"details"`
	CreatedAt     string          `json:"createdAt"`
}

// auditLogs answers GET /audit-logs: newest first.
func (h *recordHandlers) auditLogs(c *gin.Context) {
	pg, errs := listParams(c, "limit", "cursor")
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	p := principalOf(c)
	list, err := h.store.ListAudit(c.Request.Context(), p.OrgID, service.AppsFor(p, auth.ActionRead), p.ResourceIDs, pg.After, pg.Limit+1)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	list, more := trimPage(list, pg.Limit)
	out := make([]auditResponse, len(list))
	for i, a := range list {
		details := json.RawMessage(a.Details)
		if !json.Valid(details) {
			details = json.RawMessage(`{}`)
		}
		out[i] = auditResponse{ID: a.ID, App: a.App, Actor: map[string]any{"type": a.ActorType, "id": a.ActorID},
			Action: a.Action, ResourceType: a.ResourceType, ResourceID: a.ResourceID,
			CorrelationID: a.CorrelationID, Details: details, CreatedAt: formatTime(a.CreatedAt)}
	}
	var cursor *string
	if more {
		cursor = encodeCursor(list[len(list)-1].ID)
	}
	c.JSON(http.StatusOK, listResponse[auditResponse]{Data: out, NextCursor: cursor})
}
