package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
)

// caller is who a request acts as, for the service: its principal and correlation id.
func caller(c *gin.Context) service.Caller {
	return service.Caller{Principal: principalOf(c), CorrelationID: correlationID(c), IdempotencyKey: c.GetHeader(idempotencyHeader)}
}

// narrow makes a person's principal act within one app for the rest of the request, as
// the request log files it; keys and tokens already are.
func narrow(c *gin.Context, app string) {
	if p := principalOf(c); p != nil {
		c.Set(principalContextKey, p.InApp(app))
	}
}

// readBody reads a request body within the size limit, answering 413 when it is over.
func readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			fail(c, apitypes.CodePayloadTooLarge, "The request body is larger than 1 MiB.")
		} else {
			fail(c, apitypes.CodeValidationFailed, "The request body could not be read.")
		}
		return nil, false
	}
	return body, true
}

// bindStrict reads the request body into `into` with strictJSON, answering 413 or 422
// itself; it reports whether the handler may go on.
func bindStrict(c *gin.Context, into any, allowed ...string) bool {
	body, ok := readBody(c)
	if !ok {
		return false
	}
	if errs := strictJSON(body, into, allowed...); len(errs) > 0 {
		validationFailed(c, errs)
		return false
	}
	return true
}

// strictJSON decodes a JSON object whose field names must be among allowed, exactly, and
// whose strings hold no NUL character.
func strictJSON(body []byte, into any, allowed ...string) []orders.FieldError {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return []orders.FieldError{{Field: "body", Message: "must be one JSON object"}}
	}
	var errs []orders.FieldError
	for k := range raw {
		if !slices.Contains(allowed, k) {
			errs = append(errs, orders.FieldError{Field: k, Message: "is not a field of this request"})
		}
	}
	for k, v := range raw {
		if orders.HoldsNUL(v) {
			errs = append(errs, orders.FieldError{Field: k, Message: orders.NULMessage})
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b orders.FieldError) int { return strings.Compare(a.Field, b.Field) })
		return errs
	}
	if err := json.Unmarshal(body, into); err != nil {
		return []orders.FieldError{{Field: "body", Message: "has a field of the wrong type"}}
	}
	return nil
}

// withJSONBody refuses a write whose body is not JSON (SPEC 2): 415, before anything
// reads it. A write without a body (submit, test, DELETE) needs no Content-Type.
func withJSONBody() gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		if r.Method == http.MethodGet || r.Method == http.MethodHead || (r.ContentLength == 0 && len(r.TransferEncoding) == 0) {
			c.Next()
			return
		}
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			fail(c, apitypes.CodeUnsupportedMediaType, "The request body must be JSON: send it with 'Content-Type: application/json'.")
			return
		}
		c.Next()
	}
}
