package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
)

// The order workflow, its message names and its activities.
const (
	OrderWorkflow = "OrderLifecycle"

	SignalApprovalDecision = "approval-decision"
	SignalSignature        = "signature"
	SignalRefusal          = "signer-refusal"
	QueryState             = "state"
	// UpdatePolicyDecision answers once the policy has decided: submit waits on it, so
	// the HTTP answer reports the workflow's own decision.
	UpdatePolicyDecision = "policy-decision"

	// The activities that read without applying a step; each step names its own
	// (orders.Step.Activity).
	ApprovalOutcomeActivity = "ApprovalOutcome"
	CheckLegActivity        = "CheckLeg"
)

// OrderInput starts an order's workflow.
type OrderInput struct {
	OrderID       string
	CorrelationID string
	// Legs are the order's legs, in order.
	Legs            []string
	ApprovalTimeout time.Duration
	SigningTimeout  time.Duration
	// ConfirmTimeout bounds how long a broadcast leg may stay pending on its chain.
	ConfirmTimeout time.Duration
}

// PolicyDecision is the policy's answer on a submitted order.
type PolicyDecision struct {
	Allowed          bool
	Violations       []policy.Violation
	ApprovalRequired bool
	Quorum           int
	// PolicyVersion is the version of the app's policy that decided: the one in force
	// when the order was submitted (0 when the app had none).
	PolicyVersion int
}

// Record is the decision as its order keeps it (store.Order.PolicyDecision).
func (d PolicyDecision) Record() (string, error) {
	encoded, err := json.Marshal(d)
	return string(encoded), err
}

// RecordedDecision reads the decision an order keeps.
func RecordedDecision(record string) (PolicyDecision, error) {
	var d PolicyDecision
	err := json.Unmarshal([]byte(record), &d)
	return d, err
}

// ApprovalDecision reaches the workflow as a signal once the API has recorded it. The
// store decides the item; Outcome is its status after this decision.
type ApprovalDecision struct {
	ItemID string
	// DecidedBy is the credential that decided, DecidedByUser the person behind it ("" for
	// none): the approver is the person, or the credential when no person is.
	DecidedBy     string
	DecidedByUser string
	Decision      string // APPROVE or REJECT
	Outcome       string // pending, approved or rejected
	CorrelationID string
}

// ApprovalOutcome is an approval item's state as the store holds it.
type ApprovalOutcome struct {
	Status                     string // pending, approved, rejected
	RejectedBy, RejectedByUser string
	CorrelationID              string
}

// Signature reaches the workflow as a signal once the API has verified it.
type Signature struct {
	SigningRequestID string
	Signature        string // base64 of the signature over the digest, in the wallet's scheme
	CorrelationID    string
}

// Refusal reaches the workflow as a signal once the API has recorded that the signer
// refused a signing request: the check that failed (Reason) and what it saw (Detail).
type Refusal struct {
	SigningRequestID string
	Reason, Detail   string
	CorrelationID    string
}

// StepInput identifies an order step to an activity.
type StepInput struct {
	OrderID       string
	CorrelationID string
}

// ApprovalRequest asks for an approval item.
type ApprovalRequest struct {
	OrderID       string
	CorrelationID string
	Quorum        int
	ExpiresAt     time.Time
}

// RejectInput ends an order rejected.
type RejectInput struct {
	OrderID       string
	CorrelationID string
	Reason        string // policy, approver, expired
	ItemID        string
	Violations    []policy.Violation
	// DecidedBy and DecidedByUser are the credential that rejected and the person behind it.
	DecidedBy, DecidedByUser string
}

