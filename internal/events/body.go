package events

import (
	"encoding/json"
	"time"
)

// Time is a timestamp of a JSON body, an event's or a REST answer's: written in
// TimeLayout, where encoding/json would write a time.Time with nanoseconds and its zone,
// and read from any RFC 3339 time (the promoted time.Time.UnmarshalJSON).
type Time struct{ time.Time }

// TimeOf is t as a body holds it.
func TimeOf(t time.Time) Time { return Time{Time: t} }

// TimeOrNil is t as a body holds it, nil (JSON null) when t is.
func TimeOrNil(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	return &Time{Time: *t}
}

// MarshalJSON writes t in TimeLayout.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + FormatTime(t.Time) + `"`), nil
}

// OrderEvent is the body of an order's or a wallet's lifecycle event (SPEC 3.7): every
// event named Order.* or Wallet.*. The store fills the fields every such event carries
// (id, event, domain, orderId, walletId, orderStatus, sequence, correlationId, occurredAt
// and, on a leg event of a multi-leg order, leg); the step that emits the event fills its
// own, which are absent from the other events.
//
// The fields are declared in the order of their JSON names, the order of the keys of every
// body the outbox holds (they were maps): webhook receivers verify, and may keep, a body's
// very bytes.
type OrderEvent struct {
	// AmountUSD (Order.Created) is the order's value in USD, rounded to cents.
	AmountUSD string `json:"amountUsd,omitempty"`
	// Chain (Order.Created) is the chain of the order's wallet.
	Chain         string `json:"chain,omitempty"`
	CorrelationID string `json:"correlationId"`
	// CreatedBy (Order.Created) is the credential that created the order: key_…, oac_…,
	// or usr_… for a signed-in person. CreatedByUser is the person behind it, null when
	// there is none.
	CreatedBy     string          `json:"createdBy,omitempty"`
	CreatedByUser *NullableString `json:"createdByUser,omitempty"`
	// DecidedBy (Order.Rejected by an approver) is the credential that rejected it;
	// DecidedByUser the person behind it, null when there is none.
	DecidedBy     string          `json:"decidedBy,omitempty"`
	DecidedByUser *NullableString `json:"decidedByUser,omitempty"`
	Domain        string          `json:"domain"`
	// Event is the canonical name.
	Event string `json:"event"`
	// ExpiresAt (Wallet.SigningRequested) is when the signing request expires.
	ExpiresAt Time `json:"expiresAt,omitzero"`
	// Failure (Order.Failed) is why the order failed.
	Failure *Failure `json:"failure,omitempty"`
	ID      string   `json:"id"`
	// Leg names the leg of a multi-leg order's leg events (Wallet.*, Order.Broadcast) and
	// of its terminal event.
	Leg string `json:"leg,omitempty"`
	// Part (a batch payment's leg events and its terminal event) is the part, from 1, of
	// the batch the leg pays: the leg's position plus one.
	Part        int    `json:"part,omitempty"`
	OccurredAt  Time   `json:"occurredAt"`
	OrderID     string `json:"orderId"`
	OrderStatus string `json:"orderStatus"`
	// PolicyVersion (Order.Submitted) is the version of the app's policy that evaluates
	// the order: the one in force at submit, 0 when the app has none.
	PolicyVersion *int `json:"policyVersion,omitempty"`
	// Quorum (Order.Approved) is how many approvals the order needed.
	Quorum int `json:"quorum,omitempty"`
	// Reason (Order.Rejected) is policy, approver or expired.
	Reason string `json:"reason,omitempty"`
	// ReplacesTxHash (Wallet.SigningRequested, Wallet.TransactionSigned, Order.Broadcast of
	// a replacement) is the leg's transaction stuck below the fee market that this one
	// replaces at the same nonce.
	ReplacesTxHash string `json:"replacesTxHash,omitempty"`
	// ScheduleID (Order.Created of an order a payout schedule's run made) is the schedule.
	ScheduleID string `json:"scheduleId,omitempty"`
	// Sequence counts the order's events from 1 without gaps, so that a gap shows.
	Sequence int `json:"sequence"`
	// SigningRequestID (Wallet.SigningRequested, Wallet.TransactionSigned) is the leg's
	// signing request.
	SigningRequestID string `json:"signingRequestId,omitempty"`
	// TxHash (Order.Broadcast, Order.Confirmed) is the leg's transaction.
	TxHash string `json:"txHash,omitempty"`
	// Violations (Order.Rejected by the policy) are the rules the order broke.
	Violations []Violation `json:"violations,omitempty"`
	WalletID   string      `json:"walletId"`
}

