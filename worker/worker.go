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
	Portfolio   *activities.Portfolio
	Maintenance *activities.Maintenance
	Orders      *activities.Orders
}

// New builds a worker on the treasury task queue with every workflow and activity registered.
func New(c client.Client, acts Activities, opts sdkworker.Options) sdkworker.Worker {
	w := sdkworker.New(c, workflows.TaskQueue, opts)
	w.RegisterWorkflowWithOptions(workflows.PortfolioSync, workflow.RegisterOptions{Name: workflows.PortfolioSyncWorkflow})
	w.RegisterActivityWithOptions(acts.Portfolio.ListWalletRefs, activity.RegisterOptions{Name: workflows.ListWalletRefsActivity})
	w.RegisterActivityWithOptions(acts.Portfolio.SyncWalletBalances, activity.RegisterOptions{Name: workflows.SyncWalletBalancesActivity})
	w.RegisterWorkflowWithOptions(workflows.Maintenance, workflow.RegisterOptions{Name: workflows.MaintenanceWorkflow})
	w.RegisterWorkflowWithOptions(workflows.OrderLifecycle, workflow.RegisterOptions{Name: workflows.OrderWorkflow})
	for name, fn := range map[string]any{
		workflows.MarkSubmittedActivity:    acts.Orders.MarkSubmitted,
		workflows.EvaluatePolicyActivity:   acts.Orders.EvaluatePolicy,
		workflows.RequestApprovalActivity:  acts.Orders.RequestApproval,
		workflows.MarkApprovedActivity:     acts.Orders.MarkApproved,
		workflows.ApprovalOutcomeActivity:  acts.Orders.ApprovalOutcome,
		workflows.RejectOrderActivity:      acts.Orders.RejectOrder,
		workflows.RequestSignatureActivity: acts.Orders.RequestSignature,
		workflows.RecordSignatureActivity:  acts.Orders.RecordSignature,
		workflows.BroadcastLegActivity:     acts.Orders.BroadcastLeg,
		workflows.CheckLegActivity:         acts.Orders.CheckLeg,
		workflows.ConfirmLegActivity:       acts.Orders.ConfirmLeg,
		workflows.FailOrderActivity:        acts.Orders.FailOrder,
	} {
		w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	w.RegisterActivityWithOptions(acts.Maintenance.DeleteExpiredIdempotencyKeys, activity.RegisterOptions{Name: workflows.DeleteExpiredIdempotencyKeysActivity})
	w.RegisterActivityWithOptions(acts.Maintenance.DeleteExpiredEvents, activity.RegisterOptions{Name: workflows.DeleteExpiredEventsActivity})
	w.RegisterActivityWithOptions(acts.Maintenance.DeleteExpiredOAuthTokens, activity.RegisterOptions{Name: workflows.DeleteExpiredOAuthTokensActivity})
	w.RegisterActivityWithOptions(acts.Maintenance.DeleteExpiredRequestLogs, activity.RegisterOptions{Name: workflows.DeleteExpiredRequestLogsActivity})
	w.RegisterActivityWithOptions(acts.Maintenance.DeleteExpiredSessions, activity.RegisterOptions{Name: workflows.DeleteExpiredSessionsActivity})
	return w
}

// EnsureSchedules creates the Temporal Schedules the service relies on, or moves existing
// ones to the configured intervals: the balance sync and the hourly maintenance.
func EnsureSchedules(ctx context.Context, c client.Client, balanceSyncInterval time.Duration) error {
	if err := ensureSchedule(ctx, c, workflows.PortfolioSyncScheduleID, workflows.PortfolioSyncWorkflow,
		[]any{workflows.PortfolioSyncInput{}}, balanceSyncInterval, "Refreshes wallet balances from the chain adapter."); err != nil {
		return err
	}
	return ensureSchedule(ctx, c, workflows.MaintenanceScheduleID, workflows.MaintenanceWorkflow,
		nil, time.Hour, "Deletes data past its retention (idempotency records, events, OAuth tokens).")
}

// ensureSchedule creates a schedule or updates an existing one. A run still going when
// the next is due is not doubled (overlap: skip).
func ensureSchedule(ctx context.Context, c client.Client, id, workflowName string, args []any, every time.Duration, note string) error {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	action := &client.ScheduleWorkflowAction{
		ID:                       id,
		Workflow:                 workflowName,
		Args:                     args,
		TaskQueue:                workflows.TaskQueue,
		WorkflowExecutionTimeout: 30 * time.Minute,
	}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:                 id,
		Spec:               spec,
		Action:             action,
		Overlap:            enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		TriggerImmediately: true,
		Note:               note,
	})
	if err == nil {
		return nil
	}
	var exists *serviceerror.AlreadyExists
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) && !errors.As(err, &exists) {
		return fmt.Errorf("create schedule %s: %w", id, err)
	}
	h := c.ScheduleClient().GetHandle(ctx, id)
	return h.Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			in.Description.Schedule.Spec = &spec
			in.Description.Schedule.Action = action
			return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
		},
	})
}