// LegInput identifies one leg of an order.
type LegInput struct {
	OrderID          string
	CorrelationID    string
	Position         int
	Leg              string
	Last             bool
	ExpiresAt        time.Time
	SigningRequestID string
	Signature        string
	// TxHash is the leg's transaction: the stuck or lapsed one a replacement replaces (RequestSignature,
	// RecordSignature, BroadcastLeg with Attempt), or the one that confirmed (ConfirmLeg).
	TxHash string
	// Attempt numbers a replacement of the leg's stuck or lapsed transaction (from 1); 0 is the
	// leg's first transaction.
	Attempt int
	// SentAt is when the leg's latest transaction was broadcast (CheckLeg).
	SentAt time.Time
	// Rebuilds tells CheckLeg that the workflow builds a lapsed transaction again, so that
	// it reports a lapse; a history from before that change would only ask again.
	Rebuilds bool
}

// SigningRequestRef is a created signing request.
type SigningRequestRef struct {
	ID     string
	Digest string
}

// LegStatus is a broadcast leg's chain state: pending, confirmed or failed.
type LegStatus struct {
	State  chain.TxState
	Reason string
	// TxHash is the leg's transaction that is final (confirmed or failed).
	TxHash string
	// Underpriced, for a pending leg, says that its latest transaction has stayed below the
	// fee market (or out of the node) long enough to be replaced.
	Underpriced bool
	// Lapsed, for a pending leg, says that its latest transaction can never land: its life
	// on the chain (a Solana blockhash) ended first. It is built again and signed again.
	Lapsed bool
	// Expected is when the chain expects the leg final, if it can tell.
	Expected time.Time
}

// FailInput ends an order failed.
type FailInput struct {
	OrderID          string
	CorrelationID    string
	Code             orders.FailureCode
	Message          string
	Position         int
	Leg              string
	SigningRequestID string
	// Reason is the check a refusing signer names (signer_refused only).
	Reason string
}

// OrderState is what the state query answers.
type OrderState struct {
	Status    orders.Status
	Decision  *PolicyDecision
	ItemID    string
	Approvals []ApprovalDecision
	Leg       int
	Requests  []string
}

// LegWait is how long one CheckLeg activity waits for a transaction to be final before it
// reports it still pending.
const LegWait = 20 * time.Second

// Timeouts when the input leaves them unset.
const (
	DefaultApprovalTimeout = 72 * time.Hour
	DefaultSigningTimeout  = 24 * time.Hour
	DefaultConfirmTimeout  = time.Hour
)

type orderRun struct {
	in        OrderInput
	state     OrderState
	decided   bool
	approvers map[string]bool
	// outcome is the item's status as the latest signal reported it.
	outcome                    string
	rejectedBy, rejectedByUser string
	// The correlation ids of the requests that decided: events they cause carry them.
	approvedIn, rejectedIn string
	finished               bool
	signatures             map[string]Signature
	refusals               map[string]Refusal
}

// OrderLifecycle runs one submitted order: policy, approval when a tier requires it, then
// each leg signed, broadcast and confirmed. Every change of state is an activity that
// writes the order and its event in one transaction, keyed by step, so retries never emit
// twice. Decisions and signatures arrive as signals; waits are durable timers.
func OrderLifecycle(ctx workflow.Context, in OrderInput) (OrderState, error) {
	r := &orderRun{in: in, state: OrderState{Status: orders.StatusSubmitted}, approvers: map[string]bool{},
		signatures: map[string]Signature{}, refusals: map[string]Refusal{}}
	if err := r.setup(ctx); err != nil {
		return r.state, err
	}
	err := r.run(ctx)
	r.finished = true
	// Let a policy-decision update still in flight answer before the workflow closes.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return r.state, err
}

