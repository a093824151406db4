package client

import (
	"context"
	"encoding/base64"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
)

// Approval is an approval item: an order waiting for RequiredApprovals APPROVEs (or one
// REJECT) from people or keys other than its creator.
type Approval struct {
	ID      string `json:"id"`
	Domain  Domain `json:"domain"`
	OrderID string `json:"orderId"`
	// Status is pending, approved, rejected or expired.
	Status            string             `json:"status"`
	RequiredApprovals int                `json:"requiredApprovals"`
	Decisions         []ApprovalDecision `json:"decisions"`
	// Reason says why the order needs approval.
	Reason string `json:"reason"`
	// PayloadHash is the order's: what is approved is what gets signed.
	PayloadHash string `json:"payloadHash"`
	// Statement is what the approvers approve, canonical JSON (SPEC 3.5a); an approver
	// signs approvers' DecisionDigest of it. Nil for an item created without one.
	Statement *string `json:"statement"`
	// Simulation is what the chain's node said the order's legs would move when the item
	// was made: a view beside the statement, not part of what is signed. Nil on a chain
	// that cannot simulate.
	Simulation *Simulation  `json:"simulation"`
	Order      OrderSummary `json:"order"`
	CreatedAt  time.Time    `json:"createdAt"`
	ExpiresAt  time.Time    `json:"expiresAt"`
}

// Simulation is an approval item's simulation: each leg's revert and gas, and every
// address's net balance change.
type Simulation = chain.Simulation

// OrderSummary is what an approver sees of the order.
type OrderSummary struct {
	AmountUSD string       `json:"amountUsd"`
	WalletID  string       `json:"walletId"`
	Chain     string       `json:"chain"`
	Details   OrderDetails `json:"details"`
}

// ApprovalDecision is one approver's decision.
type ApprovalDecision = apitypes.ApprovalDecision

// The decisions an approver records.
const (
	Approve = "APPROVE"
	Reject  = "REJECT"
)

// Decision is the body of DecideApproval: Approve or Reject, and an optional comment.
type Decision = apitypes.Decision

// ApprovalsAll is the status filter that lists approval items of every status.
const ApprovalsAll = "all"

// ApprovalFilter narrows a list of approval items.
type ApprovalFilter struct {
	Domain Domain
	// Status is pending, approved, rejected, expired or ApprovalsAll; empty asks the
	// server's default, pending (an approver's queue).
	Status string
	Limit  int
	Cursor string
}

func (f ApprovalFilter) query() url.Values {
	q := url.Values{}
	set(q, "domain", string(f.Domain))
	set(q, "status", f.Status)
	setPage(q, f.Limit, f.Cursor)
	return q
}

// ListApprovals reads a page of the approval items the caller may see (GET /approvals).
func (c *Client) ListApprovals(ctx context.Context, f ApprovalFilter, opts ...CallOption) (*Page[Approval], error) {
	return list[Approval](ctx, c, "/approvals", f.query(), opts)
}

// Approvals iterates over the approval items the caller may see.
func (c *Client) Approvals(ctx context.Context, f ApprovalFilter, opts ...CallOption) iter.Seq2[Approval, error] {
	return all[Approval](ctx, c, "/approvals", f.query(), "cursor", opts)
}

// DecideApproval records a decision on an item (POST /approvals/{domain}/{id}/decide,
// action approve) and signals it to the order's workflow. The order's creator may not
// decide it (403 maker_checker_violation); the same decision again is answered as the
// first was, another one, or any on a decided or expired item, is a 409 conflict.
func (c *Client) DecideApproval(ctx context.Context, domain Domain, id string, d Decision, opts ...CallOption) (*Approval, error) {
	path := "/approvals/" + url.PathEscape(string(domain)) + "/" + url.PathEscape(id) + "/decide"
	return do[Approval](ctx, c, http.MethodPost, path, d, opts)
}

// SigningRequest asks the wallet's key holder to sign one leg of an order: Digest, after
// checking that it is derived from UnsignedTx (CheckSigningRequest) and that UnsignedTx is
// what you mean to sign.
type SigningRequest = apitypes.SigningRequest

