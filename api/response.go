package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/events"
)

func formatTime(t time.Time) string { return events.FormatTime(t) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// usd renders a USD amount for display: rounded half-even to cents.
func usd(d decimal.Decimal) string { return d.StringFixedBank(2) }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// writeList answers a page of a list (SPEC 2): each item rendered, and the cursor that
// continues after next, the key of the last item read ("" on the last page).
func writeList[R, T any](c *gin.Context, items []R, next string, render func(*R) T) {
	out := make([]T, len(items))
	for i := range items {
		out[i] = render(&items[i])
	}
	var cursor *string
	if next != "" {
		cursor = encodeCursor(next)
	}
	c.JSON(http.StatusOK, listResponse[T]{Data: out, NextCursor: cursor})
}

// replyWithSecret answers 201 with a new credential whose secret this answer alone holds.
// A replay of the request (Idempotency-Key) answers the same record without the secret
// fields: the secret was shown once and is never stored in the clear, not even for replay.
func replyWithSecret(c *gin.Context, out any, secretFields ...string) {
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, out)
	var kept map[string]any
	b, err := json.Marshal(out)
	if err == nil {
		err = json.Unmarshal(b, &kept)
	}
	for _, f := range secretFields {
		delete(kept, f)
	}
	if err == nil {
		b, err = json.Marshal(kept)
	}
	if err != nil {
		b = []byte(`{}`)
	}
	c.Set(keptBodyKey, b)
}

// keptBodyKey holds the body an idempotency record keeps in place of the one sent.
const keptBodyKey = "treasury.keptBody"
