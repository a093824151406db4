package api

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// RequestLogSink takes the request log rows of authenticated requests; they are written
// off the request path.
type RequestLogSink interface {
	Add(store.RequestLog)
}

// withRequestLog records every authenticated request for its app's /developer/logs:
// method, path (never the query), status, latency, key and correlation id.
func withRequestLog(sink RequestLogSink) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		p := principalOf(c)
		if sink == nil || p == nil || p.App == "" {
			return // a person's request across apps belongs to none
		}
		sink.Add(store.RequestLog{ID: ids.New("req"), OrgID: p.OrgID, App: p.App, Method: c.Request.Method,
			Path: c.Request.URL.Path, Status: c.Writer.Status(), LatencyMs: float64(time.Since(start).Microseconds()) / 1000,
			KeyID: p.ID, CorrelationID: correlationID(c), At: start.UTC()})
	}
}

type requestLogHandlers struct {
	svc *service.Service
	log *slog.Logger
}

func requestLogJSON(r *store.RequestLog) apitypes.RequestLog {
	return apitypes.RequestLog{ID: r.ID, Method: r.Method, Path: r.Path, Status: r.Status, LatencyMs: r.LatencyMs,
		KeyID: r.KeyID, CorrelationID: r.CorrelationID, At: timeOf(r.At)}
}

// list answers GET /developer/logs?correlationId=&status=: the app's recent requests,
// newest first.
func (h *requestLogHandlers) list(c *gin.Context) {
	pg, errs := listParams(c)
	f := store.RequestLogFilter{CorrelationID: c.Query("correlationId")}
	if raw := c.Query("status"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil {
			errs = append(errs, orders.FieldError{Field: "status", Message: "must be an HTTP status such as 404"})
		}
		f.Status = n
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	respondList(c, h.log, requestLogJSON)(h.svc.ListRequestLogs(c.Request.Context(), caller(c), f, pg))
}
