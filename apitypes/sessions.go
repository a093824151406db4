package apitypes

import "github.com/opentreasury/treasury/internal/events"

// Session is a person's signed-in session (POST /sessions, GET /session).
type Session struct {
	User User `json:"user"`
	// Permissions are the actions the person holds, per app.
	Permissions map[string][]string `json:"permissions"`
	// CSRFToken must accompany every write made with the session.
	CSRFToken string      `json:"csrfToken"`
	ExpiresAt events.Time `json:"expiresAt"`
}

// User is a person of the organisation.
type User struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Role  string `json:"role"` // owner or member
	OrgID string `json:"orgId"`
}
