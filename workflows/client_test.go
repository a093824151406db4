package workflows

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// startingClient answers ExecuteWorkflow with err; nothing else of client.Client is asked.
type startingClient struct {
	client.Client
	err error
}

func (c startingClient) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	return nil, c.err
}

// A start that finds the order's workflow already run and closed (its id is never reused)
// has nothing left to do, and says so: the queue forgets it. Any other refusal is
// ErrNotStarted, which leaves the start queued.
func TestAStartOfAClosedWorkflowIsDone(t *testing.T) {
	s := Submission{OrderID: "ord_1", OrgID: "org_1", Domain: "payment", Legs: []string{"TRANSFER"}}
	closed := serviceerror.NewWorkflowExecutionAlreadyStarted("workflow execution already finished", "", "run_1")
	if err := (Client{Temporal: startingClient{err: closed}}).Start(context.Background(), s); err != nil {
		t.Fatalf("a closed workflow: %v, want done", err)
	}
	down := serviceerror.NewUnavailable("frontend gone")
	if err := (Client{Temporal: startingClient{err: down}}).Start(context.Background(), s); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Temporal down: %v, want ErrNotStarted", err)
	}
	if _, err := (Client{Temporal: startingClient{err: down}}).Submit(context.Background(), s); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("a submit Temporal does not start: %v, want ErrNotStarted", err)
	}
}
