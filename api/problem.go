package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/service"
)

// Error codes of SPEC section 2; each maps to one HTTP status.
const (
	problemTypeBase           = "https://opentreasury.github.io/treasury/errors/"
	problemContentType        = "application/problem+json"
	correlationHeader         = "X-Correlation-Id"
	correlationContextKey     = "treasury.correlationId"
	principalContextKey       = "treasury.principal"
	defaultProblemTitleStatus = http.StatusInternalServerError
)

var codeStatus = map[string]int{
	apitypes.CodeUnauthenticated:      http.StatusUnauthorized,
	apitypes.CodePermissionDenied:     http.StatusForbidden,
	apitypes.CodeMakerChecker:         http.StatusForbidden,
	apitypes.CodeNotFound:             http.StatusNotFound,
	apitypes.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	apitypes.CodeConflict:             http.StatusConflict,
	apitypes.CodeAlreadyDecided:       http.StatusConflict,
	apitypes.CodeIdempotencyKeyInUse:  http.StatusConflict,
	apitypes.CodeValidationFailed:     http.StatusUnprocessableEntity,
	apitypes.CodeIdempotencyKeyReused: http.StatusUnprocessableEntity,
	apitypes.CodePolicyViolation:      http.StatusUnprocessableEntity,
	apitypes.CodeInvalidSignature:     http.StatusUnprocessableEntity,
	apitypes.CodePriceUnavailable:     http.StatusUnprocessableEntity,
	apitypes.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	apitypes.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	apitypes.CodeRateLimited:          http.StatusTooManyRequests,
	apitypes.CodeInternal:             http.StatusInternalServerError,
	apitypes.CodeUnavailable:          http.StatusServiceUnavailable,
}

var codeTitle = map[string]string{
	apitypes.CodeUnauthenticated:      "Authentication required",
	apitypes.CodePermissionDenied:     "Permission denied",
	apitypes.CodeMakerChecker:         "Maker-checker violation",
	apitypes.CodeNotFound:             "Not found",
	apitypes.CodeMethodNotAllowed:     "Method not allowed",
	apitypes.CodeConflict:             "Conflict",
	apitypes.CodeAlreadyDecided:       "Already decided",
	apitypes.CodeIdempotencyKeyInUse:  "Idempotency key in use",
	apitypes.CodeValidationFailed:     "Validation failed",
	apitypes.CodeIdempotencyKeyReused: "Idempotency key reused",
	apitypes.CodePolicyViolation:      "Policy violation",
	apitypes.CodeInvalidSignature:     "Invalid signature",
	apitypes.CodePriceUnavailable:     "Price unavailable",
	apitypes.CodePayloadTooLarge:      "Payload too large",
	apitypes.CodeUnsupportedMediaType: "Unsupported media type",
	apitypes.CodeRateLimited:          "Rate limited",
	apitypes.CodeInternal:             "Internal error",
	apitypes.CodeUnavailable:          "Service unavailable",
}

// Problem is an RFC 9457 problem document.
type Problem struct {
	Type          string              `json:"type"`
	Title         string              `json:"title"`
	Status        int                 `json:"status"`
	Code          string              `json:"code"`
	Detail        string              `json:"detail,omitempty"`
	CorrelationID string              `json:"correlationId"`
	Errors        []orders.FieldError `json:"errors,omitempty"`
	Violations    []policy.Violation  `json:"violations,omitempty"`
}

// NewProblem builds the problem for a code, with a human detail.
func NewProblem(code, detail string) *Problem {
	status, ok := codeStatus[code]
	if !ok {
		code, status = apitypes.CodeInternal, defaultProblemTitleStatus
	}
	return &Problem{Type: problemTypeBase + code, Title: codeTitle[code], Status: status, Code: code, Detail: detail}
}

// abortProblem answers the request with a problem and stops the handler chain.
func abortProblem(c *gin.Context, p *Problem) {
	p.CorrelationID = correlationID(c)
	c.Set(problemCodeKey, p.Code)
	if p.Status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="treasury"`)
	}
	c.Header("Content-Type", problemContentType)
	c.Header("Cache-Control", "no-store")
	// Gin keeps a Content-Type that is already set, so the problem media type wins. Pure:
	// the detail reads as written ("Bearer <key>", not \u003ckey\u003e), ending with a newline.
	c.Abort()
	c.PureJSON(p.Status, p)
}

// fail answers with the problem of a code.
func fail(c *gin.Context, code, detail string) {
	abortProblem(c, NewProblem(code, detail))
}

// failed answers for an error of the service: a refusal is its problem, with the fields or
// rules at fault; anything else (the store, Temporal) goes through requestFailed.
func failed(c *gin.Context, log *slog.Logger, err error) {
	var e *service.Error
	if !errors.As(err, &e) {
		requestFailed(c, log, err)
		return
	}
	detail := e.Detail
	if e.Kind == service.RateLimited {
		seconds := retryAfter(e.RetryAfter)
		c.Header("Retry-After", seconds)
		detail += "; retry after " + seconds + " s."
	}
	p := NewProblem(e.Kind.Code(), detail)
	p.Errors, p.Violations = e.Fields, e.Violations
	abortProblem(c, p)
}
