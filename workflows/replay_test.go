package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayRecordedHistories replays histories of real runs (recorded by the e2e
// package's TestRecordHistories) against the current workflow code: a change that would
// break workflows already running fails here.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories in testdata (%v)", err)
	}
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(OrderLifecycle, workflow.RegisterOptions{Name: OrderWorkflow})
	replayer.RegisterWorkflowWithOptions(PolicyDryRun, workflow.RegisterOptions{Name: PolicyDryRunWorkflow})
	replayer.RegisterWorkflowWithOptions(AuditVerification, workflow.RegisterOptions{Name: AuditVerificationWorkflow})
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay: %v", err)
			}
		})
	}
}
