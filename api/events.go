package api

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
)

type recordHandlers struct {
	svc *service.Service
	log *slog.Logger
}

// events answers GET /events: stored events oldest first, for reconciliation after a gap.
// It pages like every list, with ?cursor= and nextCursor; its cursor is the last event's
// id, which ?after= (the name it had first) takes too.
func (h *recordHandlers) events(c *gin.Context) {
	var errs []orders.FieldError
	limit := parseLimit(c, &errs)
	after := eventCursor(c, &errs)
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	list, next, err := h.svc.Events(c.Request.Context(), caller(c),
		service.EventFilter{OrderID: c.Query("orderId"), After: after, Limit: limit})
	if err != nil {
		failed(c, h.log, err)
		return
	}
	out := make([]json.RawMessage, len(list))
	for i, ev := range list {
		out[i] = json.RawMessage(ev.Data)
	}
	c.PureJSON(http.StatusOK, apitypes.Page[json.RawMessage]{Data: out, NextCursor: apitypes.Cursor(next)})
}

// eventCursor reads where a page of events starts: ?cursor=, or its alias ?after=, the id
// of the last event read. Both at once must agree.
func eventCursor(c *gin.Context, errs *[]orders.FieldError) string {
	cursor, after := c.Query("cursor"), c.Query("after")
	if cursor != "" && after != "" && cursor != after {
		*errs = append(*errs, orders.FieldError{Field: "after", Message: "is an alias of cursor; pass one of them"})
		return ""
	}
	// Not UTF-8 text (which the database could not compare) never gets here:
	// withPrintableTarget refuses it for every route.
	return cmp.Or(cursor, after)
}
