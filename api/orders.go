package api

import (
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// orderHandlers serve one domain's collection: /payments, /trade-orders, …
type orderHandlers struct {
	svc    *service.Service
	log    *slog.Logger
	domain orders.DomainInfo
}

// orderJSON renders an order (SPEC 3.2).
func orderJSON(o *service.Order) apitypes.Order { return o.Answer() }

// create answers POST /{collection}: a draft order and its Order.Created event. claim is
// the request's Idempotency-Key record when no record held its key as the request began:
// the order's transaction stores it with the answer. It returns the record that took the
// key meanwhile, having answered nothing.
func (h *orderHandlers) create(c *gin.Context, claim *store.IdempotencyRecord) (held *store.IdempotencyRecord) {
	body, ok := readBody(c)
	if !ok {
		return nil
	}
	o, err := h.svc.CreateOrder(c.Request.Context(), caller(c), h.domain, body, claim)
	var taken *store.KeyHeldError
	if errors.As(err, &taken) {
		return taken.Held
	}
	if err != nil {
		failed(c, h.log, err)
		return nil
	}
	c.Header("Location", service.OrderLocation(h.domain, o.ID))
	if claim != nil {
		// The answer is the one stored for the retries, byte for byte.
		c.Data(claim.StatusCode, service.JSONContentType, claim.ResponseBody)
		return nil
	}
	c.PureJSON(http.StatusCreated, orderJSON(o))
	return nil
}

// submit answers POST /{collection}/{id}/submit: 202 once the workflow has accepted the
// order and its policy allows it, 422 policy_violation when the policy refused it.
func (h *orderHandlers) submit(c *gin.Context) {
	o, err := h.svc.SubmitOrder(c.Request.Context(), caller(c), h.domain, c.Param("id"))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusAccepted, orderJSON(o))
}

// get answers GET /{collection}/{id}, with the status history.
func (h *orderHandlers) get(c *gin.Context) {
	o, err := h.svc.GetOrder(c.Request.Context(), caller(c), h.domain, c.Param("id"))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusOK, orderJSON(o))
}

// list answers GET /{collection}: newest first, filtered by status and createdAfter.
func (h *orderHandlers) list(c *gin.Context) {
	pg, errs := listParams(c)
	f := service.OrderFilter{Status: c.Query("status"), Page: pg}
	if f.Status != "" && !slices.Contains(orders.Statuses, orders.Status(f.Status)) {
		errs = append(errs, orders.FieldError{Field: "status", Message: "is not an order status"})
	}
	if raw := c.Query("createdAfter"); raw != "" {
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			errs = append(errs, orders.FieldError{Field: "createdAfter", Message: "must be an ISO 8601 timestamp such as 2026-11-22T01:24:34.123Z"})
		}
		f.CreatedAfter = &t
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	respondList(c, h.log, orderJSON)(h.svc.ListOrders(c.Request.Context(), caller(c), h.domain, f))
}
