package api

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
)

const (
	defaultPageSize = 50
	maxPageSize     = 200
)

// parseLimit reads limit (1–200, default 50); it collects field errors.
func parseLimit(c *gin.Context, errs *[]orders.FieldError) int {
	if raw, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxPageSize {
			*errs = append(*errs, orders.FieldError{Field: "limit", Message: "must be an integer from 1 to 200"})
		} else {
			return n
		}
	}
	return defaultPageSize
}

// parsePage reads limit (1–200, default 50) and the opaque cursor; it collects field errors.
func parsePage(c *gin.Context, errs *[]orders.FieldError) service.Page {
	p := service.Page{Limit: parseLimit(c, errs)}
	if raw := c.Query("cursor"); raw != "" {
		b, err := base64.RawURLEncoding.DecodeString(raw)
		// Every key a list hands out is text; anything else (not UTF-8, or with a NUL)
		// would reach the database as a key it cannot compare, and fail there.
		if err != nil || len(b) == 0 || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
			*errs = append(*errs, orders.FieldError{Field: "cursor", Message: "is not a cursor returned by this list"})
		} else {
			p.After = string(b)
		}
	}
	return p
}

// encodeCursor makes the opaque cursor that continues after key.
func encodeCursor(key string) apitypes.Cursor {
	if key == "" {
		return ""
	}
	return apitypes.Cursor(base64.RawURLEncoding.EncodeToString([]byte(key)))
}

func validationFailed(c *gin.Context, errs []orders.FieldError) {
	p := NewProblem(apitypes.CodeValidationFailed, "The request has invalid fields; see errors.")
	p.Errors = errs
	abortProblem(c, p)
}

// listParams reads a list's page; withKnownQuery has refused parameters the route does
// not take. Callers add their own checks to errs before answering.
func listParams(c *gin.Context) (service.Page, []orders.FieldError) {
	var errs []orders.FieldError
	return parsePage(c, &errs), errs
}

// pageOrRefuse reads a list's page for a route with no filters of its own to check, or
// answers 422 and returns false.
func pageOrRefuse(c *gin.Context) (service.Page, bool) {
	pg, errs := listParams(c)
	if len(errs) > 0 {
		validationFailed(c, errs)
		return pg, false
	}
	return pg, true
}
