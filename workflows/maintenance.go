package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names of the housekeeping workflow, its activities and its schedule.
const (
	MaintenanceWorkflow                    = "Maintenance"
	DeleteExpiredIdempotencyKeysActivity   = "DeleteExpiredIdempotencyKeys"
	DeleteExpiredEventsActivity            = "DeleteExpiredEvents"
	DeleteExpiredOAuthTokensActivity       = "DeleteExpiredOAuthTokens"
	DeleteExpiredRequestLogsActivity       = "DeleteExpiredRequestLogs"
	DeleteExpiredSessionsActivity          = "DeleteExpiredSessions"
	DeleteExpiredWebhookDeliveriesActivity = "DeleteExpiredWebhookDeliveries"
	MaintenanceScheduleID                  = "maintenance"
)

// MaintenanceResult says what a run cleaned up.
type MaintenanceResult struct {
	IdempotencyKeysDeleted int64
	EventsDeleted          int64
	OAuthTokensDeleted     int64
	RequestLogsDeleted     int64
	SessionsDeleted        int64
	// WebhookDeliveriesDeleted counts deliveries; their attempts went with them.
	WebhookDeliveriesDeleted int64
}

// requestLogRetentionChange marks the version of Maintenance that also removes old request
// logs; runs recorded before it replay without that step.
const requestLogRetentionChange = "request-log-retention"

// sessionRetentionChange marks the version that also removes expired console sessions.
const sessionRetentionChange = "session-retention"

// webhookRetentionChange marks the version that also removes webhook deliveries that
// ended longer ago than their retention.
const webhookRetentionChange = "webhook-retention"

// Maintenance removes data past its retention. A Temporal Schedule runs it hourly.
// Each activity deletes in batches and heartbeats after each one, so a worker that dies
// mid-delete is noticed within the heartbeat timeout rather than the activity's.
func Maintenance(ctx workflow.Context) (MaintenanceResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    time.Minute,
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
	if err := workflow.ExecuteActivity(ctx, DeleteExpiredSessionsActivity).Get(ctx, &res.SessionsDeleted); err != nil {
		return res, err
	}
	if workflow.GetVersion(ctx, webhookRetentionChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res, nil
	}
	err := workflow.ExecuteActivity(ctx, DeleteExpiredWebhookDeliveriesActivity).Get(ctx, &res.WebhookDeliveriesDeleted)
	return res, err
}
