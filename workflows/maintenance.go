package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names of the housekeeping workflow, its activity and its schedule.
const (
	MaintenanceWorkflow                  = "Maintenance"
	DeleteExpiredIdempotencyKeysActivity = "DeleteExpiredIdempotencyKeys"
	MaintenanceScheduleID                = "maintenance"
)

// MaintenanceResult says what a run cleaned up.
type MaintenanceResult struct {
	IdempotencyKeysDeleted int64
}

// Maintenance removes data past its retention. A Temporal Schedule runs it hourly.
func Maintenance(ctx workflow.Context) (MaintenanceResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var res MaintenanceResult
	err := workflow.ExecuteActivity(ctx, DeleteExpiredIdempotencyKeysActivity).Get(ctx, &res.IdempotencyKeysDeleted)
	return res, err
}
