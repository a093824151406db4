package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func newPayoutEnv(run func(context.Context, PayoutRunInput) (PayoutRunResult, error)) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(PayoutRun, workflow.RegisterOptions{Name: PayoutRunWorkflow})
	env.RegisterActivityWithOptions(run, activity.RegisterOptions{Name: RunPayoutActivity})
	return env
}

// A run started by its schedule reads its nominal time from the search attribute the
// schedule sets, in whole seconds of UTC; one started with a time runs that time.
func TestAPayoutRunRunsItsNominalTime(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	nominal := time.Date(2026, 12, 1, 9, 0, 0, 250_000_000, paris)
	for name, c := range map[string]struct {
		input  PayoutRunInput
		search *time.Time
	}{
		"from its schedule": {PayoutRunInput{ScheduleID: "pys_1"}, &nominal},
		"given a time":      {PayoutRunInput{ScheduleID: "pys_1", NominalTime: nominal}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			var got PayoutRunInput
			env := newPayoutEnv(func(_ context.Context, in PayoutRunInput) (PayoutRunResult, error) {
				got = in
				return PayoutRunResult{OrderID: "ord_1", Outcome: PayoutSubmitted}, nil
			})
			if c.search != nil {
				if err := env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(scheduledStartTime.ValueSet(*c.search))); err != nil {
					t.Fatal(err)
				}
			}
			env.ExecuteWorkflow(PayoutRunWorkflow, c.input)
			var res PayoutRunResult
			if err := env.GetWorkflowResult(&res); err != nil || res.OrderID != "ord_1" {
				t.Fatalf("result %+v, %v", res, err)
			}
			want := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
			if got.ScheduleID != "pys_1" || !got.NominalTime.Equal(want) || got.NominalTime.Location() != time.UTC {
				t.Fatalf("the activity ran %+v, want pys_1 at %s", got, want)
			}
		})
	}
}

// A run that knows no nominal time of its own pays nothing: any other time could key a
// second payment of one run.
func TestAPayoutRunWithoutItsTimeFails(t *testing.T) {
	ran := false
	env := newPayoutEnv(func(context.Context, PayoutRunInput) (PayoutRunResult, error) {
		ran = true
		return PayoutRunResult{}, nil
	})
	env.ExecuteWorkflow(PayoutRunWorkflow, PayoutRunInput{ScheduleID: "pys_1"})
	if err := env.GetWorkflowError(); err == nil || ran {
		t.Fatalf("a run without its time: error %v, the activity ran %v", err, ran)
	}
}
