package assemble

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
	"github.com/opentreasury/treasury/service"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/workflows"
)

// TemporalOrders starts and signals order workflows on a Temporal client.
type TemporalOrders struct {
	Client client.Client
}

// Submit starts workflow order-<id> (or joins it when it already runs) and waits for its
// policy decision, in one Update-with-Start call: the answer is the workflow's own decision.
func (t TemporalOrders) Submit(ctx context.Context, o *store.Order, legs []string, correlationID, submissionID string) (workflows.PolicyDecision, error) {
	// Bounded below the request timeout: with Temporal unreachable the client retries
	// until it gives up, and the caller should hear 503 before its own client does.
	ctx, cancel := context.WithTimeout(ctx, submitWait)
	defer cancel()
	start := t.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       o.WorkflowID,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.OrderDomainKey.ValueSet(o.Domain), workflows.OrderStatusKey.ValueSet(orders.StatusSubmitted),
			workflows.OrgIDKey.ValueSet(o.OrgID), workflows.CorrelationIDKey.ValueSet(correlationID)),
		// The submission rides in the memo too: an update the server admitted but lost in
		// a restart before the workflow took it leaves the start as the only trace.
		Memo:          map[string]any{"correlationId": correlationID, "orderId": o.ID, "submissionId": submissionID},
		StaticSummary: fmt.Sprintf("%s %s worth %s USD from %s", o.Domain, o.ID, o.AmountUSD.StringFixedBank(2), o.WalletID),
	}, workflows.OrderWorkflow, workflows.OrderInput{OrderID: o.ID, CorrelationID: correlationID, Legs: legs})
	h, err := t.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			// The same submission again (a retry) gets the first one's outcome.
			UpdateID:     submissionID,
			UpdateName:   workflows.UpdatePolicyDecision,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return workflows.PolicyDecision{}, fmt.Errorf("start order workflow: %w", err)
	}
	var d workflows.PolicyDecision
	if err := h.Get(ctx, &d); err != nil {
		return workflows.PolicyDecision{}, fmt.Errorf("policy decision: %w", err)
	}
	return d, nil
}

// submitWait bounds how long a submit waits for Temporal to start the workflow and decide.
const submitWait = 15 * time.Second

// SubmitOutcome reads the policy decision of an earlier submission of the order.
func (t TemporalOrders) SubmitOutcome(ctx context.Context, orderID, submissionID string) (workflows.PolicyDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, submitWait)
	defer cancel()
	h := t.Client.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{
		WorkflowID: workflows.OrderWorkflowID(orderID), UpdateID: submissionID})
	var d workflows.PolicyDecision
	err := h.Get(ctx, &d)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return t.startedBy(ctx, orderID, submissionID)
	}
	if err != nil {
		return d, fmt.Errorf("earlier submission: %w", err)
	}
	return d, nil
}

// startedBy answers for a submission whose update the server no longer knows: if the
// workflow was started by that submission, the submission went through, and the order's
// own status says where it stands (a policy refusal shows as rejected).
func (t TemporalOrders) startedBy(ctx context.Context, orderID, submissionID string) (workflows.PolicyDecision, error) {
	desc, err := t.Client.DescribeWorkflowExecution(ctx, workflows.OrderWorkflowID(orderID), "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return workflows.PolicyDecision{}, service.ErrUnknownSubmission
	}
	if err != nil {
		return workflows.PolicyDecision{}, fmt.Errorf("earlier submission: %w", err)
	}
	var started string
	if p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()["submissionId"]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &started); err != nil {
			return workflows.PolicyDecision{}, fmt.Errorf("earlier submission: %w", err)
		}
	}
	if started != submissionID {
		return workflows.PolicyDecision{}, service.ErrUnknownSubmission
	}
	return workflows.PolicyDecision{Allowed: true}, nil
}

// SignalApproval delivers a recorded approval decision.
func (t TemporalOrders) SignalApproval(ctx context.Context, orderID string, d workflows.ApprovalDecision) error {
	return t.Client.SignalWorkflow(ctx, workflows.OrderWorkflowID(orderID), "", workflows.SignalApprovalDecision, d)
}

// SignalSignature delivers a verified signature.
func (t TemporalOrders) SignalSignature(ctx context.Context, orderID string, s workflows.Signature) error {
	return t.Client.SignalWorkflow(ctx, workflows.OrderWorkflowID(orderID), "", workflows.SignalSignature, s)
}