// SigningRequestFilter narrows a list of signing requests.
type SigningRequestFilter struct {
	// Status is pending, signed, expired or SigningRequestsAll; empty asks the server's
	// default, pending (a signer's queue).
	Status string
	Limit  int
	Cursor string
}

// SigningRequestsAll asks a list of signing requests for every status.
const SigningRequestsAll = "all"

func (f SigningRequestFilter) query() url.Values {
	q := url.Values{}
	set(q, "status", f.Status)
	setPage(q, f.Limit, f.Cursor)
	return q
}

// ListSigningRequests reads a page of GET /signing-requests.
func (c *Client) ListSigningRequests(ctx context.Context, f SigningRequestFilter, opts ...CallOption) (*Page[SigningRequest], error) {
	return list[SigningRequest](ctx, c, "/signing-requests", f.query(), opts)
}

// SigningRequests iterates over the signing requests the caller may see.
func (c *Client) SigningRequests(ctx context.Context, f SigningRequestFilter, opts ...CallOption) iter.Seq2[SigningRequest, error] {
	return all[SigningRequest](ctx, c, "/signing-requests", f.query(), "cursor", opts)
}

// GetSigningRequest reads GET /signing-requests/{id}.
func (c *Client) GetSigningRequest(ctx context.Context, id string, opts ...CallOption) (*SigningRequest, error) {
	return get[SigningRequest](ctx, c, "/signing-requests/"+url.PathEscape(id), opts)
}

// SubmitSignature posts the signature of the 32 bytes the request's Digest spells in hex
// (POST /signing-requests/{id}/signature, action sign): 65 bytes r‖s‖v for a secp256k1
// wallet, 64 for an ed25519 one. SignRequest checks the request and makes it. One that does
// not verify against the wallet is a *Problem with Code invalid_signature, and the request
// stays pending.
func (c *Client) SubmitSignature(ctx context.Context, id string, signature []byte, opts ...CallOption) (*SigningRequest, error) {
	body := map[string]string{"signature": base64.StdEncoding.EncodeToString(signature)}
	return do[SigningRequest](ctx, c, http.MethodPost, "/signing-requests/"+url.PathEscape(id)+"/signature", body, opts)
}

// RefuseSigningRequest tells the service that the signer will not sign the request (POST
// /signing-requests/{id}/refusal, action sign): reason names the check that failed
// (lowercase letters, digits and _), detail what the signer saw. The order fails
// signer_refused with the reason in Order.Failed; a request no longer pending is a
// *Problem with Code conflict.
func (c *Client) RefuseSigningRequest(ctx context.Context, id, reason, detail string, opts ...CallOption) (*SigningRequest, error) {
	body := map[string]string{"reason": reason, "detail": detail}
	return do[SigningRequest](ctx, c, http.MethodPost, "/signing-requests/"+url.PathEscape(id)+"/refusal", body, opts)
}

// SigningApproval is one decision on an order's statement as its signing requests carry
// it: with, for a signed decision, its approver key, scheme and signature.
type SigningApproval = apitypes.SigningApproval

// ApproverKey is a public key an approver signs decisions with: a person's passkey, or
// the key an approving credential was created with (APIKeyRequest.ApproverKey).
type ApproverKey = apitypes.ApproverKey

// ApproverKeyRequest is the approver public key of a new approving tk key.
type ApproverKeyRequest = apitypes.ApproverKeyRequest

// ListApproverKeys reads a page of the organisation's approver keys, newest first,
// revoked ones included (GET /approver-keys): the keys a signer pins.
func (c *Client) ListApproverKeys(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[ApproverKey], error) {
	return list[ApproverKey](ctx, c, "/approver-keys", o.query(), opts)
}

// DecisionDigest is what an approver signs to decide an item with a signature (SPEC 3.3):
// SHA-256("treasury-approval:v1:" + decision + ":" + statement), statement being the
// item's Statement as given. Sign it with one of your approver keys and pass the key's id
// and the signature (base64) in the Decision.
func DecisionDigest(decision, statement string) []byte {
	return approvers.DecisionDigest(decision, []byte(statement))
}
