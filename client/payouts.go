package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/opentreasury/treasury/apitypes"
)

// Payout schedules (SPEC 3.9) make and submit a payment on a calendar, in the pay app:
// each run creates one order under the Idempotency-Key <scheduleId>:<nominal time>, so a
// run repeated after a crash makes no second order. Their orders carry ScheduleID, and so
// does their Order.Created event.

func payoutPath(ids ...string) string {
	path := "/payout-schedules"
	for _, id := range ids {
		path += "/" + url.PathEscape(id)
	}
	return path
}

// PayoutSchedule is a payout schedule (pys_…).
type PayoutSchedule = apitypes.PayoutSchedule

// PayoutRun is a run of a schedule: its nominal time, its order and the order's status.
type PayoutRun = apitypes.PayoutRun

// PayoutScheduleRequest is a new payout schedule: the payment each run makes (single or
// batch), and Every (an ISO 8601 duration such as P1D or PT12H) or Cron (five fields, in
// Timezone, UTC when empty); StartAt and EndAt, when not zero, bound the runs.
type PayoutScheduleRequest struct {
	Payment  PaymentRequest `json:"payment"`
	Every    string         `json:"every,omitempty"`
	Cron     string         `json:"cron,omitempty"`
	Timezone string         `json:"timezone,omitempty"`
	StartAt  time.Time      `json:"startAt,omitzero"`
	EndAt    time.Time      `json:"endAt,omitzero"`
}

// CreatePayoutSchedule creates a schedule; its first run comes at its first time.
func (c *Client) CreatePayoutSchedule(ctx context.Context, req PayoutScheduleRequest, opts ...CallOption) (*PayoutSchedule, error) {
	return do[PayoutSchedule](ctx, c, http.MethodPost, payoutPath(), req, opts)
}

// GetPayoutSchedule reads a schedule, with its next run when it is not paused.
func (c *Client) GetPayoutSchedule(ctx context.Context, id string, opts ...CallOption) (*PayoutSchedule, error) {
	return get[PayoutSchedule](ctx, c, payoutPath(id), opts)
}

// ListPayoutSchedules reads a page of the app's schedules, newest first.
func (c *Client) ListPayoutSchedules(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[PayoutSchedule], error) {
	return list[PayoutSchedule](ctx, c, payoutPath(), o.query(), opts)
}

// PayoutSchedules iterates over the app's schedules, newest first.
func (c *Client) PayoutSchedules(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[PayoutSchedule, error] {
	return all[PayoutSchedule](ctx, c, payoutPath(), o.query(), "cursor", opts)
}

// PausePayoutSchedule pauses (true) or resumes (false) a schedule. Times that pass while
// it is paused are skipped, not caught up.
func (c *Client) PausePayoutSchedule(ctx context.Context, id string, paused bool, opts ...CallOption) (*PayoutSchedule, error) {
	return do[PayoutSchedule](ctx, c, http.MethodPatch, payoutPath(id), map[string]bool{"paused": paused}, opts)
}

// DeletePayoutSchedule deletes a schedule: it runs no more; its orders stay.
func (c *Client) DeletePayoutSchedule(ctx context.Context, id string, opts ...CallOption) error {
	_, err := do[struct{}](ctx, c, http.MethodDelete, payoutPath(id), nil, opts)
	return err
}

// ListPayoutRuns reads a page of a schedule's runs, the latest due first.
func (c *Client) ListPayoutRuns(ctx context.Context, id string, o ListOptions, opts ...CallOption) (*Page[PayoutRun], error) {
	return list[PayoutRun](ctx, c, payoutPath(id, "runs"), o.query(), opts)
}

// PayoutRuns iterates over a schedule's runs, the latest due first.
func (c *Client) PayoutRuns(ctx context.Context, id string, o ListOptions, opts ...CallOption) iter.Seq2[PayoutRun, error] {
	return all[PayoutRun](ctx, c, payoutPath(id, "runs"), o.query(), "cursor", opts)
}
