// Package events holds the event names of SPEC 3.7, the subscription rules of SPEC 3.8,
// the bus that tells every process about newly committed events, and the follower that
// reads them from the outbox for the subscribers of a process (the live channel, webhooks).
package events

import (
	"errors"
	"strings"
)

// Canonical event names, in lifecycle order.
const (
	OrderCreated              = "Order.Created"
	OrderSubmitted            = "Order.Submitted"
	OrderApproved             = "Order.Approved"
	OrderRejected             = "Order.Rejected"
	WalletSigningRequested    = "Wallet.SigningRequested"
	WalletTransactionSigned   = "Wallet.TransactionSigned"
	OrderBroadcast            = "Order.Broadcast"
	OrderConfirmed            = "Order.Confirmed"
	OrderFailed               = "Order.Failed"
	PolicyPublished           = "Policy.Published"
	WebhookDisabled           = "Webhook.Disabled"
	WebSocketTest             = "websocket.test"
	WebhookTest               = "webhook.test"
	wildcardAll               = "*"
	wildcardSuffix            = ".*"
	maxEntryLength            = 100
	maxEntriesPerSubscription = 50
)

// TreasuryApp is the organisation's own app, which orders nothing: its configs receive no
// order's events, but a signing device's connection to one receives the signing requests
// of every app (the live channel's side of the device's reach, docs/api.md).
const TreasuryApp = "treasury"

// Names lists every event a subscription may name.
var Names = []string{OrderCreated, OrderSubmitted, OrderApproved, OrderRejected, WalletSigningRequested,
	WalletTransactionSigned, OrderBroadcast, OrderConfirmed, OrderFailed, PolicyPublished, WebhookDisabled, WebSocketTest, WebhookTest}

// Canonical returns the canonical spelling of a known event name, matched case-insensitively.
func Canonical(name string) (string, bool) {
	for _, n := range Names {
		if strings.EqualFold(n, name) {
			return n, true
		}
	}
	return "", false
}

// ErrEntry explains why a subscription entry was refused.
var ErrEntry = errors.New("must be a known event name, a prefix.* wildcard of one (order.*, wallet.*, policy.*, websocket.*, webhook.*) or *")

// NormalizeEntry checks one subscription entry and returns the form it is stored in:
// lowercase.
func NormalizeEntry(entry string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(entry))
	if e == "" || len(e) > maxEntryLength || e != strings.ToLower(entry) {
		return "", ErrEntry
	}
	if e == wildcardAll {
		return e, nil
	}
	if prefix, ok := strings.CutSuffix(e, wildcardSuffix); ok {
		for _, n := range Names {
			if strings.HasPrefix(strings.ToLower(n), prefix+".") {
				return e, nil
			}
		}
		return "", ErrEntry
	}
	// The stored form is the canonical name's, lowercased: Unicode case folding would let
	// "order.ſubmitted" (a long s) name Order.Submitted, and Matches compares bytes.
	if c, ok := Canonical(e); ok {
		return strings.ToLower(c), nil
	}
	return "", ErrEntry
}

// NormalizeEntries checks a subscription list; duplicates collapse to one entry, in the
// order first given. The error names the first bad entry.
func NormalizeEntries(entries []string) ([]string, error) {
	if len(entries) == 0 {
		return nil, errors.New("needs at least one entry")
	}
	if len(entries) > maxEntriesPerSubscription {
		return nil, errors.New("takes at most 50 entries")
	}
	out := make([]string, 0, len(entries))
	seen := map[string]bool{}
	for _, e := range entries {
		n, err := NormalizeEntry(e)
		if err != nil {
			return nil, errors.New(quote(e) + " " + err.Error())
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

func quote(s string) string {
	if len(s) > maxEntryLength {
		s = s[:maxEntryLength] + "…"
	}
	return "'" + s + "'"
}

// IsAppEvent reports whether an event is about an app rather than an order
// (Policy.Published, Webhook.Disabled): its body has none of an order event's fields
// (orderId, sequence, …), so a config receives it only when it names it, by name or by its
// prefix.* wildcard, never through *, and GET /events, the orders' stream, does not list it.
func IsAppEvent(name string) bool {
	return strings.EqualFold(name, PolicyPublished) || strings.EqualFold(name, WebhookDisabled)
}

// Matches reports whether an event name is selected by any of the (normalised) entries.
func Matches(entries []string, name string) bool {
	lower := strings.ToLower(name)
	for _, e := range entries {
		switch {
		case e == wildcardAll:
			if !IsAppEvent(name) {
				return true
			}
		case strings.HasSuffix(e, wildcardSuffix):
			if strings.HasPrefix(lower, e[:len(e)-1]) {
				return true
			}
		case e == lower:
			return true
		}
	}
	return false
}
