package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names of a payout schedule's run and its activity.
const (
	PayoutRunWorkflow = "PayoutRun"
	RunPayoutActivity = "RunPayout"
)

// PayoutCatchupWindow is how late a run may still be taken when Temporal could not take
// it on time (the server down): later than that, it is skipped. A run missed while its
// schedule was paused is never taken.
const PayoutCatchupWindow = 24 * time.Hour

// PayoutRunWorkflowID is the id of a schedule's runs; Temporal adds each run's nominal time.
func PayoutRunWorkflowID(scheduleID string) string { return "payout-run-" + scheduleID }

// PayoutRunInput names the schedule a run is of. NominalTime is left zero by the schedule,
// and the run reads the time its schedule gave it; set, it runs that time again (a repeat
// makes no second order).
type PayoutRunInput struct {
	ScheduleID  string
	NominalTime time.Time
}

// PayoutRunResult is what a run did: the order it made and submitted, or why it made none
// (a schedule paused or deleted meanwhile, or a refusal such as an archived wallet).
type PayoutRunResult struct {
	OrderID string
	// Outcome is submitted, rejected (by the policy, at submit), skipped or refused.
	Outcome string
	Error   string
}

// What a run did.
const (
	PayoutSubmitted = "submitted"
	PayoutRejected  = "rejected"
	PayoutSkipped   = "skipped"
	PayoutRefused   = "refused"
)

// scheduledStartTime is the search attribute Temporal sets on the workflows a Schedule
// starts: the run's nominal time.
var scheduledStartTime = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

// NominalTimeOf is a run's nominal time as its key holds it: UTC, whole seconds (a
// schedule's times are).
func NominalTimeOf(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// PayoutRun makes and submits a payout schedule's order for one nominal time. The activity
// does it once per nominal time however often it runs (the run is keyed by it), so the
// retries here and a run started twice pay once.
func PayoutRun(ctx workflow.Context, in PayoutRunInput) (PayoutRunResult, error) {
	if in.NominalTime.IsZero() {
		t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(scheduledStartTime)
		if !ok {
			// Keyed by any other time, a run could pay a second time: no run without its own.
			return PayoutRunResult{}, temporal.NewNonRetryableApplicationError(
				"a payout run needs its nominal time: from its schedule, or in its input", "NoNominalTime", nil)
		}
		in.NominalTime = t
	}
	in.NominalTime = NominalTimeOf(in.NominalTime)
	// Retried while the run may still be taken (its catch-up window, less an hour for the
	// queue): a database or the workers down for a while delay the payout, not lose it.
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: PayoutCatchupWindow - time.Hour,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 5 * time.Minute},
	})
	var res PayoutRunResult
	err := workflow.ExecuteActivity(ctx, RunPayoutActivity, in).Get(ctx, &res)
	return res, err
}

// PayoutScheduleSpec is when a payout schedule runs: every (a fixed interval) or cron (in
// Timezone), between StartAt and EndAt when set.
type PayoutScheduleSpec struct {
	ID             string
	Every          time.Duration
	Cron           string
	Timezone       string
	StartAt, EndAt time.Time
	Paused         bool
	Note           string
}

// PayoutSchedules keeps the Temporal Schedules of payout schedules, one per schedule,
// under the schedule's own id.
type PayoutSchedules struct {
	Temporal client.Client
}

// Create creates the schedule's Temporal Schedule, or finds it created (a retried create).
// Its runs may overlap: each is its own payout, and a slow one delays no other.
func (p PayoutSchedules) Create(ctx context.Context, s PayoutScheduleSpec) error {
	spec := client.ScheduleSpec{StartAt: s.StartAt, EndAt: s.EndAt, TimeZoneName: s.Timezone}
	if s.Every > 0 {
		spec.Intervals = []client.ScheduleIntervalSpec{{Every: s.Every}}
	} else {
		spec.CronExpressions = []string{s.Cron}
	}
	_, err := p.Temporal.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:   s.ID,
		Spec: spec,
		Action: &client.ScheduleWorkflowAction{
			ID:                       PayoutRunWorkflowID(s.ID),
			Workflow:                 PayoutRunWorkflow,
			Args:                     []any{PayoutRunInput{ScheduleID: s.ID}},
			TaskQueue:                TaskQueue,
			WorkflowExecutionTimeout: PayoutCatchupWindow,
		},
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
		CatchupWindow: PayoutCatchupWindow,
		Paused:        s.Paused,
		Note:          s.Note,
	})
	var exists *serviceerror.AlreadyExists
	if err == nil || errors.Is(err, temporal.ErrScheduleAlreadyRunning) || errors.As(err, &exists) {
		return nil
	}
	var bad *serviceerror.InvalidArgument
	if errors.As(err, &bad) {
		return &InvalidScheduleError{Message: bad.Message}
	}
	return fmt.Errorf("create schedule %s: %w", s.ID, err)
}

// InvalidScheduleError is Temporal's refusal of a schedule's times (a cron it cannot read,
// an unknown time zone).
type InvalidScheduleError struct{ Message string }

func (e *InvalidScheduleError) Error() string { return "invalid schedule: " + e.Message }

// SetPaused pauses or resumes the schedule's runs. Times that pass while it is paused are
// skipped, not caught up when it resumes.
func (p PayoutSchedules) SetPaused(ctx context.Context, id string, paused bool) error {
	h := p.Temporal.ScheduleClient().GetHandle(ctx, id)
	if paused {
		return h.Pause(ctx, client.SchedulePauseOptions{Note: "paused through the API"})
	}
	return h.Unpause(ctx, client.ScheduleUnpauseOptions{Note: "resumed through the API"})
}

// Delete deletes the schedule's Temporal Schedule; one already gone is deleted.
func (p PayoutSchedules) Delete(ctx context.Context, id string) error {
	err := p.Temporal.ScheduleClient().GetHandle(ctx, id).Delete(ctx)
	var missing *serviceerror.NotFound
	if errors.As(err, &missing) {
		return nil
	}
	return err
}

// NextRuns are the schedule's next nominal times, as Temporal plans them (none while
// paused).
func (p PayoutSchedules) NextRuns(ctx context.Context, id string) ([]time.Time, error) {
	d, err := p.Temporal.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	if err != nil {
		return nil, err
	}
	if d.Schedule.State != nil && d.Schedule.State.Paused {
		return nil, nil
	}
	return d.Info.NextActionTimes, nil
}
