package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/opentreasury/treasury/internal/orders"
)

// Submission is a draft order handed to its workflow: what the start needs to name the
// workflow in the Temporal UI and to answer a retry of the same submission.
type Submission struct {
	OrderID, OrgID, WalletID string
	Domain                   string
	// AmountUSD is the order's worth as shown in the workflow's summary (two decimals).
	AmountUSD string
	Legs      []string
	// CorrelationID follows the order into every event; SubmissionID ("" for none) makes
	// a repeat of the same submission return the first one's outcome.
	CorrelationID, SubmissionID string
}

// ErrUnknownSubmission: no submission of that id reached the order's workflow.
var ErrUnknownSubmission = errors.New("workflows: no such submission of the order")

// ErrDecisionPending: the order's workflow is durably started, and its policy did not
// decide within the wait. The decision comes later: a refusal as Order.Rejected.
var ErrDecisionPending = errors.New("workflows: the policy has not decided yet")

// Client starts, updates, signals and queries order workflows on a Temporal client: the
// other side of the messages OrderLifecycle takes.
type Client struct {
	Temporal client.Client
	// DecisionWait bounds how long a submit waits for the policy decision once the
	// workflow is durably started (DefaultDecisionWait when zero). Past it the submission
	// stands, and the caller hears ErrDecisionPending rather than waiting behind a queue of
	// workflows.
	DecisionWait time.Duration
}

// DefaultDecisionWait is Client.DecisionWait's default.
const DefaultDecisionWait = 2 * time.Second

func (c Client) decisionWait() time.Duration {
	if c.DecisionWait > 0 {
		return c.DecisionWait
	}
	return DefaultDecisionWait
}

// Start starts workflow order-<id> (or finds it started). It does not wait for the
// workflow to run.
func (c Client) Start(ctx context.Context, s Submission) error {
	_, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       OrderWorkflowID(s.OrderID),
		TaskQueue:                TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			OrderDomainKey.ValueSet(s.Domain), OrderStatusKey.ValueSet(string(orders.StatusSubmitted)),
			OrgIDKey.ValueSet(s.OrgID), CorrelationIDKey.ValueSet(s.CorrelationID)),
		// The submission rides in the memo: a retry of it finds the workflow it started
		// even when the update that asked for the decision never reached the workflow.
		Memo:          map[string]any{"correlationId": s.CorrelationID, "orderId": s.OrderID, "submissionId": s.SubmissionID},
		StaticSummary: fmt.Sprintf("%s %s worth %s USD from %s", s.Domain, s.OrderID, s.AmountUSD, s.WalletID),
	}, OrderWorkflow, OrderInput{OrderID: s.OrderID, CorrelationID: s.CorrelationID, Legs: s.Legs})
	var closed *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &closed):
		// The order's workflow has run and closed (its id is never reused): there is
		// nothing left to start.
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", ErrNotStarted, err)
	}
	return nil
}

// ErrNotStarted: the order's workflow could not be started (in time): Temporal did not
// answer, or refused.
var ErrNotStarted = errors.New("workflows: the order's workflow was not started")

// StartWait bounds how long a submit waits for Temporal to start the workflow: past it the
// start is left to a worker (ErrNotStarted).
const StartWait = 5 * time.Second

// Submit starts workflow order-<id> (or joins it when it already runs), within StartWait,
// then waits for its policy decision, through the workflow's own update, at most
// DecisionWait: the answer is the workflow's decision, ErrDecisionPending once the
// workflow is started and the decision has not come, or ErrNotStarted when the start
// itself did not happen in time. A burst of submits queued behind busy workers is thus
// answered within a bounded time, never timed out.
func (c Client) Submit(ctx context.Context, s Submission) (PolicyDecision, error) {
	startCtx, cancelStart := context.WithTimeout(ctx, StartWait)
	err := c.Start(startCtx, s)
	cancelStart()
	if err != nil {
		return PolicyDecision{}, err
	}
	wait, cancel := context.WithTimeout(ctx, c.decisionWait())
	defer cancel()
	d, err := c.decision(ctx, wait, func(ctx context.Context) (client.WorkflowUpdateHandle, error) {
		return c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: OrderWorkflowID(s.OrderID),
			// The same submission again (a retry) gets the first one's outcome.
			UpdateID:     s.SubmissionID,
			UpdateName:   UpdatePolicyDecision,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
	})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		// The workflow closed before it took the update (a policy refusal ends it in its
		// first task): its result holds the decision.
		return c.closedDecision(ctx, wait, s.OrderID)
	}
	return d, err
}

