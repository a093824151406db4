package auth

import (
	"slices"
	"time"
)

// Principal is who a request acts as, once its credential has been checked.
type Principal struct {
	OrgID string
	// App is the one app the credential belongs to.
	App string
	// Kind is the credential kind: sk, tk, pk, at (OAuth access token) or user (a signed-in
	// person).
	Kind string
	// ID identifies the actor recorded in the audit log and bound by maker-checker: the
	// key (key_…), the OAuth client (oac_…) or the person (usr_…).
	ID      string
	Actions []string
	// ResourceIDs, when not empty, limits a tk_ key to these resources.
	ResourceIDs []string
	// ExpiresAt is when a short-lived credential (an OAuth access token) stops working;
	// zero for keys.
	ExpiresAt time.Time
	// Role (owner or member) and Grants (actions per app) describe a person. A person
	// reaches every app they hold an action on; App stays empty until a route narrows the
	// principal to one app with InApp.
	Role   string
	Grants map[string][]string
	// Session is the hash of a person's session token, for signing out.
	Session string
	// Person is the person behind the request: the one signed in, or the one who created
	// the key or OAuth client used; "" for credentials no person created.
	Person string
}

// Actor is who maker-checker binds: the person behind the request when there is one (so a
// person cannot approve, through a key they made, an order they created), else the
// credential.
func (p *Principal) Actor() string {
	if p.Person != "" {
		return p.Person
	}
	return p.ID
}

// Can reports whether the principal may perform action on app. A credential of one app
// never reaches another, and a publishable key performs no REST action at all.
func (p *Principal) Can(app, action string) bool {
	if p == nil || p.Kind == KindPublishable {
		return false
	}
	if p.Kind == KindUser && p.App == "" {
		return slices.Contains(p.Grants[app], action)
	}
	return p.App == app && slices.Contains(p.Actions, action)
}

// Apps lists the apps the principal holds any action on, in the order of Apps.
func (p *Principal) Apps() []string {
	if p.Kind != KindUser || p.App != "" {
		return []string{p.App}
	}
	var out []string
	for _, app := range Apps {
		if len(p.Grants[app]) > 0 {
			out = append(out, app)
		}
	}
	return out
}

// InApp is a person's principal narrowed to one app, for routes that act within one app
// (the developer surface, an app's orders). Keys and tokens already are.
func (p *Principal) InApp(app string) *Principal {
	if p.Kind != KindUser || p.App != "" {
		return p
	}
	n := *p
	n.App, n.Actions, n.Grants = app, p.Grants[app], nil
	return &n
}

// ActorType is how the audit log names the kind of actor: key, oauth_client, user, device
// or system.
func (p *Principal) ActorType() string {
	switch p.Kind {
	case KindUser:
		return "user"
	case KindAccessToken:
		return "oauth_client"
	case KindDevice:
		return "device"
	case KindSystem:
		return "system"
	}
	return "key"
}

// SigningDevice reports whether the principal is a signing device's: a treasury tk_ key
// holding sign and restricted to wallets (or the dev bundle's signer inside the service),
// the one credential that signs — and lists, reads and hears — every app's signing
// requests, for its own wallets only. No other treasury credential crosses apps to sign:
// an sk_ holds sign too, but a key that leaks from a dashboard must not sign payments.
func (p *Principal) SigningDevice() bool {
	if p == nil || len(p.ResourceIDs) == 0 {
		return false
	}
	switch p.Kind {
	case KindResource:
		return p.App == TreasuryApp && slices.Contains(p.Actions, ActionSign)
	case KindDevice:
		return slices.Contains(p.Actions, ActionSign)
	}
	return false
}

// CanReach reports whether a resource id is within the principal's resource restriction.
func (p *Principal) CanReach(resourceID string) bool {
	return len(p.ResourceIDs) == 0 || slices.Contains(p.ResourceIDs, resourceID)
}