func (r *orderRun) setup(ctx workflow.Context) error {
	if r.in.ApprovalTimeout <= 0 {
		r.in.ApprovalTimeout = DefaultApprovalTimeout
	}
	if r.in.SigningTimeout <= 0 {
		r.in.SigningTimeout = DefaultSigningTimeout
	}
	if r.in.ConfirmTimeout <= 0 {
		r.in.ConfirmTimeout = DefaultConfirmTimeout
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (OrderState, error) { return r.state, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, UpdatePolicyDecision, func(ctx workflow.Context) (PolicyDecision, error) {
		// A refusal is answered once the order's rejection is stored, so that the 422 and
		// a GET right after it agree.
		if err := workflow.Await(ctx, func() bool {
			return r.finished || (r.decided && (r.state.Decision.Allowed || r.state.Status == orders.StatusRejected))
		}); err != nil {
			return PolicyDecision{}, err
		}
		if !r.decided {
			return PolicyDecision{}, temporal.NewApplicationError("the order ended before its policy was decided", "NotDecided")
		}
		return *r.state.Decision, nil
	}); err != nil {
		return err
	}
	decisions := workflow.GetSignalChannel(ctx, SignalApprovalDecision)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var d ApprovalDecision
			decisions.Receive(ctx, &d)
			r.onDecision(d)
		}
	})
	firstOfEach(ctx, SignalSignature, r.signatures, func(s Signature) string { return s.SigningRequestID })
	firstOfEach(ctx, SignalRefusal, r.refusals, func(f Refusal) string { return f.SigningRequestID })
	return nil
}

// firstOfEach keeps, in into, the first message of each id that arrives on a signal
// channel: a repeated signal changes nothing.
func firstOfEach[T any](ctx workflow.Context, name string, into map[string]T, id func(T) string) {
	ch := workflow.GetSignalChannel(ctx, name)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var m T
			ch.Receive(ctx, &m)
			if _, seen := into[id(m)]; !seen {
				into[id(m)] = m
			}
		}
	})
}

// awaitSignature waits up to wait for the signing request's signature or its refusal,
// whichever comes first; neither is a timeout.
func (r *orderRun) awaitSignature(ctx workflow.Context, requestID string, wait time.Duration) (refused *Refusal, signed bool, err error) {
	answered, err := workflow.AwaitWithTimeout(ctx, wait, func() bool {
		_, sig := r.signatures[requestID]
		_, ref := r.refusals[requestID]
		return sig || ref
	})
	if err != nil || !answered {
		return nil, false, err
	}
	// A signature that arrived first wins: it was verified before the refusal came.
	if _, ok := r.signatures[requestID]; ok {
		return nil, true, nil
	}
	f := r.refusals[requestID]
	return &f, false, nil
}

// refusedBySigner ends the order failed signer_refused, naming the check that failed.
func (r *orderRun) refusedBySigner(ctx workflow.Context, leg LegInput, f *Refusal) error {
	in := FailInput{Code: orders.FailureSignerRefused, Position: leg.Position, Leg: leg.Leg, SigningRequestID: f.SigningRequestID,
		Reason: f.Reason, Message: fmt.Sprintf("the signer refused the %s leg (%s): %s", leg.Leg, f.Reason, f.Detail)}
	in.OrderID, in.CorrelationID = r.in.OrderID, or(f.CorrelationID, r.in.CorrelationID)
	return r.step(ctx, orders.StepFailed, in, nil)
}

// onDecision takes the outcome the store decided. Each approver (the person, or a
// credential no person made) is listed once, however often its signal is repeated.
func (r *orderRun) onDecision(d ApprovalDecision) {
	if approver := or(d.DecidedByUser, d.DecidedBy); !r.approvers[approver] {
		r.approvers[approver] = true
		r.state.Approvals = append(r.state.Approvals, d)
	}
	if r.outcome == orders.ItemApproved || r.outcome == orders.ItemRejected {
		return
	}
	switch d.Outcome {
	case orders.ItemApproved:
		r.outcome, r.approvedIn = orders.ItemApproved, d.CorrelationID
	case orders.ItemRejected:
		r.outcome, r.rejectedBy, r.rejectedByUser, r.rejectedIn = orders.ItemRejected, d.DecidedBy, d.DecidedByUser, d.CorrelationID
	}
}

// retryPolicy is shared by every step: quick first retries, and no retry of a step whose
// order is in the wrong status.
var retryPolicy = &temporal.RetryPolicy{
	InitialInterval:        200 * time.Millisecond,
	BackoffCoefficient:     2,
	MaximumInterval:        30 * time.Second,
	NonRetryableErrorTypes: []string{ErrTypeInvalidState},
}

