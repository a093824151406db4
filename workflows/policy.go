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

// jobPagesPerRun bounds a background job's history: after so many pages it continues as new,
// and the next run takes up from the place the store keeps.
const jobPagesPerRun = 500

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
	return runPages(ctx, PolicyDryRunWorkflow, in, func(ctx workflow.Context) (bool, error) {
		var p DryRunProgress
		err := workflow.ExecuteActivity(ctx, DryRunPageActivity, in).Get(ctx, &p)
		return p.Done, err
	})
}

// runPages runs a background job of the store, one page per call of page (an activity
// that saves its place in the store itself), until a page says it is done, continuing as
// new every jobPagesPerRun pages to bound the history.
func runPages(ctx workflow.Context, workflowName string, in any, page func(workflow.Context) (done bool, err error)) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A page takes a few queries per row; a slow database gets time.
		StartToCloseTimeout: 5 * time.Minute,
		// The store being away is waited out; a page that cannot be done ends the job
		// failed from inside the activity.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	for range jobPagesPerRun {
		if done, err := page(ctx); err != nil || done {
			return err
		}
	}
	return workflow.NewContinueAsNewError(ctx, workflowName, in)
}

// StartPolicyDryRun starts the workflow of a dry run; a second start of the same one is
// no error.
func (c Client) StartPolicyDryRun(ctx context.Context, dryRunID string) error {
	return c.startOnce(ctx, PolicyDryRunWorkflowID(dryRunID), PolicyDryRunWorkflow, DryRunInput{DryRunID: dryRunID})
}

// startOnce starts a background job's workflow under its own id; a second start of the
// same one is no error.
func (c Client) startOnce(ctx context.Context, id, workflowName string, in any) error {
	_, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return fmt.Errorf("start %s: %w", workflowName, err)
	}
	return nil
}
