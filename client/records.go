package client

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/events"
)

// The canonical event names (SPEC 3.7), in lifecycle order.
const (
	EventOrderCreated            = events.OrderCreated
	EventOrderSubmitted          = events.OrderSubmitted
	EventOrderApproved           = events.OrderApproved
	EventOrderRejected           = events.OrderRejected
	EventWalletSigningRequested  = events.WalletSigningRequested
	EventWalletTransactionSigned = events.WalletTransactionSigned
	EventOrderBroadcast          = events.OrderBroadcast
	EventOrderConfirmed          = events.OrderConfirmed
	EventOrderFailed             = events.OrderFailed
	EventPolicyPublished         = events.PolicyPublished
	EventWebhookDisabled         = events.WebhookDisabled
	EventWebSocketTest           = events.WebSocketTest
	EventWebhookTest             = events.WebhookTest
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
	Limit  int
}

func (f EventFilter) query() url.Values {
	q := url.Values{}
	set(q, "orderId", f.OrderID)
	set(q, "cursor", f.Cursor)
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

// AuditLogPage is a page of audit records with the head of the organisation's audit
// chain as the answer found it (nil before the first record): keep one, and a later
// export that reaches it proves that nothing up to it changed since.
type AuditLogPage = apitypes.AuditLogPage

// ListAuditLogs reads a page of GET /audit-logs, newest first.
func (c *Client) ListAuditLogs(ctx context.Context, o ListOptions, opts ...CallOption) (*AuditLogPage, error) {
	return get[AuditLogPage](ctx, c, withQuery("/audit-logs", o.query()), opts)
}

// AuditLogs iterates over the audit records the caller may read, newest first.
func (c *Client) AuditLogs(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[AuditLog, error] {
	return all[AuditLog](ctx, c, "/audit-logs", o.query(), "cursor", opts)
}

// AuditChainHead is where an organisation's audit chain ends: its last seq and hash.
type AuditChainHead = apitypes.AuditChainHead

// AuditChainEntry is one entry of an export of the audit chain: a record with its seq,
// prevHash and hash. Verify a run of them with package auditchain, the code the service
// chains them with.
type AuditChainEntry = apitypes.AuditChainEntry

// AuditChainCheck is what GET /audit-logs/verify found of the stored chain.
type AuditChainCheck = apitypes.AuditChainCheck

// AuditExportOptions choose a run of the chain: the records written from Since until
// (before) Until, either zero for the chain's end; Limit entries a request (1 to 10000;
// zero: the server's default, 1000; an answer must fit the client's 8 MiB, so keep it to
// a few thousand).
type AuditExportOptions struct {
	Since, Until time.Time
	Limit        int
}

// ExportAuditLog writes the organisation's audit chain, or the run of it o chooses, to w
// as the API sends it: one JSON entry a line, oldest first (GET /audit-logs/export, read
// on treasury). Save it, and `treasury audit verify FILE` checks it offline. It follows
// the export's cursor request after request; each answer is read whole, retried as every
// call is, and written to w only then, so w never holds a line twice. It returns how many
// bytes it wrote.
func (c *Client) ExportAuditLog(ctx context.Context, o AuditExportOptions, w io.Writer, opts ...CallOption) (int64, error) {
	q := url.Values{}
	for name, t := range map[string]time.Time{"since": o.Since, "until": o.Until} {
		if !t.IsZero() {
			q.Set(name, t.UTC().Format(time.RFC3339Nano))
		}
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var written int64
	for {
		var body []byte
		var header http.Header
		err := c.send(ctx, call{method: http.MethodGet, path: withQuery("/audit-logs/export", q), out: &body, header: &header, opts: opts})
		if err != nil {
			return written, err
		}
		n, err := w.Write(body)
		written += int64(n)
		next := header.Get("Next-Cursor")
		if err != nil || next == "" {
			return written, err
		}
		q.Set("cursor", next)
	}
}

// VerifyAuditChain asks the service to check the organisation's stored audit chain
// (GET /audit-logs/verify, read on treasury): intact, or its first broken entry. A chain
// longer than 100,000 entries is refused (409): StartAuditVerification checks any.
func (c *Client) VerifyAuditChain(ctx context.Context, opts ...CallOption) (*AuditChainCheck, error) {
	return get[AuditChainCheck](ctx, c, "/audit-logs/verify", opts)
}

// AuditVerification is a background check of the organisation's whole stored chain.
type AuditVerification = apitypes.AuditVerification

// StartAuditVerification starts checking the organisation's whole stored audit chain in
// the background (POST /audit-logs/verifications, read on treasury); poll
// AuditVerification until its Status is no longer "running". A retried call is the same
// call (its Idempotency-Key): it starts one verification.
func (c *Client) StartAuditVerification(ctx context.Context, opts ...CallOption) (*AuditVerification, error) {
	return do[AuditVerification](ctx, c, http.MethodPost, "/audit-logs/verifications", nil, opts)
}

// AuditVerification reads a background verification of the audit chain (GET
// /audit-logs/verifications/{id}): running, intact, broken (FirstBroken) or failed (Error).
func (c *Client) AuditVerification(ctx context.Context, id string, opts ...CallOption) (*AuditVerification, error) {
	return get[AuditVerification](ctx, c, "/audit-logs/verifications/"+url.PathEscape(id), opts)
}