// localCtx runs the short, store-only steps as local activities: they execute inside the
// workflow task, which spares the server a task dispatch and three history events per step.
func localCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         retryPolicy,
	})
}

// activityCtx runs the steps that talk to the chain as regular activities.
func activityCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         retryPolicy,
	})
}

// ErrTypeInvalidState marks an activity error that no retry can fix (the order is not in
// a status the step applies to).
const ErrTypeInvalidState = "InvalidOrderState"

// ErrTypeNonceUsed marks a replacement that was not sent: the chain mined the transaction
// it replaces (another at its nonce) meanwhile.
const ErrTypeNonceUsed = "NonceUsed"

// ErrTypeLegRefused marks a leg that no retry can send: its details are the failure code
// (an orders.FailureCode, as a string) the order fails with: insufficient_funds, …
const ErrTypeLegRefused = "LegRefused"

// refusedLeg is the failure code of an ErrTypeLegRefused error.
func refusedLeg(err error) (orders.FailureCode, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrTypeLegRefused {
		return "", false
	}
	var code string
	if appErr.Details(&code) != nil || code == "" {
		return "", false
	}
	return orders.FailureCode(code), true
}

// messageOf is an activity error's own message, without what the SDK wraps it in.
func messageOf(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

func (r *orderRun) run(ctx workflow.Context) error {
	in := StepInput{OrderID: r.in.OrderID, CorrelationID: r.in.CorrelationID}
	if err := r.step(ctx, orders.StepSubmitted, in, nil); err != nil {
		return err
	}
	var decision PolicyDecision
	if err := r.step(ctx, orders.StepPolicyEvaluated, in, &decision); err != nil {
		return err
	}
	r.state.Decision, r.decided = &decision, true
	if workflow.GetVersion(ctx, PolicyVersionAttributeChange, workflow.DefaultVersion, 1) >= 1 {
		if err := workflow.UpsertTypedSearchAttributes(ctx, PolicyVersionKey.ValueSet(int64(decision.PolicyVersion))); err != nil {
			workflow.GetLogger(ctx).Warn("search attribute not updated", "policyVersion", decision.PolicyVersion, "error", err)
		}
	}
	if !decision.Allowed {
		return r.reject(ctx, RejectInput{Reason: orders.RejectedByPolicy, Violations: decision.Violations})
	}
	if decision.ApprovalRequired {
		done, err := r.approve(ctx, decision.Quorum)
		if err != nil || done {
			return err
		}
	}
	for i, leg := range r.in.Legs {
		done, err := r.runLeg(ctx, LegInput{OrderID: r.in.OrderID, CorrelationID: r.in.CorrelationID,
			Position: i, Leg: leg, Last: i == len(r.in.Legs)-1})
		if err != nil || done {
			return err
		}
	}
	return nil
}

// approve waits for the quorum; done reports that the order ended (rejected or expired).
func (r *orderRun) approve(ctx workflow.Context, quorum int) (done bool, err error) {
	lctx := localCtx(ctx)
	expires := workflow.Now(ctx).Add(r.in.ApprovalTimeout)
	if err := r.step(ctx, orders.StepApprovalRequested, ApprovalRequest{OrderID: r.in.OrderID,
		CorrelationID: r.in.CorrelationID, Quorum: quorum, ExpiresAt: expires}, &r.state.ItemID); err != nil {
		return true, err
	}
	reached, err := workflow.AwaitWithTimeout(ctx, r.in.ApprovalTimeout, func() bool { return r.outcome != "" && r.outcome != orders.ItemPending })
	if err != nil {
		return true, err
	}
	if !reached {
		// A decision stored but whose signal was lost still counts: ask the store.
		var o ApprovalOutcome
		if err := workflow.ExecuteLocalActivity(lctx, ApprovalOutcomeActivity, ApprovalRequest{OrderID: r.in.OrderID,
			CorrelationID: r.in.CorrelationID}).Get(ctx, &o); err != nil {
			return true, err
		}
		switch o.Status {
		case orders.ItemApproved:
			r.outcome, r.approvedIn = orders.ItemApproved, o.CorrelationID
		case orders.ItemRejected:
			r.outcome, r.rejectedBy, r.rejectedByUser, r.rejectedIn = orders.ItemRejected, o.RejectedBy, o.RejectedByUser, o.CorrelationID
		}
	}
	switch r.outcome {
	case orders.ItemRejected:
		return true, r.reject(ctx, RejectInput{Reason: orders.RejectedByApprover, ItemID: r.state.ItemID, DecidedBy: r.rejectedBy,
			DecidedByUser: r.rejectedByUser, CorrelationID: r.rejectedIn})
	case orders.ItemApproved:
	default:
		return true, r.reject(ctx, RejectInput{Reason: orders.RejectedExpired, ItemID: r.state.ItemID})
	}
	if err := r.step(ctx, orders.StepApproved, ApprovalRequest{OrderID: r.in.OrderID,
		CorrelationID: or(r.approvedIn, r.in.CorrelationID), Quorum: quorum}, nil); err != nil {
		return true, err
	}
	return false, nil
}

func (r *orderRun) reject(ctx workflow.Context, in RejectInput) error {
	in.OrderID, in.CorrelationID = r.in.OrderID, or(in.CorrelationID, r.in.CorrelationID)
	return r.step(ctx, orders.StepRejected, in, nil)
}

func (r *orderRun) fail(ctx workflow.Context, in FailInput) error {
	in.OrderID, in.CorrelationID = r.in.OrderID, r.in.CorrelationID
	return r.step(ctx, orders.StepFailed, in, nil)
}

// runLeg signs, broadcasts and confirms one leg; done reports that the order ended.
func (r *orderRun) runLeg(ctx workflow.Context, leg LegInput) (done bool, err error) {
	r.state.Leg = leg.Position
	leg.ExpiresAt = workflow.Now(ctx).Add(r.in.SigningTimeout)
	var req SigningRequestRef
	if err := r.step(ctx, orders.StepSignatureRequested, leg, &req); err != nil {
		// Version 1 fails an order whose leg no retry can send (more than the wallet
		// holds, an asset the chain lacks); before it, such a step retried until an
		// operator stepped in, so no history of an earlier version ever got here.
		if code, ok := refusedLeg(err); ok && workflow.GetVersion(ctx, RefusedLegChange, workflow.DefaultVersion, 1) >= 1 {
			return true, r.fail(ctx, FailInput{Code: code, Message: messageOf(err), Position: leg.Position, Leg: leg.Leg})
		}
		return true, err
	}
	r.state.Requests = append(r.state.Requests, req.ID)
	refused, signed, err := r.awaitSignature(ctx, req.ID, r.in.SigningTimeout)
	if err != nil {
		return true, err
	}
	if refused != nil {
		return true, r.refusedBySigner(ctx, leg, refused)
	}
	if !signed {
		return true, r.fail(ctx, FailInput{Code: orders.FailureSigningExpired, Message: fmt.Sprintf("the %s leg was not signed in time", leg.Leg),
			Position: leg.Position, Leg: leg.Leg, SigningRequestID: req.ID})
	}
	leg.SigningRequestID, leg.Signature = req.ID, r.signatures[req.ID].Signature
	record := leg
	record.CorrelationID = or(r.signatures[req.ID].CorrelationID, leg.CorrelationID)
	if err := r.step(ctx, orders.StepSigned, record, nil); err != nil {
		return true, err
	}
	if err := r.step(ctx, orders.StepBroadcast, leg, &leg.TxHash); err != nil {
		return true, err
	}
	// CheckLeg waits on the chain itself (up to LegWait, heartbeating), so a confirmation
	// costs one activity, not a timer and an activity per block.
	wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: LegWait + 30*time.Second,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy:         retryPolicy,
	})
	broadcastAt := workflow.Now(ctx)
	// Version 1 replaces a transaction stuck below the fee market; histories from before
	// it keep following their one transaction.
	replaces := workflow.GetVersion(ctx, ReplaceStuckChange, workflow.DefaultVersion, 1) >= 1
	if replaces {
		leg.SentAt = broadcastAt
	}
	// Version 1 builds again a transaction that lapsed (a Solana blockhash that expired
	// before it landed); before it, such a leg stayed pending until its timeout.
	rebuilds := workflow.GetVersion(ctx, RebuildLapsedChange, workflow.DefaultVersion, 1) >= 1
	leg.Rebuilds = rebuilds
	for attempt := 1; ; {
		var st LegStatus
		if err := workflow.ExecuteActivity(wctx, CheckLegActivity, leg).Get(ctx, &st); err != nil {
			return true, err
		}
		switch st.State {
		case chain.TxConfirmed:
			if st.TxHash != "" {
				leg.TxHash = st.TxHash
			}
			confirmed := orders.StepLegConfirmed
			if leg.Last {
				confirmed = orders.StepConfirmed
			}
			return false, r.step(ctx, confirmed, leg, nil)
		case chain.TxFailed:
			return true, r.fail(ctx, FailInput{Code: orders.FailureTxReverted, Message: st.Reason, Position: leg.Position, Leg: leg.Leg})
		}
		if workflow.Now(ctx).Sub(broadcastAt) >= r.in.ConfirmTimeout {
			return true, r.fail(ctx, FailInput{Code: orders.FailureTxTimeout, Position: leg.Position, Leg: leg.Leg,
				Message: fmt.Sprintf("the %s leg was not final on its chain within %v", leg.Leg, r.in.ConfirmTimeout)})
		}
		if (replaces && st.Underpriced) || (rebuilds && st.Lapsed) {
			why := "stayed below the fee market"
			if st.Lapsed {
				why = "expired before it landed"
			}
			done, err := r.replace(ctx, &leg, attempt, broadcastAt, why)
			if err != nil || done {
				return true, err
			}
			attempt++
			continue
		}
		// Still pending after CheckLeg's own wait: pause before asking again.
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return true, err
		}
	}
}