// Failure is why an order failed: its code (signing_expired, tx_reverted, tx_timeout,
// signer_refused, …) and a message for people; for signer_refused, in Order.Failed, also
// the check the signer names as Reason.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
}

// Violation is a policy rule an order broke. It has policy.Violation's shape; this
// package imports none of the rules.
type Violation struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// NullableString is written as null when empty. Behind a pointer it tells the three
// states of a field apart: absent (nil), null and a value. Order.Created's createdByUser
// is null when no person created the order, and the other events leave it out.
type NullableString string

// MarshalJSON writes s, or null when it is empty.
func (s NullableString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// TestEvent is the body of websocket.test (ConfigID) and webhook.test (WebhookID): sent by
// a Send test to one config, whatever it subscribes to, about no order. Its fields are in
// the order of their JSON names, as OrderEvent's are.
type TestEvent struct {
	App           string `json:"app"`
	ConfigID      string `json:"configId,omitempty"`
	CorrelationID string `json:"correlationId"`
	Event         string `json:"event"`
	ID            string `json:"id"`
	OccurredAt    Time   `json:"occurredAt"`
	WebhookID     string `json:"webhookId,omitempty"`
}

// PolicyEvent is the body of Policy.Published: a new version of an app's policy is in
// force, for orders submitted from then on. Its fields are in the order of their JSON
// names, as OrderEvent's are.
type PolicyEvent struct {
	App           string `json:"app"`
	CorrelationID string `json:"correlationId"`
	// DraftID is the draft published, null for rules put in force at once.
	DraftID    *string `json:"draftId"`
	Event      string  `json:"event"`
	ID         string  `json:"id"`
	OccurredAt Time    `json:"occurredAt"`
	// PolicyVersion is the version now in force.
	PolicyVersion int `json:"policyVersion"`
	// PublishedBy is the credential whose request published it: the rules' PUT, or the
	// approval that completed the draft's quorum.
	PublishedBy string `json:"publishedBy"`
	// Restores is the earlier version a rollback put in force again, else null.
	Restores *int `json:"restores"`
}

// WebhookEvent is the body of Webhook.Disabled: the service stopped sending to one of the
// app's webhooks after every attempt failed for days. The disabled webhook itself is not
// told; the app's other webhooks and its live channel are. Its fields are in the order of
// their JSON names, as OrderEvent's are. The URL is left out: its query may hold a token.
type WebhookEvent struct {
	App            string `json:"app"`
	CorrelationID  string `json:"correlationId"`
	DisabledReason string `json:"disabledReason"`
	Event          string `json:"event"`
	// FailingSince is when the unbroken run of failed attempts began.
	FailingSince Time   `json:"failingSince"`
	ID           string `json:"id"`
	OccurredAt   Time   `json:"occurredAt"`
	WebhookID    string `json:"webhookId"`
}

// Body is an event's body: an *OrderEvent, a *PolicyEvent, a *WebhookEvent or a
// *TestEvent.
type Body interface{ body() }

func (*OrderEvent) body()   {}
func (*PolicyEvent) body()  {}
func (*WebhookEvent) body() {}
func (*TestEvent) body()    {}

// Encode writes an event's body as every channel carries it (the outbox, a live frame's
// data, a webhook message). It is the one place that does, so that a body is written one
// way whoever emits it.
func Encode(b Body) (json.RawMessage, error) {
	return json.Marshal(b)
}
