package service

import (
	"slices"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
)

// Records names a kind of record that is listed across apps: what a caller reaches of it
// depends on the apps it holds actions on (docs/api.md, "What a credential reaches").
type Records int

const (
	// ApprovalItems: read or approve on the item's app.
	ApprovalItems Records = iota
	// SigningRequests: read or sign on the request's app; or a signing device's key (a
	// treasury tk_ with sign, restricted to wallets: auth.Principal.SigningDevice), which
	// signs its wallets' transactions whichever app ordered them.
	SigningRequests
	// Events: read on the event's app.
	Events
	// AuditRecords: read on the record's app; or read on treasury, the organisation's
	// dashboard, which reads every app's.
	AuditRecords
)

// Reach lists the apps whose records of a kind the principal reaches, none when it
// reaches none. A key, client or token belongs to one app and reaches only that app's
// records, but for the two cross-app grants the seed gives (see Records); a person
// reaches the records of every app they hold the action on. Wallet restrictions
// (Principal.ResourceIDs) narrow every answer further.
func Reach(p *auth.Principal, r Records) []string {
	if p == nil {
		return nil
	}
	switch r {
	case ApprovalItems:
		return orderApps(p, auth.ActionRead, auth.ActionApprove)
	case SigningRequests:
		if p.SigningDevice() {
			return orderingApps // of its wallets only: ResourceIDs narrow every answer
		}
		return orderApps(p, auth.ActionRead, auth.ActionSign)
	case Events:
		return orderApps(p, auth.ActionRead)
	case AuditRecords:
		if p.Can(events.TreasuryApp, auth.ActionRead) {
			return auth.Apps
		}
		var out []string
		for _, app := range p.Apps() {
			if p.Can(app, auth.ActionRead) {
				out = append(out, app)
			}
		}
		return out
	}
	return nil
}

// orderApps are the apps that order things (pay, trade, earn, borrow) on which the
// principal holds one of actions.
func orderApps(p *auth.Principal, actions ...string) []string {
	var out []string
	for _, app := range p.Apps() {
		if app != events.TreasuryApp && slices.ContainsFunc(actions, func(a string) bool { return p.Can(app, a) }) {
			out = append(out, app)
		}
	}
	return out
}

// orderingApps are every app that orders things: all but treasury, the organisation's
// own (its wallets, portfolio and positions), which has no approval items, signing
// requests or events of its own.
var orderingApps = slices.DeleteFunc(slices.Clone(auth.Apps), func(app string) bool { return app == events.TreasuryApp })
