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
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/workflows"
)

// Activities bundles every activity implementation the worker serves. Each is registered
// as a struct: every exported method is an activity named after the method, the name the
// workflows call it by (a step's orders.Step.Activity, or a workflows.*Activity).
type Activities struct {
	Portfolio   *activities.Portfolio
	Maintenance *activities.Maintenance
	Orders      *activities.Orders
	Policies    *activities.Policies
	Webhooks    *activities.WebhookRecoveries
	Prices      *activities.Prices
	Audit       *activities.Audit
	Payouts     *activities.Payouts
}

// structs lists what New registers; the test holds it to the workflows' activity names.
func (a Activities) structs() []any {
	return []any{a.Portfolio, a.Maintenance, a.Orders, a.Policies, a.Webhooks, a.Prices, a.Audit, a.Payouts}
}

// New builds a worker on the treasury task queue with every workflow and activity registered.
func New(c client.Client, acts Activities, opts sdkworker.Options) sdkworker.Worker {
	w := sdkworker.New(c, workflows.TaskQueue, opts)
	w.RegisterWorkflowWithOptions(workflows.PortfolioSync, workflow.RegisterOptions{Name: workflows.PortfolioSyncWorkflow})
	w.RegisterWorkflowWithOptions(workflows.WalletSync, workflow.RegisterOptions{Name: workflows.WalletSyncWorkflow})
	w.RegisterWorkflowWithOptions(workflows.Maintenance, workflow.RegisterOptions{Name: workflows.MaintenanceWorkflow})
	w.RegisterWorkflowWithOptions(workflows.OrderLifecycle, workflow.RegisterOptions{Name: workflows.OrderWorkflow})
	w.RegisterWorkflowWithOptions(workflows.PolicyDryRun, workflow.RegisterOptions{Name: workflows.PolicyDryRunWorkflow})
	w.RegisterWorkflowWithOptions(workflows.WebhookRecovery, workflow.RegisterOptions{Name: workflows.WebhookRecoveryWorkflow})
	w.RegisterWorkflowWithOptions(workflows.PriceRefresh, workflow.RegisterOptions{Name: workflows.PriceRefreshWorkflow})
	w.RegisterWorkflowWithOptions(workflows.AuditVerification, workflow.RegisterOptions{Name: workflows.AuditVerificationWorkflow})
	w.RegisterWorkflowWithOptions(workflows.PayoutRun, workflow.RegisterOptions{Name: workflows.PayoutRunWorkflow})
	for _, s := range acts.structs() {
		w.RegisterActivity(s)
	}
	return w
}

// EnsureSchedules creates the Temporal Schedules the service relies on, or moves existing
// ones to the configured intervals: the balance sync, the price refresh and the hourly
// maintenance.
func EnsureSchedules(ctx context.Context, c client.Client, balanceSyncInterval, priceRefreshInterval time.Duration) error {
	if err := ensureSchedule(ctx, c, workflows.PortfolioSyncScheduleID, workflows.PortfolioSyncWorkflow,
		[]any{workflows.PortfolioSyncInput{}}, balanceSyncInterval, "Refreshes wallet balances from the chain adapter."); err != nil {
		return err
	}
	if err := ensureSchedule(ctx, c, workflows.PriceRefreshScheduleID, workflows.PriceRefreshWorkflow,
		nil, priceRefreshInterval, "Reads each asset's USD price from its source (a Chainlink feed, or a fixed price)."); err != nil {
		return err
	}
	return ensureSchedule(ctx, c, workflows.MaintenanceScheduleID, workflows.MaintenanceWorkflow,
		nil, time.Hour, "Deletes data past its retention (events, webhook deliveries, request logs, idempotency records, OAuth tokens, sessions), in batches.")
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
