package workflows

import (
	"context"

	"go.temporal.io/sdk/workflow"
)

// Names of the webhook recovery and its activity.
const (
	WebhookRecoveryWorkflow = "WebhookRecovery"
	RecoveryPageActivity    = "RecoveryPage"
)

// RecoveryInput names the recovery a workflow advances.
type RecoveryInput struct {
	RecoveryID string
}

// RecoveryProgress is where a recovery stands after a page.
type RecoveryProgress struct {
	Scanned, Requeued int
	Done              bool
}

// WebhookRecoveryWorkflowID is the id of a recovery's workflow: one per recovery.
func WebhookRecoveryWorkflowID(recoveryID string) string { return "webhook-recovery-" + recoveryID }

// WebhookRecovery sends a webhook's failed and skipped messages of a window again, one
// page of messages per activity; each page and its place commit together in the store, so
// a crash of the worker resumes where it stopped and sends nothing twice.
func WebhookRecovery(ctx workflow.Context, in RecoveryInput) error {
	return runPages(ctx, WebhookRecoveryWorkflow, in, func(ctx workflow.Context) (bool, error) {
		var p RecoveryProgress
		err := workflow.ExecuteActivity(ctx, RecoveryPageActivity, in).Get(ctx, &p)
		return p.Done, err
	})
}

// StartWebhookRecovery starts the workflow of a recovery; a second start of the same one
// is no error.
func (c Client) StartWebhookRecovery(ctx context.Context, recoveryID string) error {
	return c.startOnce(ctx, WebhookRecoveryWorkflowID(recoveryID), WebhookRecoveryWorkflow, RecoveryInput{RecoveryID: recoveryID})
}
