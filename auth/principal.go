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
	// Kind is the credential kind: sk, tk, pk (or "oauth", "user" as they are added).
	Kind string
	// ID identifies the credential (key_…) and is the actor recorded in the audit log.
	ID      string
	Actions []string
	// ResourceIDs, when not empty, limits a tk_ key to these resources.
	ResourceIDs []string
	// ExpiresAt is when a short-lived credential (an OAuth access token) stops working;
	// zero for keys.
	ExpiresAt time.Time
}

// Can reports whether the principal may perform action on app. A credential of one app
// never reaches another, and a publishable key performs no REST action at all.
func (p *Principal) Can(app, action string) bool {
	if p == nil || p.App != app || p.Kind == KindPublishable {
		return false
	}
	return slices.Contains(p.Actions, action)
}

// CanReach reports whether a resource id is within the principal's resource restriction.
func (p *Principal) CanReach(resourceID string) bool {
	return len(p.ResourceIDs) == 0 || slices.Contains(p.ResourceIDs, resourceID)
}
