package api

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/service"
	"github.com/opentreasury/treasury/store"
)

type recordHandlers struct {
	svc *service.Service
	log *slog.Logger
}

// events answers GET /events: stored events oldest first, for reconciliation after a gap.
// Its cursor is the last event's id, which ?after= takes as it is.
func (h *recordHandlers) events(c *gin.Context) {
	pg, errs := listParams(c, "orderId", "after", "limit")
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	list, next, err := h.svc.Events(c.Request.Context(), caller(c),
		service.EventFilter{OrderID: c.Query("orderId"), After: c.Query("after"), Limit: pg.Limit})
	if err != nil {
		failed(c, h.log, err)
		return
	}
	out := make([]json.RawMessage, len(list))
	for i, ev := range list {
		out[i] = json.RawMessage(ev.Data)
	}
	c.JSON(http.StatusOK, listResponse[json.RawMessage]{Data: out, NextCursor: nullable(next)})
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

func auditJSON(a *store.AuditLog) auditResponse {
	details := json.RawMessage(a.Details)
	if !json.Valid(details) {
		details = json.RawMessage(`{}`)
	}
	return auditResponse{ID: a.ID, App: a.App, Actor: map[string]any{"type": a.ActorType, "id": a.ActorID},
		Action: a.Action, ResourceType: a.ResourceType, ResourceID: a.ResourceID,
		CorrelationID: a.CorrelationID, Details: details, CreatedAt: formatTime(a.CreatedAt)}
}

// auditLogs answers GET /audit-logs: newest first.
func (h *recordHandlers) auditLogs(c *gin.Context) {
	listPage(c, h.log, h.svc.AuditLogs, auditJSON)
}
