package apitypes

import (
	"encoding/json"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/orders"
)

// Leg is one on-chain step of an order (TRANSFER, APPROVE, SWAP, DEPOSIT, WITHDRAW, CLAIM,
// DRAW, REPAY), signed, broadcast and confirmed before the next starts.
type Leg struct {
	Leg    string `json:"leg"`
	Status string `json:"status"`
	// SigningRequestID is set once the leg's signing request exists, TxHash once it was
	// broadcast.
	SigningRequestID *string `json:"signingRequestId,omitempty"`
	TxHash           *string `json:"txHash,omitempty"`
	// ReplacedTxHashes are the leg's earlier transactions, replaced (on EVM stuck below the
	// fee market, at the same nonce; on Solana lapsed, their blockhash expired before they
	// landed), oldest first; absent when there were none.
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
	// KeyID and Signature, for a signed decision, are the approver key and its signature
	// (standard base64) over the item's statement; absent otherwise.
	KeyID     string `json:"keyId,omitempty"`
	Signature string `json:"signature,omitempty"`
	// AuthenticatorData and ClientDataJSON, for a passkey's decision, are the rest of its
	// WebAuthn assertion (base64url); Signature is then the assertion's.
	AuthenticatorData string `json:"authenticatorData,omitempty"`
	ClientDataJSON    string `json:"clientDataJSON,omitempty"`
}

// Decision is the body of POST /approvals/{domain}/{id}/decide. Where the app's policy
// sets signedApprovals, KeyID and Signature are required: the approver's signature, with
// one of its approver keys, over SHA-256("treasury-approval:v1:" + decision + ":" +
// statement), in base64.
type Decision struct {
	Decision  string `json:"decision"` // APPROVE or REJECT
	Comment   string `json:"comment,omitempty"`
	KeyID     string `json:"keyId,omitempty"`
	Signature string `json:"signature,omitempty"`
	// WebAuthn, instead of Signature, is a passkey's assertion whose challenge is that
	// digest (base64url, as navigator.credentials.get gives its parts).
	WebAuthn *WebAuthnAssertion `json:"webauthn,omitempty"`
}

// WebAuthnAssertion is a passkey's signature as WebAuthn gives it.
type WebAuthnAssertion struct {
	AuthenticatorData string `json:"authenticatorData"`
	ClientDataJSON    string `json:"clientDataJSON"`
	Signature         string `json:"signature"`
}

// StatusChange is one entry of an order's status history.
type StatusChange struct {
	Status        string      `json:"status"`
	Reason        string      `json:"reason,omitempty"`
	CorrelationID string      `json:"correlationId"`
	At            events.Time `json:"at"`
}

// SigningApproval is one decision on an order's statement, as its signing requests carry
// it for a signer to check.
type SigningApproval = approvers.Evidence

