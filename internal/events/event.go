package events

import (
	"context"
	"encoding/json"
	"time"
)

// TimeLayout is the one timestamp form of the API, events included: ISO 8601 UTC with
// milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders a time in TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// Event is one committed event of the outbox, as subscribers receive it: what routes it
// (its organisation, app and name) and its body. Everything else an integrator reads of
// it (domain, leg, sequence, …) is in the body.
type Event struct {
	ID string
	// Name is the canonical event name (Order.Submitted, …).
	Name  string
	OrgID string
	App   string
	// WalletID is the wallet of the order it is about: a live connection restricted to
	// some wallets receives only their events.
	WalletID string
	// OrderID and CorrelationID are the order it is about and the request that caused it.
	OrderID, CorrelationID string
	// Data is the event's JSON body (SPEC 3.7): the body of a webhook delivery and the
	// data of a live frame.
	Data       json.RawMessage
	OccurredAt time.Time
}

// Outbox reads committed events back from the events table.
type Outbox interface {
	// EventsByID returns the events with these ids that exist, oldest first.
	EventsByID(ctx context.Context, ids []string) ([]Event, error)
	// EventsSince returns at most limit events that occurred at or after since, oldest first.
	EventsSince(ctx context.Context, since time.Time, limit int) ([]Event, error)
}

// Subscription is a config that receives events: a WebSocket config or a webhook config.
// Both follow one rule (SPEC 3.8).
type Subscription struct {
	ID    string
	OrgID string
	App   string
	// Entries are the normalised entries (see NormalizeEntries).
	Entries []string
	Enabled bool
}

// Wants reports whether the subscription receives ev: it is enabled, of the event's
// organisation and app, and one of its entries matches the event's name.
func (s *Subscription) Wants(ev *Event) bool {
	return s.Enabled && s.OrgID == ev.OrgID && s.App == ev.App && Matches(s.Entries, ev.Name)
}

// WantsForDevices reports whether the signing devices connected to a config want an
// event the config itself does not: a signing request of any app of the organisation, on
// a treasury config whose entries select it. Signing devices sign their wallets'
// transactions whichever app ordered them, as they list them over REST.
func (s *Subscription) WantsForDevices(ev *Event) bool {
	return ev.Name == WalletSigningRequested && s.App == TreasuryApp && s.Enabled && s.OrgID == ev.OrgID &&
		Matches(s.Entries, ev.Name)
}

// Recipient is who a live connection delivers to, as its credential's reach narrows the
// config's events.
type Recipient struct {
	// CredentialID is the key or OAuth client that opened it: its revocation closes the
	// connection with 4003. The credential is checked once, at the upgrade: an OAuth
	// token's expiry does not end the connection.
	CredentialID string
	// Wallets, when not empty, is the credential's wallet restriction: of the events that
	// name a wallet, only these wallets' reach the connection.
	Wallets []string
	// SigningDevice: the credential is a signing device's key (a treasury tk_ with sign,
	// restricted to wallets), and receives what WantsForDevices selects besides its
	// config's events; SigningOnly, that alone (the key does not hold read).
	SigningDevice, SigningOnly bool
}
