package client

import (
	"cmp"
	"context"
	"encoding/json"
	"iter"
	"net/url"
	"strconv"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/events"
)

// Event is one event of the shared stream: an order's or a wallet's lifecycle step, a
// policy's publication, or a websocket.test. It is what GET /events lists, what a live
// frame carries as its data, and the body of a webhook message. Its fields are those of an
// order's event (a websocket.test has its ID, Event, CorrelationID and OccurredAt; a
// Policy.Published has those and PolicyVersion, the rest of it is in Data); Event is the
// canonical name: Order.Created, Order.Submitted, Order.Approved, Order.Rejected,
// Wallet.SigningRequested, Wallet.TransactionSigned, Order.Broadcast, Order.Confirmed,
// Order.Failed, Policy.Published (or websocket.test).
type Event struct {
	events.OrderEvent
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
type AuditLog = apitypes.AuditLog

// Actor is who acted: a key, an OAuth client or a person (Type key, oauth_client, user).
type Actor = apitypes.Actor

// ListAuditLogs reads a page of GET /audit-logs, newest first.
func (c *Client) ListAuditLogs(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[AuditLog], error) {
	return list[AuditLog](ctx, c, "/audit-logs", o.query(), opts)
}

// AuditLogs iterates over the audit records the caller may read, newest first.
func (c *Client) AuditLogs(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[AuditLog, error] {
	return all[AuditLog](ctx, c, "/audit-logs", o.query(), "cursor", opts)
}