// SigningRequest asks the wallet's key holder to sign one leg of an order.
type SigningRequest struct {
	Chain     string      `json:"chain"`
	CreatedAt events.Time `json:"createdAt"`
	// Digest is the hex of the 32 bytes to sign: on an EVM chain the signing hash of the
	// transaction UnsignedTx describes, on Solana the SHA-256 of its message.
	Digest    string      `json:"digest"`
	Domain    string      `json:"domain"`
	ExpiresAt events.Time `json:"expiresAt"`
	ID        string      `json:"id"`
	Leg       string      `json:"leg"`
	// Position is the leg's place among the order's legs, from 0: which of several legs of
	// one name (a batch payment's parts) the request signs.
	Position int    `json:"position"`
	OrderID  string `json:"orderId"`
	// RawUnsignedTx is the hex of the transaction's unsigned bytes, for a signer to decode
	// itself instead of trusting UnsignedTx: on an EVM chain the EIP-1559 unsigned RLP
	// (0x02 ‖ rlp(fields)), whose Keccak-256 is Digest; on Solana the serialized message,
	// whose SHA-256 is Digest.
	RawUnsignedTx string `json:"rawUnsignedTx"`
	// Message, on Solana, is the base64 of the serialized transaction message: the bytes
	// an ed25519 signature covers (RawUnsignedTx in hex), as Solana's runtime verifies them.
	Message string `json:"message,omitempty"`
	// Intent is the order's statement (SPEC 3.5a), canonical JSON: what the approvers
	// decided on, or for an order that needed no approval the same statement with no
	// quorum; null for a request made before intents.
	Intent *string `json:"intent"`
	// Approvals are the decisions on the statement, each with the approver key, scheme
	// and signature of a signed one.
	Approvals []SigningApproval `json:"approvals"`
	// ReplacesTxHash names the leg's transaction that this request's transaction replaces:
	// on EVM one stuck below the fee market (the same nonce, a higher fee), on Solana one
	// whose blockhash expired before it landed (a fresh blockhash); absent for a leg's first.
	ReplacesTxHash *string `json:"replacesTxHash,omitempty"`
	// Scheme is the wallet's: secp256k1 (65 bytes r‖s‖v over Digest) or ed25519 (64 bytes
	// over the message, whose SHA-256 Digest is).
	Scheme string `json:"scheme"`
	// SignedAt is null until the request is signed.
	SignedAt *events.Time `json:"signedAt"`
	// Status is pending, signed or expired.
	Status string `json:"status"`
	// UnsignedTx is the transaction to be signed, as JSON of its readable fields: on an
	// EVM chain its chainId, nonce, from, to, value, gas, fees, data and the decoded call;
	// on Solana the message's fee payer, blockhash, compute budget and instructions.
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

// BasePath is where the versioned API is served.
const BasePath = "/api/v1"

// Domain is an order domain; each belongs to one app.
type Domain string

// The order domains.
const (
	DomainPayment Domain = orders.DomainPayment
	DomainTrade   Domain = orders.DomainTrade
	DomainEarn    Domain = orders.DomainEarn
	DomainBorrow  Domain = orders.DomainBorrow
)

// App is the app the domain's orders belong to ("" for no domain).
func (d Domain) App() string {
	for _, info := range orders.Domains {
		if info.Name == string(d) {
			return info.App
		}
	}
	return ""
}

// Order is an order of any domain as the API answers it (SPEC 3.2): the common fields,
// and in OrderDetails its domain's own.
type Order struct {
	ID     string `json:"id"`
	Domain Domain `json:"domain"`
	App    string `json:"app"`
	// Status is draft, submitted, pending_approval, approved, pending_signature, signed,
	// broadcast, or one of the ends: confirmed, failed, rejected.
	Status   string `json:"status"`
	WalletID string `json:"walletId"`
	Chain    string `json:"chain"`
	Legs     []Leg  `json:"legs"`
	// AmountUSD is the order's value in USD, rounded to cents.
	AmountUSD string `json:"amountUsd"`
	// PayloadHash is the SHA-256 of the order's canonical JSON, which approvals bind to and
	// signing requests are derived from.
	PayloadHash string `json:"payloadHash"`
	// PolicyVersion is the version of the app's policy that evaluates the order, fixed at
	// submit (0 when the app had none); null before submit.
	PolicyVersion *int          `json:"policyVersion"`
	Approval      OrderApproval `json:"approval"`
	// Failure is set when the order failed, Rejection when it was rejected.
	Failure   *events.Failure `json:"failure,omitempty"`
	Rejection *Rejection      `json:"rejection,omitempty"`
	// PolicyDecision, in a submit's answer only, is PolicyAllowed or PolicyPending.
	PolicyDecision string `json:"policyDecision,omitempty"`
	// CreatedBy is the credential that created the order: key_…, oac_…, or usr_… for a
	// signed-in person. CreatedByUser is the person behind it, null when there is none.
	CreatedBy     string                `json:"createdBy"`
	CreatedByUser events.NullableString `json:"createdByUser"`
	// ScheduleID is the payout schedule whose run made the order; absent when a request
	// made it.
	ScheduleID    string       `json:"scheduleId,omitempty"`
	CorrelationID string       `json:"correlationId"`
	WorkflowID    string       `json:"workflowId"`
	CreatedAt     events.Time  `json:"createdAt"`
	UpdatedAt     events.Time  `json:"updatedAt"`
	SubmittedAt   *events.Time `json:"submittedAt"`
	CompletedAt   *events.Time `json:"completedAt"`
	// History is every status the order has had, when one order is read.
	History []StatusChange `json:"history,omitempty"`
	OrderDetails
}

// MarshalJSON writes the order's fields and its domain's; a trade's maxSlippageBps is
// written even when it is 0, which is a value.
func (o Order) MarshalJSON() ([]byte, error) {
	type fields Order
	b, err := json.Marshal(fields(o))
	if err != nil || o.Domain != DomainTrade || o.MaxSlippageBps != 0 {
		return b, err
	}
	return append(b[:len(b)-1], `,"maxSlippageBps":0}`...), nil
}

// OrderDetails are what an order asks for, in its domain's fields; the other domains'
// fields are empty. Amounts are decimal strings.
type OrderDetails struct {
	// Asset and Amount: payment, earn, borrow.
	Asset  string `json:"asset,omitempty"`
	Amount string `json:"amount,omitempty"`
	// Payment: a destination, or a batch payment's recipients (Amount is then their total).
	Destination *Destination `json:"destination,omitempty"`
	Recipients  []Recipient  `json:"recipients,omitempty"`
	Reference   string       `json:"reference,omitempty"`
	// Trade.
	SellAsset      string `json:"sellAsset,omitempty"`
	BuyAsset       string `json:"buyAsset,omitempty"`
	SellAmount     string `json:"sellAmount,omitempty"`
	MaxSlippageBps int    `json:"maxSlippageBps,omitempty"`
	// Earn and borrow.
	Protocol        string `json:"protocol,omitempty"`
	Action          string `json:"action,omitempty"`
	CollateralAsset string `json:"collateralAsset,omitempty"`
}

// Destination is where a payment goes: an address of the wallet's chain.
type Destination struct {
	Address string `json:"address"`
	Label   string `json:"label,omitempty"`
}

// Recipient is one payee of a batch payment (SPEC 3.9), with where its payment stands:
// the status, part and transaction of the TRANSFER leg that pays it (Part counts from 1,
// the leg's position plus one).
type Recipient struct {
	Address   string  `json:"address"`
	Amount    string  `json:"amount"`
	Reference string  `json:"reference,omitempty"`
	Label     string  `json:"label,omitempty"`
	Part      int     `json:"part,omitempty"`
	Status    string  `json:"status,omitempty"`
	TxHash    *string `json:"txHash,omitempty"`
}

// Rejection is why an order was rejected: by the policy (with its violations), by an
// approver (DecidedBy, the credential, and DecidedByUser, the person behind it, null for
// a credential no person made), or because its approval expired.
type Rejection struct {
	Reason        string                 `json:"reason"` // policy, approver or expired
	Violations    []events.Violation     `json:"violations,omitempty"`
	DecidedBy     string                 `json:"decidedBy,omitempty"`
	DecidedByUser *events.NullableString `json:"decidedByUser,omitempty"`
}
