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
	DeleteExpiredEventsActivity          = "DeleteExpiredEvents"
	DeleteExpiredOAuthTokensActivity     = "DeleteExpiredOAuthTokens"
	DeleteExpiredRequestLogsActivity     = "DeleteExpiredRequestLogs"
	DeleteExpiredSessionsActivity        = "DeleteExpiredSessions"
	MaintenanceScheduleID                = "maintenance"
)

// MaintenanceResult says what a run cleaned up.
type MaintenanceResult struct {
	IdempotencyKeysDeleted int64
	EventsDeleted          int64
	OAuthTokensDeleted     int64
	RequestLogsDeleted     int64
	SessionsDeleted        int64
}

// requestLogRetentionChange marks the version of Maintenance that also removes old request
// logs; runs recorded before it replay without that step.
const requestLogRetentionChange = "request-log-retention"

// sessionRetentionChange marks the version that also removes expired console sessions.
const sessionRetentionChange = "session-retention"

// Maintenance removes data past its retention. A Temporal Schedule runs it hourly.
func Maintenance(ctx workflow.Context) (MaintenanceResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var res MaintenanceResult
	if err := workflow.ExecuteActivity(ctx, DeleteExpiredIdempotencyKeysActivity).Get(ctx, &res.IdempotencyKeysDeleted); err != nil {
		return res, err
	}
	if err := workflow.ExecuteActivity(ctx, DeleteExpiredEventsActivity).Get(ctx, &res.EventsDeleted); err != nil {
		return res, err
	}
	if err := workflow.ExecuteActivity(ctx, DeleteExpiredOAuthTokensActivity).Get(ctx, &res.OAuthTokensDeleted); err != nil {
		return res, err
	}
	if workflow.GetVersion(ctx, requestLogRetentionChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res, nil
	}
	if err := workflow.ExecuteActivity(ctx, DeleteExpiredRequestLogsActivity).Get(ctx, &res.RequestLogsDeleted); err != nil {
		return res, err
	}
	if workflow.GetVersion(ctx, sessionRetentionChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res, nil
	}
	err := workflow.ExecuteActivity(ctx, DeleteExpiredSessionsActivity).Get(ctx, &res.SessionsDeleted)
	return res, err
}
