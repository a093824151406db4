package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
)

// payoutHandlers serve /payout-schedules: payments made and submitted on a calendar
// (SPEC 3.9), in the pay app.
type payoutHandlers struct {
	svc *service.Service
	log *slog.Logger
}

// payouts registers the payout schedules' routes.
func (rt *routes) payouts(v1 *gin.RouterGroup) {
	h := &payoutHandlers{svc: rt.svc, log: rt.log}
	const app = "pay"
	read, write := require(app, auth.ActionRead), require(app, auth.ActionWrite)
	v1.POST("/payout-schedules", write, h.create)
	v1.GET("/payout-schedules", read, h.list)
	v1.GET("/payout-schedules/:id", read, h.get)
	v1.PATCH("/payout-schedules/:id", write, h.update)
	v1.DELETE("/payout-schedules/:id", write, h.remove)
	v1.GET("/payout-schedules/:id/runs", read, h.runs)
}

func payoutScheduleJSON(p *service.PayoutSchedule) apitypes.PayoutSchedule {
	return apitypes.PayoutSchedule{ID: p.ID, App: p.App, Payment: []byte(p.Payment), Every: p.Every, Cron: p.Cron,
		Timezone: p.Timezone, StartAt: timeOrNull(p.StartAt), EndAt: timeOrNull(p.EndAt), Paused: p.Paused,
		NextRunAt: timeOrNull(p.NextRunAt), Creator: creatorJSON(p.Creator), CreatedAt: timeOf(p.CreatedAt),
		UpdatedAt: timeOf(p.UpdatedAt)}
}

// payoutRunJSON is a run as the API shows it.
func payoutRunJSON(r *service.PayoutRunView) apitypes.PayoutRun {
	out := apitypes.PayoutRun{ScheduleID: r.ScheduleID, Status: r.OrderStatus, Error: r.Error, CreatedAt: timeOf(r.CreatedAt)}
	if t, err := time.Parse(time.RFC3339, r.NominalTime); err == nil {
		out.NominalTime = timeOf(t)
	}
	switch {
	case r.Error != "":
		out.Status = apitypes.PayoutRunRefused
	case r.OrderStatus == "":
		out.Status = apitypes.PayoutRunRunning
	default:
		out.OrderID = &r.OrderID
	}
	return out
}

// create answers POST /payout-schedules {payment, every | cron, timezone?, startAt?, endAt?}.
func (h *payoutHandlers) create(c *gin.Context) {
	var req apitypes.PayoutScheduleRequest
	if !bindStrict(c, &req, "payment", "every", "cron", "timezone", "startAt", "endAt") {
		return
	}
	in := service.PayoutScheduleInput{Payment: req.Payment, Every: req.Every, Cron: req.Cron, Timezone: req.Timezone}
	if req.StartAt != nil {
		in.StartAt = &req.StartAt.Time
	}
	if req.EndAt != nil {
		in.EndAt = &req.EndAt.Time
	}
	respond(c, h.log, http.StatusCreated, payoutScheduleJSON)(h.svc.CreatePayoutSchedule(c.Request.Context(), caller(c), in))
}

// list answers GET /payout-schedules: the pay app's schedules, newest first.
func (h *payoutHandlers) list(c *gin.Context) {
	listPage(c, h.log, h.svc.ListPayoutSchedules, payoutScheduleJSON)
}

// get answers GET /payout-schedules/{id}, with its next run.
func (h *payoutHandlers) get(c *gin.Context) {
	respond(c, h.log, http.StatusOK, payoutScheduleJSON)(h.svc.GetPayoutSchedule(c.Request.Context(), caller(c), c.Param("id")))
}

// update answers PATCH /payout-schedules/{id} {paused}.
func (h *payoutHandlers) update(c *gin.Context) {
	var req struct {
		Paused *bool `json:"paused"`
	}
	if !bindStrict(c, &req, "paused") {
		return
	}
	if req.Paused == nil {
		validationFailed(c, []orders.FieldError{{Field: "paused", Message: "is required: true pauses the schedule, false resumes it"}})
		return
	}
	respond(c, h.log, http.StatusOK, payoutScheduleJSON)(h.svc.PausePayoutSchedule(c.Request.Context(), caller(c), c.Param("id"), *req.Paused))
}

// remove answers DELETE /payout-schedules/{id}: it runs no more; its orders stay.
func (h *payoutHandlers) remove(c *gin.Context) {
	id := c.Param("id")
	if err := h.svc.DeletePayoutSchedule(c.Request.Context(), caller(c), id); err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"id": id, "deleted": true})
}

// runs answers GET /payout-schedules/{id}/runs: each run with its order and status, the
// latest due first.
func (h *payoutHandlers) runs(c *gin.Context) {
	id := c.Param("id")
	listPage(c, h.log, func(ctx context.Context, who service.Caller, pg service.Page) ([]service.PayoutRunView, string, error) {
		return h.svc.PayoutRuns(ctx, who, id, pg)
	}, payoutRunJSON)
}
