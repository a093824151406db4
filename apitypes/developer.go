package apitypes

import "github.com/opentreasury/treasury/internal/events"

// Creator is who made a record, in the one meaning createdBy has everywhere (SPEC 3.2):
// the credential, and the person behind it.
type Creator struct {
	// CreatedBy is the credential that made it: key_…, oac_…, or usr_… for a signed-in
	// person; null when none did (the dev bundle's seed).
	CreatedBy *string `json:"createdBy"`
	// CreatedByUser is the person behind that credential; null when there is none.
	CreatedByUser *string `json:"createdByUser"`
}

// APIKey is a key of an app (/developer/api-keys). Its secret is shown once, when the key
// is created.
type APIKey struct {
	ID   string `json:"id"`
	App  string `json:"app"`
	Kind string `json:"kind"` // sk, tk or pk
	// Actions are what the key may do (every action for an sk key).
	Actions []string `json:"actions"`
	// ResourceIDs are the wallets a tk key is restricted to; empty for every wallet.
	ResourceIDs []string `json:"resourceIds"`
	Label       string   `json:"label"`
	// Hint is the end of the secret, to tell keys apart.
	Hint       string       `json:"hint"`
	CreatedAt  events.Time  `json:"createdAt"`
	LastUsedAt *events.Time `json:"lastUsedAt"`
	RevokedAt  *events.Time `json:"revokedAt"`
	// ApproverKeyID is the approver key the key signs its decisions with (an approving
	// tk key created with one); null otherwise.
	ApproverKeyID *string `json:"approverKeyId"`
	Creator
	// Secret is the key itself, in the answer to its creation only (not in a replay of it).
	Secret string `json:"secret,omitempty"`
}

// APIKeyRequest is a new key: Kind sk, tk (with at least one action) or pk. A tk key
// holding approve may carry ApproverKey, the public key it signs its decisions with.
type APIKeyRequest struct {
	Kind        string              `json:"kind"`
	Actions     []string            `json:"actions,omitempty"`
	ResourceIDs []string            `json:"resourceIds,omitempty"`
	Label       string              `json:"label,omitempty"`
	ApproverKey *ApproverKeyRequest `json:"approverKey,omitempty"`
}

// ApproverKeyRequest is an approver public key: Scheme ed25519 (32 bytes), secp256k1 or
// p256 (the 33-byte compressed point), PublicKey its bytes in base64.
type ApproverKeyRequest struct {
	Scheme    string `json:"scheme"`
	PublicKey string `json:"publicKey"`
}

// ApproverKey is a public key an approver signs decisions with (GET /approver-keys): a
// person's passkey, or the key of an approving credential.
type ApproverKey struct {
	ID        string `json:"id"`
	Scheme    string `json:"scheme"`
	PublicKey string `json:"publicKey"`
	// Kind is passkey or key.
	Kind string `json:"kind"`
	// CredentialID is the key or OAuth client it belongs to; UserID the person, for a
	// passkey; null otherwise.
	CredentialID *string      `json:"credentialId"`
	UserID       *string      `json:"userId"`
	CreatedAt    events.Time  `json:"createdAt"`
	RevokedAt    *events.Time `json:"revokedAt"`
}

// OAuthClient is a client-credentials client of an app (/developer/oauth-clients).
type OAuthClient struct {
	ID       string `json:"id"`
	ClientID string `json:"clientId"`
	App      string `json:"app"`
	// Scopes are space-separated <app>:<action>.
	Scopes    string       `json:"scopes"`
	Label     string       `json:"label"`
	CreatedAt events.Time  `json:"createdAt"`
	RevokedAt *events.Time `json:"revokedAt"`
	// ApproverKeyID is the approver key the client signs its decisions with (a client
	// with the approve scope created with one); null otherwise.
	ApproverKeyID *string `json:"approverKeyId"`
	Creator
	// ClientSecret is in the answer to its creation only.
	ClientSecret string `json:"clientSecret,omitempty"`
}

// OAuthClientRequest is a new OAuth client: Scopes are space-separated <app>:<action> of
// the caller's app, e.g. "pay:read pay:write". A client with the approve scope may carry
// ApproverKey, the public key it signs its decisions with.
type OAuthClientRequest struct {
	Scopes      string              `json:"scopes"`
	Label       string              `json:"label,omitempty"`
	ApproverKey *ApproverKeyRequest `json:"approverKey,omitempty"`
}

