package orders

import "fmt"

// Status is an order's status as the API, the events (orderStatus) and the database spell it.
type Status string

// Statuses of an order, in lifecycle order; the last three are terminal.
const (
	StatusDraft            Status = "draft"
	StatusSubmitted        Status = "submitted"
	StatusPendingApproval  Status = "pending_approval"
	StatusApproved         Status = "approved"
	StatusPendingSignature Status = "pending_signature"
	StatusSigned           Status = "signed"
	StatusBroadcast        Status = "broadcast"
	StatusConfirmed        Status = "confirmed"
	StatusFailed           Status = "failed"
	StatusRejected         Status = "rejected"
)

// Statuses lists every status, for validating filters.
var Statuses = []Status{StatusDraft, StatusSubmitted, StatusPendingApproval, StatusApproved, StatusPendingSignature,
	StatusSigned, StatusBroadcast, StatusConfirmed, StatusFailed, StatusRejected}

// Terminal reports whether an order in this status is done: no step starts from it.
func (s Status) Terminal() bool {
	return s == StatusConfirmed || s == StatusFailed || s == StatusRejected
}

// LegPending is a leg's status until its signing request is made; from then on a leg takes
// the order's status names (pending_signature, signed, broadcast, confirmed, failed).
const LegPending Status = "pending"

// FailureCode says why an order ended failed: failure.code on the order and its Order.Failed.
type FailureCode string

// Why an order ended failed.
const (
	FailureSigningExpired FailureCode = "signing_expired"
	FailureTxReverted     FailureCode = "tx_reverted"
	FailureTxTimeout      FailureCode = "tx_timeout"
	// The signer checked the signing request against its own configuration and refused
	// it (SPEC 3.5a).
	FailureSignerRefused FailureCode = "signer_refused"
	// Refused before the leg's signing request, so that no nonce is spent: the wallet
	// holds less than the leg spends, the chain's configuration lacks the asset, or the
	// amount is more than the chain's integer carries.
	FailureInsufficientFunds FailureCode = "insufficient_funds"
	FailureUnsupportedAsset  FailureCode = "unsupported_asset"
	FailureAmountTooLarge    FailureCode = "amount_too_large"
)

// Step is one step of the order lifecycle: the statuses it may start from, the status it
// leaves the order in and the event it emits. An activity applies it in one transaction
// (store.ApplyOrderStep), which refuses it from any other status.
type Step struct {
	// Name keys the step within its order (order_steps, and the step of its event), so a
	// retry finds it applied. Leg steps are keyed per leg: leg-<position>-<name>.
	Name   string
	PerLeg bool
	// From lists the statuses the step may start from; only StepCreated has none.
	From []Status
	// To is the status the step leaves the order in; "" leaves it as it was.
	To Status
	// Event is the event the step emits, "" for none. The names are those of package
	// events, spelled here because orders stays free of I/O (the workflows import it);
	// orders' tests hold the two to each other.
	Event string
	// Activity is the activity that applies the step: the workflow runs it by this name,
	// and the worker registers the method of activities.Orders it names.
	Activity string
}

// Key is the step's key within its order; position names the leg of a leg step.
func (s Step) Key(position int) string {
	if s.PerLeg {
		return fmt.Sprintf("leg-%d-%s", position, s.Name)
	}
	return s.Name
}

// The steps of the order lifecycle, in the order a run takes them.
var (
	StepCreated           = Step{Name: "created", To: StatusDraft, Event: "Order.Created"}
	StepSubmitted         = Step{Name: "submitted", From: []Status{StatusDraft}, To: StatusSubmitted, Event: "Order.Submitted", Activity: "MarkSubmitted"}
	StepPolicyEvaluated   = Step{Name: "policy-evaluated", From: []Status{StatusSubmitted}, Activity: "EvaluatePolicy"}
	StepApprovalRequested = Step{Name: "approval-requested", From: []Status{StatusSubmitted}, To: StatusPendingApproval, Activity: "RequestApproval"}
	StepApproved          = Step{Name: "approved", From: []Status{StatusPendingApproval}, To: StatusApproved, Event: "Order.Approved", Activity: "MarkApproved"}
	StepRejected          = Step{Name: "rejected", From: []Status{StatusSubmitted, StatusPendingApproval}, To: StatusRejected,
		Event: "Order.Rejected", Activity: "RejectOrder"}
	// A leg after the first is requested from the broadcast of the one before it.
	StepSignatureRequested = Step{Name: "signing-requested", PerLeg: true,
		From: []Status{StatusSubmitted, StatusApproved, StatusBroadcast}, To: StatusPendingSignature, Event: "Wallet.SigningRequested",
		Activity: "RequestSignature"}
	StepSigned = Step{Name: "signed", PerLeg: true, From: []Status{StatusPendingSignature}, To: StatusSigned,
		Event: "Wallet.TransactionSigned", Activity: "RecordSignature"}
	StepBroadcast = Step{Name: "broadcast", PerLeg: true, From: []Status{StatusSigned}, To: StatusBroadcast,
		Event: "Order.Broadcast", Activity: "BroadcastLeg"}
	// StepLegConfirmed confirms a leg before the last: the order stays broadcast until the
	// next leg's signature is requested.
	StepLegConfirmed = Step{Name: "confirmed", PerLeg: true, From: []Status{StatusBroadcast}, Activity: "ConfirmLeg"}
	// StepConfirmed confirms the last leg, and with it the order.
	StepConfirmed = Step{Name: "confirmed", From: []Status{StatusBroadcast}, To: StatusConfirmed, Event: "Order.Confirmed",
		Activity: "ConfirmLeg"}
	// A leg's transaction stuck below the fee market is replaced: the same call at the same
	// nonce, a higher fee, signed again. Each replacement is keyed by its attempt (Attempt);
	// the order stays broadcast throughout.
	StepReplacementRequested = Step{Name: "replacement-requested", PerLeg: true, From: []Status{StatusBroadcast},
		Event: "Wallet.SigningRequested", Activity: "RequestSignature"}
	StepReplacementSigned = Step{Name: "replacement-signed", PerLeg: true, From: []Status{StatusBroadcast},
		Event: "Wallet.TransactionSigned", Activity: "RecordSignature"}
	StepReplacementBroadcast = Step{Name: "replacement-broadcast", PerLeg: true, From: []Status{StatusBroadcast},
		Event: "Order.Broadcast", Activity: "BroadcastLeg"}
	// An order fails at a leg: its signature never came, its transaction failed, or the
	// chain refused the leg before its signing request (from where that request would have
	// been made).
	StepFailed = Step{Name: "failed", From: []Status{StatusSubmitted, StatusApproved, StatusPendingSignature, StatusSigned, StatusBroadcast},
		To: StatusFailed, Event: "Order.Failed", Activity: "FailOrder"}
)

// Steps lists every step of the lifecycle.
var Steps = []Step{StepCreated, StepSubmitted, StepPolicyEvaluated, StepApprovalRequested, StepApproved, StepRejected,
	StepSignatureRequested, StepSigned, StepBroadcast, StepReplacementRequested, StepReplacementSigned, StepReplacementBroadcast,
	StepLegConfirmed, StepConfirmed, StepFailed}

// Attempt is the step of a leg's nth replacement (from 1): the same step under a key of
// its own, so each replacement commits once.
func (s Step) Attempt(n int) Step {
	s.Name = fmt.Sprintf("%s-%d", s.Name, n)
	return s
}
