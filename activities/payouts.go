package activities

import (
	"context"
	"time"

	"github.com/opentreasury/treasury/workflows"
)

// PayoutRunner makes and submits the order of a payout schedule's run
// (service.Service.RunPayout), once per nominal time however often it is asked.
type PayoutRunner interface {
	RunPayout(ctx context.Context, scheduleID string, nominal time.Time) (workflows.PayoutRunResult, error)
}

// Payouts serves the runs of payout schedules.
type Payouts struct {
	Runner PayoutRunner
}

// RunPayout makes and submits the order of one run of a payout schedule.
func (a *Payouts) RunPayout(ctx context.Context, in workflows.PayoutRunInput) (workflows.PayoutRunResult, error) {
	return a.Runner.RunPayout(ctx, in.ScheduleID, in.NominalTime)
}