// PolicyVersionAttributeChange is the workflow.GetVersion change id of setting the
// PolicyVersion search attribute once the policy has decided.
const PolicyVersionAttributeChange = "policy-version-attribute"

// ReplaceStuckChange is the workflow.GetVersion change id of replacing a leg's
// transaction stuck below the fee market.
const ReplaceStuckChange = "replace-stuck-transaction"

// RebuildLapsedChange is the workflow.GetVersion change id of building again a leg's
// transaction that lapsed before it landed.
const RebuildLapsedChange = "rebuild-lapsed-transaction"

// RefusedLegChange is the workflow.GetVersion change id of failing an order whose leg the
// chain refuses for good before its signing request (ErrTypeLegRefused).
const RefusedLegChange = "refused-leg-fails-order"

// replace has the leg's latest transaction replaced: one stuck below the fee market by the
// same call at the same nonce with a higher fee, one that lapsed by the same call on a
// fresh blockhash; a new signing request, its signature, its broadcast. The leg then
// follows every transaction it has sent; whichever confirms is the leg's. done reports
// that the order ended: the replacement was not signed before the leg's confirmation time
// ran out. why says what became of the transaction replaced.
func (r *orderRun) replace(ctx workflow.Context, leg *LegInput, attempt int, broadcastAt time.Time, why string) (done bool, err error) {
	wait := min(r.in.SigningTimeout, r.in.ConfirmTimeout-workflow.Now(ctx).Sub(broadcastAt))
	req := *leg
	req.Attempt, req.ExpiresAt = attempt, workflow.Now(ctx).Add(wait)
	var ref SigningRequestRef
	if err := r.step(ctx, orders.StepReplacementRequested, req, &ref); err != nil {
		return true, err
	}
	r.state.Requests = append(r.state.Requests, ref.ID)
	refused, signed, err := r.awaitSignature(ctx, ref.ID, wait)
	if err != nil {
		return true, err
	}
	if refused != nil {
		return true, r.refusedBySigner(ctx, *leg, refused)
	}
	if !signed {
		return true, r.fail(ctx, FailInput{Code: orders.FailureTxTimeout, Position: leg.Position, Leg: leg.Leg, SigningRequestID: ref.ID,
			Message: fmt.Sprintf("the %s leg's transaction %s and its replacement was not signed within %v", leg.Leg, why, wait)})
	}
	req.SigningRequestID, req.Signature = ref.ID, r.signatures[ref.ID].Signature
	record := req
	record.CorrelationID = or(r.signatures[ref.ID].CorrelationID, req.CorrelationID)
	if err := r.step(ctx, orders.StepReplacementSigned, record, nil); err != nil {
		return true, err
	}
	var hash string
	if err := r.step(ctx, orders.StepReplacementBroadcast, req, &hash); err != nil {
		if isErrType(err, ErrTypeNonceUsed) {
			// What it would replace was mined meanwhile: follow the leg as it is.
			return false, nil
		}
		return true, err
	}
	leg.TxHash, leg.SigningRequestID, leg.SentAt = hash, ref.ID, workflow.Now(ctx)
	return false, nil
}

