package workflows

import (
	"context"

	"go.temporal.io/sdk/workflow"
)

// Names of the background verification of an audit chain and its activity.
const (
	AuditVerificationWorkflow = "AuditVerification"
	VerifyAuditPageActivity   = "VerifyAuditPage"
)

// AuditVerificationInput names the verification a workflow advances.
type AuditVerificationInput struct {
	VerificationID string
}

// AuditVerificationProgress is where a verification stands after a page.
type AuditVerificationProgress struct {
	Checked, Entries int64
	Done             bool
}

// AuditVerificationWorkflowID is the id of a verification's workflow: one per verification.
func AuditVerificationWorkflowID(id string) string { return "audit-verification-" + id }

// AuditVerification checks an organisation's stored audit chain one page per activity,
// from its first entry to the head read when it started. Each page saves its place with
// what it found, so a run picks up where it stopped after a crash of the worker.
func AuditVerification(ctx workflow.Context, in AuditVerificationInput) error {
	return runPages(ctx, AuditVerificationWorkflow, in, func(ctx workflow.Context) (bool, error) {
		var p AuditVerificationProgress
		err := workflow.ExecuteActivity(ctx, VerifyAuditPageActivity, in).Get(ctx, &p)
		return p.Done, err
	})
}

// StartAuditVerification starts the workflow of a verification; a second start of the
// same one is no error.
func (c Client) StartAuditVerification(ctx context.Context, id string) error {
	return c.startOnce(ctx, AuditVerificationWorkflowID(id), AuditVerificationWorkflow, AuditVerificationInput{VerificationID: id})
}
