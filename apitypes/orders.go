package apitypes

import "github.com/opentreasury/treasury/events"

// Leg is one on-chain step of an order (TRANSFER, APPROVE, SWAP, DEPOSIT, WITHDRAW, CLAIM,
// DRAW, REPAY), signed, broadcast and confirmed before the next starts.
type Leg struct {
	Leg    string `json:"leg"`
	Status string `json:"status"`
	// SigningRequestID is set once the leg's signing request exists, TxHash once it was
	// broadcast.
	SigningRequestID *string `json:"signingRequestId,omitempty"`
	TxHash           *string `json:"txHash,omitempty"`
	// ReplacedTxHashes are the leg's earlier transactions, stuck below the fee market and
	// replaced at the same nonce, oldest first; absent when there were none.
	ReplacedTxHashes []string `json:"replacedTxHashes,omitempty"`
}

// OrderApproval says whether an order needs approvers, how many, and their decisions
// (filled when one order is read).
type OrderApproval struct {
	Required bool `json:"required"`
	Quorum   int  `json:"quorum"`
	// ItemID is the order's approval item, once it was opened.
	ItemID    *string            `json:"itemId,omitempty"`
	Decisions []ApprovalDecision `json:"decisions"`
}

// ApprovalDecision is one approver's decision: DecidedBy is the credential that recorded
// it (key_…, oac_…, or usr_… for a signed-in person), DecidedByUser the person behind it
// (null for a credential no person made, which counts as an approver of its own).
type ApprovalDecision struct {
	Decision      string      `json:"decision"` // APPROVE or REJECT
	DecidedBy     string      `json:"decidedBy"`
	DecidedByUser *string     `json:"decidedByUser"`
	DecidedAt     events.Time `json:"decidedAt"`
	Comment       string      `json:"comment"`
}

// Decision is the body of POST /approvals/{domain}/{id}/decide.
type Decision struct {
	Decision string `json:"decision"` // APPROVE or REJECT
	Comment  string `json:"comment,omitempty"`
}

// StatusChange is one entry of an order's status history.
type StatusChange struct {
	Status        string      `json:"status"`
	Reason        string      `json:"reason,omitempty"`
	CorrelationID string      `json:"correlationId"`
	At            events.Time `json:"at"`
}

// SigningRequest asks the wallet's key holder to sign one leg of an order. Its fields are
// in the order of their JSON names, the order the API has always written them in.
type SigningRequest struct {
	Chain     string      `json:"chain"`
	CreatedAt events.Time `json:"createdAt"`
	// Digest is the hex of the 32 bytes to sign: on a simulated chain the SHA-256 of
	// UnsignedTx, on an EVM chain the signing hash of the transaction UnsignedTx describes.
	Digest    string      `json:"digest"`
	Domain    string      `json:"domain"`
	ExpiresAt events.Time `json:"expiresAt"`
	ID        string      `json:"id"`
	Leg       string      `json:"leg"`
	OrderID   string      `json:"orderId"`
	// ReplacesTxHash names the leg's transaction, stuck below the fee market, that this
	// request's transaction replaces at the same nonce; absent for a leg's first.
	ReplacesTxHash *string `json:"replacesTxHash,omitempty"`
	// Scheme is the wallet's: secp256k1 (65 bytes r‖s‖v over Digest) or ed25519 (64 bytes).
	Scheme string `json:"scheme"`
	// SignedAt is null until the request is signed.
	SignedAt *events.Time `json:"signedAt"`
	// Status is pending, signed or expired.
	Status string `json:"status"`
	// UnsignedTx is the transaction to be signed, as JSON of its readable fields: on an
	// EVM chain its chainId, nonce, from, to, value, gas, fees, data and the decoded call;
	// on a simulated chain the order's canonical payload and its hash.
	UnsignedTx string `json:"unsignedTx"`
	WalletID   string `json:"walletId"`
}

// What a submit's answer says of the policy's decision (policyDecision): it allowed the
// order within the submit's wait, or it has not decided yet (a refusal then arrives as
// Order.Rejected, reason policy).
const (
	PolicyAllowed = "allowed"
	PolicyPending = "pending"
)