// OrderWorkflowID is the id of an order's workflow (SPEC 7): one workflow per order, so a
// repeated submit joins the one that runs.
func OrderWorkflowID(orderID string) string { return "order-" + orderID }

// The search attributes of order workflows, for operators in the Temporal UI (lists come
// from the store; visibility is eventually consistent).
var (
	OrderDomainKey   = temporal.NewSearchAttributeKeyKeyword("OrderDomain")
	OrderStatusKey   = temporal.NewSearchAttributeKeyKeyword("OrderStatus")
	OrgIDKey         = temporal.NewSearchAttributeKeyKeyword("OrgId")
	CorrelationIDKey = temporal.NewSearchAttributeKeyKeyword("CorrelationId")
	// PolicyVersionKey is the version of its app's policy the order was evaluated under.
	PolicyVersionKey = temporal.NewSearchAttributeKeyInt64("PolicyVersion")
	// SearchAttributes are registered on the namespace at start-up.
	SearchAttributes = []temporal.SearchAttributeKey{OrderDomainKey, OrderStatusKey, OrgIDKey, CorrelationIDKey, PolicyVersionKey}
)

// remoteSteps are the steps whose activities run on the task queue rather than as local
// activities: a broadcast talks to a chain's node, for as long as it takes.
var remoteSteps = map[string]bool{orders.StepBroadcast.Name: true, orders.StepReplacementBroadcast.Name: true}

