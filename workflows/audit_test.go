package workflows

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func newAuditEnv(page func(context.Context, AuditVerificationInput) (AuditVerificationProgress, error)) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(AuditVerification, workflow.RegisterOptions{Name: AuditVerificationWorkflow})
	env.RegisterActivityWithOptions(page, activity.RegisterOptions{Name: VerifyAuditPageActivity})
	return env
}

// A verification runs its pages until one says it is done; a page that fails is retried
// (the store keeps the place, so the retry goes on from it).
func TestAnAuditVerificationRunsPagesUntilDone(t *testing.T) {
	calls, failed := 0, false
	env := newAuditEnv(func(_ context.Context, in AuditVerificationInput) (AuditVerificationProgress, error) {
		if in.VerificationID != "avf_1" {
			return AuditVerificationProgress{}, errors.New("another verification")
		}
		if calls == 2 && !failed {
			failed = true
			return AuditVerificationProgress{}, errors.New("database unavailable")
		}
		calls++
		return AuditVerificationProgress{Checked: int64(calls * 10), Entries: int64(calls * 10), Done: calls == 4}, nil
	})
	env.ExecuteWorkflow(AuditVerificationWorkflow, AuditVerificationInput{VerificationID: "avf_1"})
	if err := env.GetWorkflowError(); err != nil || !env.IsWorkflowCompleted() || calls != 4 || !failed {
		t.Fatalf("completed %v, error %v, %d pages, failed once %v", env.IsWorkflowCompleted(), err, calls, failed)
	}
}

// A long chain continues as new, the same verification, so that its history stays short.
func TestALongAuditVerificationContinuesAsNew(t *testing.T) {
	calls := 0
	env := newAuditEnv(func(context.Context, AuditVerificationInput) (AuditVerificationProgress, error) {
		calls++
		return AuditVerificationProgress{Checked: int64(calls)}, nil
	})
	env.ExecuteWorkflow(AuditVerificationWorkflow, AuditVerificationInput{VerificationID: "avf_1"})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) || calls != jobPagesPerRun {
		t.Fatalf("want continue-as-new after %d pages, got %v after %d", jobPagesPerRun, err, calls)
	}
	var next AuditVerificationInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil || next.VerificationID != "avf_1" {
		t.Fatalf("continued with %+v %v", next, err)
	}
}
