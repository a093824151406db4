package client

import (
	"cmp"
	"context"
	"encoding/json"
	"iter"
	"net/url"
	"strconv"
	"time"
)

// Event is one event of the shared stream: an order's or a wallet's lifecycle step, or a
// websocket.test. It is what GET /events lists, what a live frame carries as its data, and
// the body of a webhook message.
type Event struct {
	ID string `json:"id"`
	// Event is the canonical name: Order.Created, Order.Submitted, Order.Approved,
	// Order.Rejected, Wallet.SigningRequested, Wallet.TransactionSigned, Order.Broadcast,
	// Order.Confirmed, Order.Failed (or websocket.test).
	Event       string `json:"event"`
	Domain      Domain `json:"domain,omitempty"`
	OrderID     string `json:"orderId,omitempty"`
	OrderStatus string `json:"orderStatus,omitempty"`
	// Leg names the leg of a multi-leg order's leg events and its terminal one.
	Leg string `json:"leg,omitempty"`
	// Sequence counts the order's events from 1 without gaps, so that a gap shows.
	Sequence      int64     `json:"sequence,omitempty"`
	CorrelationID string    `json:"correlationId"`
	OccurredAt    time.Time `json:"occurredAt"`
	// Fields of some events: SigningRequestID (Wallet.SigningRequested,
	// Wallet.TransactionSigned), TxHash (Order.Broadcast, Order.Confirmed), Failure
	// (Order.Failed), Reason (Order.Rejected: policy, approver or expired).
	SigningRequestID string   `json:"signingRequestId,omitempty"`
	TxHash           string   `json:"txHash,omitempty"`
	Failure          *Failure `json:"failure,omitempty"`
	Reason           string   `json:"reason,omitempty"`
	// Data is the whole event as the server sent it, with every field of its kind.
	Data json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the event as sent in Data besides reading its fields.
func (e *Event) UnmarshalJSON(b []byte) error {
	type fields Event // without this method
	var f fields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*e = Event(f)
	e.Data = append(json.RawMessage(nil), b...)
	return nil
}

// EventFilter narrows GET /events, which lists stored events oldest first, 30 days back.
type EventFilter struct {
	// OrderID keeps one order's events, in sequence order.
	OrderID string
	// Cursor is where to go on from: a previous page's NextCursor, or the ID of an Event
	// kept from an earlier run (this list's cursor is the last event's id).
	Cursor string
	// After is Cursor's first name (the service takes ?after= as an alias of ?cursor=).
	//
	// Deprecated: use Cursor.
	After string
	Limit int
}

func (f EventFilter) query() url.Values {
	q := url.Values{}
	set(q, "orderId", f.OrderID)
	set(q, "cursor", cmp.Or(f.Cursor, f.After))
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// ListEvents reads a page of stored events (GET /events, action read). The page's
// NextCursor is the Cursor of the next.
func (c *Client) ListEvents(ctx context.Context, f EventFilter, opts ...CallOption) (*Page[Event], error) {
	return list[Event](ctx, c, "/events", f.query(), opts)
}

// Events iterates over the stored events after f.Cursor, oldest first, to the last one
// stored now. Events are written by several processes, so one may still appear a moment
// later with an earlier id; FollowEvents copes with that.
func (c *Client) Events(ctx context.Context, f EventFilter, opts ...CallOption) iter.Seq2[Event, error] {
	return all[Event](ctx, c, "/events", f.query(), "cursor", opts)
}

// AuditLog is one record of who did what.
type AuditLog struct {
	ID            string          `json:"id"`
	App           string          `json:"app"`
	Actor         Actor           `json:"actor"`
	Action        string          `json:"action"`
	ResourceType  string          `json:"resourceType"`
	ResourceID    string          `json:"resourceId"`
	CorrelationID string          `json:"correlationId"`
	Details       json.RawMessage `json:"details"`
	CreatedAt     time.Time       `json:"createdAt"`
}

// Actor is who acted: a key, an OAuth client or a person (Type key, oauth_client, user).
type Actor struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// ListAuditLogs reads a page of GET /audit-logs, newest first.
func (c *Client) ListAuditLogs(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[AuditLog], error) {
	return list[AuditLog](ctx, c, "/audit-logs", o.query(), opts)
}

// AuditLogs iterates over the audit records the caller may read, newest first.
func (c *Client) AuditLogs(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[AuditLog, error] {
	return all[AuditLog](ctx, c, "/audit-logs", o.query(), "cursor", opts)
}
