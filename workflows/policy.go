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

// Names of the policy dry run against history and its activity.
const (
	PolicyDryRunWorkflow = "PolicyDryRun"
	DryRunPageActivity   = "DryRunPage"
)

// dryRunPagesPerRun bounds a run's history: after so many pages it continues as new, and
// the next run takes up from the place the store keeps.
const dryRunPagesPerRun = 500

// DryRunInput names the dry run a workflow advances.
type DryRunInput struct {
	DryRunID string
}

// DryRunProgress is where a dry run stands after a page.
type DryRunProgress struct {
	Evaluated, Total int
	Done             bool
}

// PolicyDryRunWorkflowID is the id of a dry run's workflow: one per dry run.
func PolicyDryRunWorkflowID(dryRunID string) string { return "policy-dry-run-" + dryRunID }

// PolicyDryRun evaluates a draft against an app's past orders, one page per activity. Each
// page and its place are saved together in the store, so a run picks up where it stopped
// after a crash of the worker, and a retried page is never counted twice.
func PolicyDryRun(ctx workflow.Context, in DryRunInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A page of 200 orders takes a few queries each; a slow database gets time.
		StartToCloseTimeout: 5 * time.Minute,
		// The store being away is waited out; a page that cannot be evaluated ends the run
		// failed from inside the activity.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	for range dryRunPagesPerRun {
		var p DryRunProgress
		if err := workflow.ExecuteActivity(ctx, DryRunPageActivity, in).Get(ctx, &p); err != nil {
			return err
		}
		if p.Done {
			return nil
		}
	}
	return workflow.NewContinueAsNewError(ctx, PolicyDryRunWorkflow, in)
}

// StartPolicyDryRun starts the workflow of a dry run; a second start of the same one is
// no error.
func (c Client) StartPolicyDryRun(ctx context.Context, dryRunID string) error {
	_, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    PolicyDryRunWorkflowID(dryRunID),
		TaskQueue:             TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, PolicyDryRunWorkflow, DryRunInput{DryRunID: dryRunID})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return fmt.Errorf("start policy dry run: %w", err)
	}
	return nil
}
