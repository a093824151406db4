package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/orders"
)

// Domain is an order domain; each belongs to one app.
type Domain = apitypes.Domain

// The order domains and their apps.
const (
	DomainPayment = apitypes.DomainPayment // app pay, /payments
	DomainTrade   = apitypes.DomainTrade   // app trade, /trade-orders
	DomainEarn    = apitypes.DomainEarn    // app earn, /earn-orders
	DomainBorrow  = apitypes.DomainBorrow  // app borrow, /borrow-orders
)

func domainInfo(d Domain) (orders.DomainInfo, error) {
	for _, info := range orders.Domains {
		if info.Name == string(d) {
			return info, nil
		}
	}
	return orders.DomainInfo{}, fmt.Errorf("client: %q is not an order domain (payment, trade, earn, borrow)", d)
}

// collection is the path of the domain's orders, or of one of them (ids, when given).
func collection(d Domain, ids ...string) (string, error) {
	info, err := domainInfo(d)
	if err != nil {
		return "", err
	}
	path := "/" + info.Collection
	for _, id := range ids {
		path += "/" + url.PathEscape(id)
	}
	return path, nil
}

// OrderRequest is the body of a new order: a PaymentRequest, TradeRequest, EarnRequest or
// BorrowRequest. Amounts are decimal strings ("1250.50"), greater than zero, with at most
// 18 decimal places; the server reports every invalid field at once (validation_failed).
type OrderRequest interface {
	orderDomain() Domain
}

// PaymentRequest is a payment's body.
type PaymentRequest struct {
	WalletID    string      `json:"walletId,omitempty"`
	Asset       string      `json:"asset,omitempty"`
	Amount      string      `json:"amount,omitempty"`
	Destination Destination `json:"destination,omitzero"`
	// Recipients make it a batch payment (docs/payouts.md): 2 to 500, each with its own
	// address and amount, instead of Amount and Destination. Only their Address, Amount,
	// Reference and Label are sent.
	Recipients []Recipient `json:"recipients,omitempty"`
	// Reference is yours, up to 200 characters.
	Reference string `json:"reference,omitempty"`
}

// Recipient is one payee of a batch payment: in a request its address, amount and
// optional reference and label; on an order also the part that pays it, that part's
// status and transaction.
type Recipient = apitypes.Recipient

// Destination is where a payment goes: an address of the wallet's chain.
type Destination = apitypes.Destination

// TradeRequest is a trade's body: sell SellAmount of SellAsset for BuyAsset.
type TradeRequest struct {
	WalletID   string `json:"walletId,omitempty"`
	SellAsset  string `json:"sellAsset,omitempty"`
	BuyAsset   string `json:"buyAsset,omitempty"`
	SellAmount string `json:"sellAmount,omitempty"`
	// MaxSlippageBps is 0 to 5000 basis points; 0 is a valid value and always sent.
	MaxSlippageBps int `json:"maxSlippageBps"`
}

