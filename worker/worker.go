// Package worker registers the workflows and activities on the treasury task queue and
// keeps the Temporal Schedules they need in place.
package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/workflows"
)

// Activities bundles every activity implementation the worker serves.
type Activities struct {
	Portfolio *activities.Portfolio
}

// New builds a worker on the treasury task queue with every workflow and activity registered.
func New(c client.Client, acts Activities, opts sdkworker.Options) sdkworker.Worker {
	w := sdkworker.New(c, workflows.TaskQueue, opts)
	w.RegisterWorkflowWithOptions(workflows.PortfolioSync, workflow.RegisterOptions{Name: workflows.PortfolioSyncWorkflow})
	w.RegisterActivityWithOptions(acts.Portfolio.ListWalletRefs, activity.RegisterOptions{Name: workflows.ListWalletRefsActivity})
	w.RegisterActivityWithOptions(acts.Portfolio.SyncWalletBalances, activity.RegisterOptions{Name: workflows.SyncWalletBalancesActivity})
	return w
}

// EnsurePortfolioSyncSchedule creates the schedule that refreshes balances every interval,
// or moves an existing one to that interval. A run still going when the next is due is
// not doubled (overlap: skip).
func EnsurePortfolioSyncSchedule(ctx context.Context, c client.Client, interval time.Duration) error {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: interval}}}
	action := &client.ScheduleWorkflowAction{
		ID:                       workflows.PortfolioSyncScheduleID,
		Workflow:                 workflows.PortfolioSyncWorkflow,
		Args:                     []any{workflows.PortfolioSyncInput{}},
		TaskQueue:                workflows.TaskQueue,
		WorkflowExecutionTimeout: 30 * time.Minute,
	}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:                 workflows.PortfolioSyncScheduleID,
		Spec:               spec,
		Action:             action,
		Overlap:            enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		TriggerImmediately: true,
		Note:               "Refreshes wallet balances from the chain adapter (SPEC 3.1).",
	})
	if err == nil {
		return nil
	}
	var exists *serviceerror.AlreadyExists
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) && !errors.As(err, &exists) {
		return fmt.Errorf("create portfolio sync schedule: %w", err)
	}
	h := c.ScheduleClient().GetHandle(ctx, workflows.PortfolioSyncScheduleID)
	return h.Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			in.Description.Schedule.Spec = &spec
			in.Description.Schedule.Action = action
			return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
		},
	})
}
