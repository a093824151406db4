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

	"github.com/opentreasury/treasury/orders"
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

// Client starts, updates, signals and queries order workflows on a Temporal client: the
// other side of the messages OrderLifecycle takes.
type Client struct {
	Temporal client.Client
}

// submitWait bounds how long a submit waits for Temporal to start the workflow and decide.
const submitWait = 15 * time.Second

// Submit starts workflow order-<id> (or joins it when it already runs) and waits for its
// policy decision, in one Update-with-Start call: the answer is the workflow's own decision.
func (c Client) Submit(ctx context.Context, s Submission) (PolicyDecision, error) {
	// Bounded below the request timeout: with Temporal unreachable the client retries
	// until it gives up, and the caller should hear 503 before its own client does.
	ctx, cancel := context.WithTimeout(ctx, submitWait)
	defer cancel()
	start := c.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       OrderWorkflowID(s.OrderID),
		TaskQueue:                TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			OrderDomainKey.ValueSet(s.Domain), OrderStatusKey.ValueSet(string(orders.StatusSubmitted)),
			OrgIDKey.ValueSet(s.OrgID), CorrelationIDKey.ValueSet(s.CorrelationID)),
		// The submission rides in the memo too: an update the server admitted but lost in
		// a restart before the workflow took it leaves the start as the only trace.
		Memo:          map[string]any{"correlationId": s.CorrelationID, "orderId": s.OrderID, "submissionId": s.SubmissionID},
		StaticSummary: fmt.Sprintf("%s %s worth %s USD from %s", s.Domain, s.OrderID, s.AmountUSD, s.WalletID),
	}, OrderWorkflow, OrderInput{OrderID: s.OrderID, CorrelationID: s.CorrelationID, Legs: s.Legs})
	h, err := c.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			// The same submission again (a retry) gets the first one's outcome.
			UpdateID:     s.SubmissionID,
			UpdateName:   UpdatePolicyDecision,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return PolicyDecision{}, fmt.Errorf("start order workflow: %w", err)
	}
	var d PolicyDecision
	if err := h.Get(ctx, &d); err != nil {
		return PolicyDecision{}, fmt.Errorf("policy decision: %w", err)
	}
	return d, nil
}

// SubmitOutcome reads the policy decision of an earlier submission of the order.
func (c Client) SubmitOutcome(ctx context.Context, orderID, submissionID string) (PolicyDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, submitWait)
	defer cancel()
	h := c.Temporal.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{
		WorkflowID: OrderWorkflowID(orderID), UpdateID: submissionID})
	var d PolicyDecision
	err := h.Get(ctx, &d)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return c.startedBy(ctx, orderID, submissionID)
	}
	if err != nil {
		return d, fmt.Errorf("earlier submission: %w", err)
	}
	return d, nil
}

// startedBy answers for a submission whose update the server no longer knows: if the
// workflow was started by that submission, the submission went through, and the order's
// own status says where it stands (a policy refusal shows as rejected).
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
	return PolicyDecision{Allowed: true}, nil
}

// SignalApproval delivers a recorded approval decision.
func (c Client) SignalApproval(ctx context.Context, orderID string, d ApprovalDecision) error {
	return c.Temporal.SignalWorkflow(ctx, OrderWorkflowID(orderID), "", SignalApprovalDecision, d)
}

// SignalSignature delivers a verified signature.
func (c Client) SignalSignature(ctx context.Context, orderID string, s Signature) error {
	return c.Temporal.SignalWorkflow(ctx, OrderWorkflowID(orderID), "", SignalSignature, s)
}