// EarnRequest is an earn order's body: Action is EarnDeposit or EarnWithdraw.
type EarnRequest struct {
	WalletID string `json:"walletId,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	Action   string `json:"action,omitempty"`
	Asset    string `json:"asset,omitempty"`
	Amount   string `json:"amount,omitempty"`
}

// BorrowRequest is a borrow order's body: Action is BorrowDraw or BorrowRepay.
type BorrowRequest struct {
	WalletID        string `json:"walletId,omitempty"`
	Protocol        string `json:"protocol,omitempty"`
	Action          string `json:"action,omitempty"`
	Asset           string `json:"asset,omitempty"`
	Amount          string `json:"amount,omitempty"`
	CollateralAsset string `json:"collateralAsset,omitempty"`
}

// The actions of earn and borrow orders.
const (
	EarnDeposit  = "deposit"
	EarnWithdraw = "withdraw"
	BorrowDraw   = "draw"
	BorrowRepay  = "repay"
)

func (PaymentRequest) orderDomain() Domain { return DomainPayment }
func (TradeRequest) orderDomain() Domain   { return DomainTrade }
func (EarnRequest) orderDomain() Domain    { return DomainEarn }
func (BorrowRequest) orderDomain() Domain  { return DomainBorrow }

// Order is an order of any domain: the common fields, and in OrderDetails its domain's
// own. CreatedByUser is "" when no person created it; PolicyDecision, in SubmitOrder's
// answer only, is PolicyAllowed or PolicyPending.
type Order = apitypes.Order

// What SubmitOrder's answer says of the policy's decision: it allowed the order within
// the submit's wait, or it has not decided yet (a refusal then arrives as Order.Rejected,
// reason policy).
const (
	PolicyAllowed = apitypes.PolicyAllowed
	PolicyPending = apitypes.PolicyPending
)

// OrderDetails are what an order asks for, in its domain's fields; the other domains'
// fields are empty.
type OrderDetails = apitypes.OrderDetails

// Leg is one on-chain step of an order, signed, broadcast and confirmed before the next
// starts.
type Leg = apitypes.Leg

// OrderApproval says whether the order needs approvers, how many, and their decisions
// (filled by GetOrder only).
type OrderApproval = apitypes.OrderApproval

// Failure is why an order failed: signing_expired, signer_refused (with the signer's check
// as Reason, in Order.Failed), tx_reverted, tx_timeout, insufficient_funds, …
type Failure = events.Failure

// Rejection is why an order was rejected: by the policy (with its violations), by an
// approver (DecidedBy, the credential, and DecidedByUser, the person behind it), or
// because its approval expired.
type Rejection = apitypes.Rejection

// StatusChange is one entry of an order's history.
type StatusChange = apitypes.StatusChange

// OrderFilter narrows a list of orders, newest first.
type OrderFilter struct {
	// Status keeps the orders of one status.
	Status string
	// CreatedAfter keeps the orders created after it (zero: all).
	CreatedAfter time.Time
	Limit        int
	Cursor       string
}

func (f OrderFilter) query() url.Values {
	q := url.Values{}
	set(q, "status", f.Status)
	if !f.CreatedAfter.IsZero() {
		q.Set("createdAfter", f.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	setPage(q, f.Limit, f.Cursor)
	return q
}

// CreateOrder creates a draft order of the request's domain (POST /payments,
// /trade-orders, /earn-orders or /borrow-orders) and emits Order.Created. Nothing moves
// until SubmitOrder.
func (c *Client) CreateOrder(ctx context.Context, req OrderRequest, opts ...CallOption) (*Order, error) {
	if req == nil {
		return nil, fmt.Errorf("client: CreateOrder needs a PaymentRequest, TradeRequest, EarnRequest or BorrowRequest")
	}
	path, err := collection(req.orderDomain())
	if err != nil {
		return nil, err
	}
	return do[Order](ctx, c, http.MethodPost, path, req, opts)
}

// SubmitOrder hands a draft to its workflow (POST …/{id}/submit). It returns once the
// policy has allowed the order (202: accepted, not executed; PolicyDecision allowed), or
// once the service's wait for the decision is over (PolicyDecision pending: accepted, and
// a refusal will come as Order.Rejected); a policy that refuses it within the wait is a
// *Problem with Code policy_violation and the rules in Violations, and the order is then
// rejected. A submitted order is a conflict, unless this is a retry of the same submit.
func (c *Client) SubmitOrder(ctx context.Context, domain Domain, id string, opts ...CallOption) (*Order, error) {
	path, err := collection(domain, id, "submit")
	if err != nil {
		return nil, err
	}
	return do[Order](ctx, c, http.MethodPost, path, nil, opts)
}

// GetOrder reads one order with its status history (GET …/{id}).
func (c *Client) GetOrder(ctx context.Context, domain Domain, id string, opts ...CallOption) (*Order, error) {
	path, err := collection(domain, id)
	if err != nil {
		return nil, err
	}
	return get[Order](ctx, c, path, opts)
}

// ListOrders reads a page of a domain's orders, newest first.
func (c *Client) ListOrders(ctx context.Context, domain Domain, f OrderFilter, opts ...CallOption) (*Page[Order], error) {
	path, err := collection(domain)
	if err != nil {
		return nil, err
	}
	return list[Order](ctx, c, path, f.query(), opts)
}

// Orders iterates over a domain's orders, newest first, page after page.
func (c *Client) Orders(ctx context.Context, domain Domain, f OrderFilter, opts ...CallOption) iter.Seq2[Order, error] {
	path, err := collection(domain)
	if err != nil {
		return func(yield func(Order, error) bool) { yield(Order{}, err) }
	}
	return all[Order](ctx, c, path, f.query(), "cursor", opts)
}
