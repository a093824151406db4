package apitypes

import (
	"encoding/json"

	"github.com/opentreasury/treasury/events"
)

// AuditLog is one record of who did what (GET /audit-logs).
type AuditLog struct {
	ID            string `json:"id"`
	App           string `json:"app"`
	Actor         Actor  `json:"actor"`
	Action        string `json:"action"`
	ResourceType  string `json:"resourceType"`
	ResourceID    string `json:"resourceId"`
	CorrelationID string `json:"correlationId"`
	// Details are the action's own, an object.
	Details   json.RawMessage `json:"details"`
	CreatedAt events.Time     `json:"createdAt"`
}

// Actor is who acted: a key, an OAuth client or a person (Type key, oauth_client, user).
// ID comes first, as the API has always written it.
type Actor struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}
