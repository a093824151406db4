package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

var correlationIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// withCorrelationID echoes a well-formed client X-Correlation-Id or makes one, and puts it
// on the response before anything else can answer, so 404s and panics carry it too.
func withCorrelationID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(correlationHeader)
		if !correlationIDPattern.MatchString(id) {
			id = uuid.Must(uuid.NewV7()).String()
		}
		c.Set(correlationContextKey, id)
		c.Header(correlationHeader, id)
		c.Next()
	}
}

// correlationID returns the request's correlation id.
func correlationID(c *gin.Context) string {
	return c.GetString(correlationContextKey)
}

// withRecovery turns a panic into a 500 problem that leaks nothing, and logs the stack.
func withRecovery(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if err, ok := rec.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(rec)
			}
			log.Error("panic serving request", "correlationId", correlationID(c),
				"method", c.Request.Method, "path", c.Request.URL.Path,
				"panic", rec, "stack", string(debug.Stack()))
			if c.Writer.Written() {
				c.Abort()
				return
			}
			fail(c, apitypes.CodeInternal, "The request could not be completed. Quote the correlation id when reporting it.")
		}()
		c.Next()
	}
}

// withPrintableTarget refuses a path or query holding a NUL or bytes that are not UTF-8:
// no id, cursor or filter of ours has them, and PostgreSQL would refuse them as text.
// Such a path names nothing (404); such a query is a validation failure (422).
func withPrintableTarget() gin.HandlerFunc {
	return func(c *gin.Context) {
		if !cleanText(c.Request.URL.Path) {
			fail(c, apitypes.CodeNotFound, "There is nothing at this path.")
			return
		}
		for key, values := range c.Request.URL.Query() {
			for _, v := range append(values, key) {
				if !cleanText(v) {
					validationFailed(c, []orders.FieldError{{Field: "query", Message: "must be UTF-8 text without NUL characters"}})
					return
				}
			}
		}
		c.Next()
	}
}

func cleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// withBodyLimit refuses bodies over limit bytes: at once when Content-Length says so, and
// while reading otherwise (handlers turn the read error into the same 413 problem).
func withBodyLimit(limit int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > limit {
			fail(c, apitypes.CodePayloadTooLarge, "The request body is larger than 1 MiB.")
			return
		}
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
		}
		c.Next()
	}
}

// withTimeout bounds the work a request may do: store and Temporal calls honour the deadline.
func withTimeout(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// withAccessLog writes one structured line per request. The query is logged with every
// credential-bearing parameter redacted, and headers are never logged.
func withAccessLog(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		// Room for every attribute below, so that adding the query's and the key's
		// does not grow the slice on the heap at each request.
		attrs := make([]slog.Attr, 0, 10)
		attrs = append(attrs,
			slog.String("method", c.Request.Method),
			slog.String("path", c.Request.URL.Path),
			slog.Int("status", c.Writer.Status()),
			slog.Float64("latencyMs", float64(time.Since(start).Microseconds())/1000),
			slog.String("correlationId", correlationID(c)),
			slog.String("clientIp", c.ClientIP()),
		)
		if q := redactQuery(c.Request.URL.RawQuery); q != "" {
			attrs = append(attrs, slog.String("query", q))
		}
		if p := principalOf(c); p != nil {
			attrs = append(attrs, slog.String("keyId", p.ID), slog.String("orgId", p.OrgID))
		}
		level := slog.LevelInfo
		if c.Writer.Status() >= 500 {
			level = slog.LevelError
		}
		log.LogAttrs(c.Request.Context(), level, "request", attrs...)
	}
}

// loggableQueryParams are the query parameters whose values may be logged; every other
// parameter's value is redacted, so a credential in a URL never reaches the log whatever
// its parameter is called.
var loggableQueryParams = map[string]bool{
	"limit": true, "cursor": true, "status": true, "domain": true, "createdAfter": true,
	"orderId": true, "after": true, "id": true, "app": true, "correlationId": true, "event": true,
	"since": true, "until": true,
}

// redactQuery renders a query for the log with every value not known to be harmless
// replaced by REDACTED.
func redactQuery(raw string) string {
	if raw == "" {
		return ""
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "(unparseable)"
	}
	for k := range q {
		if !loggableQueryParams[k] {
			q.Set(k, "REDACTED")
		}
	}
	return q.Encode()
}

// unavailable reports whether err means a dependency (the database, Temporal) could not
// be reached or did not answer in time. Temporal answers that its namespace is not found
// while its own database restarts: the namespace is there again a moment later, so that
// too is a dependency not answering, not a fault of the request.
func unavailable(err error) bool {
	var down *serviceerror.Unavailable
	var slow *serviceerror.DeadlineExceeded
	var noNamespace *serviceerror.NamespaceNotFound
	return store.Unavailable(err) || errors.Is(err, service.ErrWorkflowsUnavailable) ||
		errors.As(err, &down) || errors.As(err, &slow) || errors.As(err, &noNamespace)
}

// requestFailed answers for an error from the store or Temporal: the deadline or an
// unreachable dependency is 503 (safe to retry); anything else is a logged 500.
func requestFailed(c *gin.Context, log *slog.Logger, err error) {
	if unavailable(err) {
		log.Warn("dependency unavailable", "correlationId", correlationID(c), "method", c.Request.Method,
			"path", c.Request.URL.Path, "error", err.Error())
		fail(c, apitypes.CodeUnavailable, "A dependency did not answer in time; the request is safe to retry.")
		return
	}
	log.Error("request failed", "correlationId", correlationID(c), "method", c.Request.Method,
		"path", c.Request.URL.Path, "error", err.Error())
	fail(c, apitypes.CodeInternal, "The request could not be completed. Quote the correlation id when reporting it.")
}
