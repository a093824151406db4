// Package ids makes the prefixed, sortable, opaque identifiers of SPEC section 2.
package ids

import (
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
)

// Prefixes of every kind of id the service hands out.
const (
	Order             = "ord"
	ApprovalItem      = "apr"
	SigningRequest    = "sig"
	Event             = "evt"
	Wallet            = "wal"
	APIKey            = "key"
	WebSocketConfig   = "wsc"
	WebhookConfig     = "whk"
	WebhookMessage    = "msg"
	WebhookDelivery   = "dlv"
	OAuthClient       = "oac"
	Organization      = "org"
	User              = "usr"
	AuditLog          = "aud"
	PolicyDraft       = "pdr"
	PolicyDryRun      = "pdx"
	WebhookRecovery   = "rcv"
	WalletChallenge   = "wch"
	ApproverKey       = "apk"
	AuditVerification = "avf"
	PayoutSchedule    = "pys"
)

// New returns prefix_<32 hex digits of a UUIDv7>: unique, and ordered by creation time
// when compared as strings, which keeps cursor paging by id stable.
func New(prefix string) string {
	u := uuid.Must(uuid.NewV7())
	var b strings.Builder
	b.Grow(len(prefix) + 1 + 32)
	b.WriteString(prefix)
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(u[:]))
	return b.String()
}

// HasPrefix reports whether id is shaped like an id of that prefix.
func HasPrefix(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"_")
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}