// TeamMember is a person of the organisation with their actions on the app
// (/developer/team).
type TeamMember struct {
	ID        string      `json:"id"`
	Email     string      `json:"email"`
	Role      string      `json:"role"` // owner or member
	App       string      `json:"app"`
	Actions   []string    `json:"actions"`
	CreatedAt events.Time `json:"createdAt"`
	// SignInLink is the new member's one-time sign-in link (24 h), where they set their
	// password; in the answer that added them only.
	SignInLink string `json:"signInLink,omitempty"`
}

// RequestLog is one authenticated request of the app, kept seven days (/developer/logs).
type RequestLog struct {
	ID            string      `json:"id"`
	Method        string      `json:"method"`
	Path          string      `json:"path"`
	Status        int         `json:"status"`
	LatencyMs     float64     `json:"latencyMs"`
	KeyID         string      `json:"keyId"`
	CorrelationID string      `json:"correlationId"`
	At            events.Time `json:"at"`
}

// Webhook is an endpoint that receives the app's events as signed messages
// (/developer/webhooks).
type Webhook struct {
	ID          string   `json:"id"`
	App         string   `json:"app"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
	Enabled     bool     `json:"enabled"`
	// DisabledReason says why the service disabled the webhook (every delivery failing for
	// 5 days); null when it is enabled or a person disabled it.
	DisabledReason *string `json:"disabledReason"`
	// FailingSince is when the unbroken run of failed attempts to the endpoint began;
	// null while the last attempt succeeded.
	FailingSince *events.Time `json:"failingSince"`
	// RateLimit bounds the messages sent to the endpoint per second; null: none of its own.
	RateLimit *int `json:"rateLimit"`
	// PreviousSecretExpiresAt is when the secret before the last rotation stops signing.
	PreviousSecretExpiresAt *events.Time `json:"previousSecretExpiresAt"`
	Creator
	CreatedAt events.Time `json:"createdAt"`
	UpdatedAt events.Time `json:"updatedAt"`
	// Secret (whsec_…) verifies the messages; it is in the answers to the webhook's
	// creation and to a rotation of its secret only.
	Secret string `json:"secret,omitempty"`
}

// WebhookRequest is a new webhook.
type WebhookRequest struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
	// RateLimit bounds the messages sent to the endpoint per second (1–10000).
	RateLimit *int `json:"rateLimit,omitempty"`
}

// WebhookRecoveryRequest asks for a webhook's failed and skipped messages of a window
// again: since ≤ the event's time < until (now when absent).
type WebhookRecoveryRequest struct {
	Since events.Time  `json:"since"`
	Until *events.Time `json:"until,omitempty"`
}

// WebhookRecovery is the background job that sends a webhook's messages again, with
// where it stands.
type WebhookRecovery struct {
	ID        string      `json:"id"`
	WebhookID string      `json:"webhookId"`
	Since     events.Time `json:"since"`
	Until     events.Time `json:"until"`
	// Status is running, completed or failed.
	Status string `json:"status"`
	// Scanned counts the messages of the window looked at so far; Requeued those queued
	// again.
	Scanned  int     `json:"scanned"`
	Requeued int     `json:"requeued"`
	Error    *string `json:"error"`
	Creator
	CreatedAt   events.Time  `json:"createdAt"`
	UpdatedAt   events.Time  `json:"updatedAt"`
	CompletedAt *events.Time `json:"completedAt"`
}

// WebhookDelivery is one message to one webhook, with its attempts.
type WebhookDelivery struct {
	ID string `json:"id"`
	// MessageID is the webhook-id header: the same on every attempt and redelivery.
	MessageID string `json:"messageId"`
	Event     string `json:"event"`
	EventID   string `json:"eventId"`
	// OrderID is the order the event is about; absent for a test message.
	OrderID string `json:"orderId,omitempty"`
	// Status is pending, succeeded, failed or skipped (the webhook was disabled).
	Status   string            `json:"status"`
	Attempts []DeliveryAttempt `json:"attempts"`
	// NextAttemptAt is when a pending message is sent next; null once it is not pending.
	NextAttemptAt *events.Time `json:"nextAttemptAt"`
	CreatedAt     events.Time  `json:"createdAt"`
	CompletedAt   *events.Time `json:"completedAt"`
}

// DeliveryAttempt is one try at sending a message.
type DeliveryAttempt struct {
	At events.Time `json:"at"`
	// StatusCode is the endpoint's answer; absent when there was none (Error says why).
	StatusCode *int    `json:"statusCode,omitempty"`
	LatencyMs  float64 `json:"latencyMs"`
	Error      *string `json:"error,omitempty"`
	// Response is the start of the endpoint's answer (at most 2 KiB).
	Response *string `json:"response,omitempty"`
}