// SubmitOutcome reads the policy decision of an earlier submission of the order, waiting
// for it at most DecisionWait (ErrDecisionPending past it).
func (c Client) SubmitOutcome(ctx context.Context, orderID, submissionID string) (PolicyDecision, error) {
	wait, cancel := context.WithTimeout(ctx, c.decisionWait())
	defer cancel()
	d, err := c.decision(ctx, wait, func(context.Context) (client.WorkflowUpdateHandle, error) {
		return c.Temporal.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{
			WorkflowID: OrderWorkflowID(orderID), UpdateID: submissionID}), nil
	})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return c.startedBy(ctx, orderID, submissionID)
	}
	if err != nil && !errors.Is(err, ErrDecisionPending) {
		return d, fmt.Errorf("earlier submission: %w", err)
	}
	return d, err
}

// decision waits, until wait (a context of ctx) ends, for the answer of the
// policy-decision update that update sends or finds. An update the server does not know,
// or that its workflow closed before taking, is a serviceerror.NotFound for the caller.
func (c Client) decision(ctx, wait context.Context, update func(context.Context) (client.WorkflowUpdateHandle, error)) (PolicyDecision, error) {
	var d PolicyDecision
	h, err := update(wait)
	if err == nil {
		err = h.Get(wait, &d)
	}
	var timedOut *client.WorkflowUpdateServiceTimeoutOrCanceledError
	switch {
	case err == nil:
		return d, nil
	case ctx.Err() == nil && (wait.Err() != nil || errors.As(err, &timedOut)):
		// The wait is over (the SDK gives up its poll a little before the deadline, on
		// the deadline of its own call): the decision is still to come.
		return PolicyDecision{}, ErrDecisionPending
	}
	return PolicyDecision{}, fmt.Errorf("policy decision: %w", err)
}

// closedDecision is the policy decision of the order's workflow as it stands: in its
// result once it has closed, in its state query while it runs, or ErrDecisionPending while
// it has not decided (or wait ends first).
func (c Client) closedDecision(ctx, wait context.Context, orderID string) (PolicyDecision, error) {
	desc, err := c.Temporal.DescribeWorkflowExecution(wait, OrderWorkflowID(orderID), "")
	switch {
	case err != nil && wait.Err() != nil && ctx.Err() == nil:
		return PolicyDecision{}, ErrDecisionPending
	case err != nil:
		return PolicyDecision{}, fmt.Errorf("policy decision: %w", err)
	case desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		// A worker answers the query; a busy one, not in time: pending then.
		var st OrderState
		if v, err := c.Temporal.QueryWorkflow(wait, OrderWorkflowID(orderID), "", QueryState); err == nil && v.Get(&st) == nil && st.Decision != nil {
			return *st.Decision, nil
		}
		return PolicyDecision{}, ErrDecisionPending
	}
	var st OrderState
	if err := c.Temporal.GetWorkflow(ctx, OrderWorkflowID(orderID), "").Get(ctx, &st); err != nil {
		return PolicyDecision{}, fmt.Errorf("policy decision of a closed workflow: %w", err)
	}
	if st.Decision == nil {
		return PolicyDecision{}, temporal.NewApplicationError("the order ended before its policy was decided", "NotDecided")
	}
	return *st.Decision, nil
}

// startedBy answers for a submission whose update the server no longer knows: if the
// workflow was started by that submission, the submission went through, and its decision
// is the workflow's (or still to come).
func (c Client) startedBy(ctx context.Context, orderID, submissionID string) (PolicyDecision, error) {
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, OrderWorkflowID(orderID), "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return PolicyDecision{}, ErrUnknownSubmission
	}
	if err != nil {
		return PolicyDecision{}, fmt.Errorf("earlier submission: %w", err)
	}
	var started string
	if p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()["submissionId"]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &started); err != nil {
			return PolicyDecision{}, fmt.Errorf("earlier submission: %w", err)
		}
	}
	if started != submissionID {
		return PolicyDecision{}, ErrUnknownSubmission
	}
	wait, cancel := context.WithTimeout(ctx, c.decisionWait())
	defer cancel()
	return c.closedDecision(ctx, wait, orderID)
}

// SignalApproval delivers a recorded approval decision.
func (c Client) SignalApproval(ctx context.Context, orderID string, d ApprovalDecision) error {
	return c.Temporal.SignalWorkflow(ctx, OrderWorkflowID(orderID), "", SignalApprovalDecision, d)
}

// SignalRefusal delivers a signer's refusal of a signing request.
func (c Client) SignalRefusal(ctx context.Context, orderID string, f Refusal) error {
	return c.Temporal.SignalWorkflow(ctx, OrderWorkflowID(orderID), "", SignalRefusal, f)
}

// SignalSignature delivers a verified signature.
func (c Client) SignalSignature(ctx context.Context, orderID string, s Signature) error {
	return c.Temporal.SignalWorkflow(ctx, OrderWorkflowID(orderID), "", SignalSignature, s)
}
