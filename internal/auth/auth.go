// Package auth issues and checks credentials: API keys (sk_, tk_, pk_) and the permission
// model of apps and actions (SPEC section 5).
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Apps are the verticals of the platform; every key, client and permission names one.
var Apps = []string{TreasuryApp, "pay", "trade", "earn", "borrow"}

// TreasuryApp is the organisation's own app: its wallets, portfolio and audit chain.
const TreasuryApp = "treasury"

// Actions a credential may hold on an app.
const (
	ActionRead      = "read"
	ActionWrite     = "write"
	ActionApprove   = "approve"
	ActionSign      = "sign"
	ActionDeveloper = "developer"
)

// AllActions lists every action, in display order.
var AllActions = []string{ActionRead, ActionWrite, ActionApprove, ActionSign, ActionDeveloper}

// Key kinds, which are also the visible prefixes of the secrets.
const (
	KindSecret      = "sk" // full access within its app
	KindResource    = "tk" // an explicit subset of actions (and optionally resources)
	KindPublishable = "pk" // WebSocket connections only
	// KindAccessToken prefixes OAuth access tokens (client credentials).
	KindAccessToken = "at"
	// KindClientSecret prefixes OAuth client secrets.
	KindClientSecret = "ocs"
	// KindSession prefixes a person's console session token, which travels only in the
	// session cookie, never as a bearer token.
	KindSession = "ses"
	// KindSignInLink prefixes the token of a one-time sign-in link; it authenticates nothing
	// by itself, it only lets its person set a password once.
	KindSignInLink = "sil"
	// KindUser is the principal kind of a signed-in person.
	KindUser = "user"
	// KindDevice is the principal kind of a signing device inside the service (the dev
	// bundle's signer): it signs the requests of the wallets whose keys it holds. No
	// token authenticates as one.
	KindDevice = "device"
	// KindSystem is the principal kind of the service acting for an organisation on its
	// own (the dev bundle's seed making the demo organisation): no person and no
	// credential stands behind it, and no token authenticates as one.
	KindSystem = "system"
)

// IsApp reports whether name is a known app.
func IsApp(name string) bool { return slices.Contains(Apps, name) }

// IsAction reports whether name is a known action.
func IsAction(name string) bool { return slices.Contains(AllActions, name) }

// NewSecret returns a fresh secret of the given kind: kind_ followed by 256 random bits.
func NewSecret(kind string) (string, error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("auth: random: %w", err)
	}
	return kind + "_" + base64.RawURLEncoding.EncodeToString(buf), nil
}

// HashSecret is how a secret is kept at rest. The secrets are 256-bit random values, so a
// plain SHA-256 is not open to guessing and lets a key be found by an index lookup.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// SecretMatches compares a presented secret with a stored hash in constant time.
func SecretMatches(secret, storedHash string) bool {
	return HashMatches(HashSecret(secret), storedHash)
}

// HashMatches compares a presented secret's hash (HashSecret) with a stored one in
// constant time.
func HashMatches(hash, storedHash string) bool {
	return subtle.ConstantTimeCompare([]byte(hash), []byte(storedHash)) == 1
}

// Hint is the part of a secret that may be shown again after creation (its kind and
// first characters), so people can tell their keys apart.
func Hint(secret string) string {
	if len(secret) <= 10 {
		return secret
	}
	return secret[:10] + "…"
}

// KindOf returns the kind prefix of a presented token, or "" when it has none we issue.
func KindOf(token string) string {
	for _, k := range []string{KindSecret, KindResource, KindPublishable, KindAccessToken, KindSession} {
		if strings.HasPrefix(token, k+"_") && len(token) > len(k)+1 {
			return k
		}
	}
	return ""
}

// ParseActions turns a stored comma-separated action list into a slice.
func ParseActions(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// FormatActions is the stored form of an action list.
func FormatActions(actions []string) string { return strings.Join(actions, ",") }
