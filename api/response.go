package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/store"
)

func formatTime(t time.Time) string { return events.FormatTime(t) }

// timeOf and timeOrNull put a time into an answer, which writes it in events.TimeLayout;
// a nil time is null.
func timeOf(t time.Time) events.Time       { return events.TimeOf(t) }
func timeOrNull(t *time.Time) *events.Time { return events.TimeOrNil(t) }

// usd renders a USD amount for display: rounded half-even to cents.
func usd(d decimal.Decimal) string { return d.StringFixedBank(2) }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// creatorJSON is who made a record, as every answer names it.
func creatorJSON(c store.Creator) apitypes.Creator {
	return apitypes.Creator{CreatedBy: nullable(c.CreatedBy), CreatedByUser: nullable(c.CreatedByUser)}
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
	c.PureJSON(http.StatusOK, apitypes.Page[T]{Data: out, NextCursor: encodeCursor(next)})
}

// withSecret answers what the service returned with a new secret (a create, a rotation):
// the record rendered and, under secretField, the secret this answer alone holds. A replay
// of the request (Idempotency-Key) answers the same record without the secret: it was shown
// once and is never stored in the clear, not even for replay.
func withSecret[R, T any](c *gin.Context, log *slog.Logger, status int, render func(*R) T, secretField string) func(*R, string, error) {
	return func(rec *R, secret string, err error) {
		if err != nil {
			failed(c, log, err)
			return
		}
		kept, err := json.Marshal(render(rec))
		var out map[string]any
		if err == nil {
			err = json.Unmarshal(kept, &out)
		}
		if err != nil {
			requestFailed(c, log, err)
			return
		}
		out[secretField] = secret
		c.Header("Cache-Control", "no-store")
		c.PureJSON(status, out)
		c.Set(keptBodyKey, kept)
	}
}

// keptBodyKey holds the body an idempotency record keeps in place of the one sent.
const keptBodyKey = "treasury.keptBody"
