package apitypes

import (
	"encoding/json"

	"github.com/opentreasury/treasury/internal/events"
)

// PayoutScheduleRequest is a new payout schedule (POST /payout-schedules): the payment
// each run creates and submits (the body of POST /payments, single or batch), and when:
// Every, an ISO 8601 duration (P1D, PT12H), or Cron, five fields in Timezone (UTC when
// absent); StartAt and EndAt bound the runs.
type PayoutScheduleRequest struct {
	Payment  json.RawMessage `json:"payment"`
	Every    string          `json:"every,omitempty"`
	Cron     string          `json:"cron,omitempty"`
	Timezone string          `json:"timezone,omitempty"`
	StartAt  *events.Time    `json:"startAt,omitempty"`
	EndAt    *events.Time    `json:"endAt,omitempty"`
}

// PayoutSchedule is a payout schedule (pys_…). Each run creates and submits one payment
// order under the Idempotency-Key <id>:<nominal time>.
type PayoutSchedule struct {
	ID       string          `json:"id"`
	App      string          `json:"app"`
	Payment  json.RawMessage `json:"payment"`
	Every    string          `json:"every,omitempty"`
	Cron     string          `json:"cron,omitempty"`
	Timezone string          `json:"timezone,omitempty"`
	StartAt  *events.Time    `json:"startAt"`
	EndAt    *events.Time    `json:"endAt"`
	Paused   bool            `json:"paused"`
	// NextRunAt is the next nominal time Temporal plans, when one schedule is read and
	// it is not paused; absent otherwise.
	NextRunAt *events.Time `json:"nextRunAt,omitempty"`
	Creator
	CreatedAt events.Time `json:"createdAt"`
	UpdatedAt events.Time `json:"updatedAt"`
}

// PayoutRun is a run of a schedule (GET /payout-schedules/{id}/runs): its nominal time,
// its order and the order's status, or why it made no order.
type PayoutRun struct {
	ScheduleID  string      `json:"scheduleId"`
	NominalTime events.Time `json:"nominalTime"`
	// OrderID is the order the run made; null while it is being made or when it made none.
	OrderID *string `json:"orderId"`
	// Status is the order's status; running before the order exists, refused when the run
	// made none (Error says why).
	Status    string      `json:"status"`
	Error     string      `json:"error,omitempty"`
	CreatedAt events.Time `json:"createdAt"`
}

// What a run's status says before and instead of its order's.
const (
	PayoutRunRunning = "running"
	PayoutRunRefused = "refused"
)