// step runs the activity of one lifecycle step with in, its result in out (nil for
// none); then the order is in the status the step leaves it in, and so are the query
// state and the OrderStatus search attribute. The store is the source of truth; this is
// what an operator sees in the Temporal UI.
func (r *orderRun) step(ctx workflow.Context, s orders.Step, in, out any) error {
	var f workflow.Future
	if remoteSteps[s.Name] {
		f = workflow.ExecuteActivity(activityCtx(ctx), s.Activity, in)
	} else {
		f = workflow.ExecuteLocalActivity(localCtx(ctx), s.Activity, in)
	}
	if err := f.Get(ctx, out); err != nil {
		return err
	}
	if s.To != "" && s.To != r.state.Status {
		r.setStatus(ctx, s.To)
	}
	return nil
}

// setStatus keeps the query state and the OrderStatus search attribute in step.
func (r *orderRun) setStatus(ctx workflow.Context, status orders.Status) {
	r.state.Status = status
	if err := workflow.UpsertTypedSearchAttributes(ctx, OrderStatusKey.ValueSet(string(status))); err != nil {
		workflow.GetLogger(ctx).Warn("search attribute not updated", "status", status, "error", err)
	}
}

// or returns a, or b when a is empty.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// IsInvalidState reports whether an activity error says the order was not in a status the
// step applies to.
func IsInvalidState(err error) bool { return isErrType(err, ErrTypeInvalidState) }

func isErrType(err error, typ string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == typ
}
