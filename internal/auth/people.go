package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Password rules: bcrypt reads at most 72 bytes, so a longer password would be silently
// cut; twelve characters keep online guessing hopeless under the sign-in rate limit.
const (
	MinPasswordLength = 12
	MaxPasswordBytes  = 72
)

// ErrWeakPassword is a new password outside the rules above.
var ErrWeakPassword = fmt.Errorf("auth: a password needs %d to %d bytes", MinPasswordLength, MaxPasswordBytes)

// HashPassword is how a person's password is kept at rest (bcrypt, its default cost).
func HashPassword(password string) (string, error) {
	if len(password) < MinPasswordLength || len(password) > MaxPasswordBytes {
		return "", ErrWeakPassword
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	return string(h), err
}

// unknownUserHash is compared against when no user has the address, so that an unknown
// address costs as long to refuse as a wrong password.
var unknownUserHash, _ = bcrypt.GenerateFromPassword([]byte("no user has this address"), bcrypt.DefaultCost)

// PasswordMatches checks a password against a stored hash; an empty hash (no such user)
// still spends a bcrypt comparison and fails.
func PasswordMatches(password, storedHash string) bool {
	if storedHash == "" {
		_ = bcrypt.CompareHashAndPassword(unknownUserHash, []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(storedHash), []byte(password)) == nil
}

// SessionCookie carries a person's session token, for the API and the console alike. It is
// HttpOnly (no script reads it), SameSite=Strict (no other site makes the browser send it)
// and Secure when the browser came over https (package sessioncookie writes it).
const SessionCookie = "treasury_session"

// CSRFHeader carries the session's anti-forgery token on every API write made with a
// session; the console's forms carry it as the field csrf.
const CSRFHeader = "X-CSRF-Token"

// CSRFToken is the anti-forgery token of a session: derived from the session token, so
// it needs no storage, and unguessable without the cookie, which scripts of other sites
// can neither read nor make the browser send (SameSite=Strict).
func CSRFToken(sessionToken string) string {
	sum := sha256.Sum256([]byte("treasury csrf\x00" + sessionToken))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// CSRFTokenMatches compares a presented anti-forgery token in constant time.
func CSRFTokenMatches(sessionToken, presented string) bool {
	return subtle.ConstantTimeCompare([]byte(CSRFToken(sessionToken)), []byte(presented)) == 1
}

// Roles of people: an owner holds every action on every app, a member what they are
// granted.
const (
	RoleOwner  = "owner"
	RoleMember = "member"
)

// SessionRecord is a person's session as the authenticator issues and reads it; the
// cookie's token is only ever kept as a hash.
type SessionRecord struct {
	TokenHash string
	UserID    string
	OrgID     string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt *time.Time
}

// PersonRecord is the person a session signs in, as the authenticator reads them.
type PersonRecord struct {
	ID    string
	OrgID string
	Role  string
	// PasswordChangedAt ends the sessions signed in before it.
	PasswordChangedAt *time.Time
	// OrgDisabled: the operator disabled the person's organisation.
	OrgDisabled bool
}

// SessionStore is what the authenticator reads of sessions and people; a KeyStore that
// also is one lets sessions through.
type SessionStore interface {
	// AuthSession finds a session by its token's hash, with the person it signs in.
	AuthSession(ctx context.Context, hash string) (sess SessionRecord, person PersonRecord, ok bool, err error)
	// AuthGrants are a member's actions in each app they hold any on, comma separated.
	AuthGrants(ctx context.Context, userID string) (map[string]string, error)
}

// AuthenticateSession checks a session cookie's token and returns the person it signs in,
// with their permissions as they are now: a change the owner makes applies to the next
// request, on every replica.
func (a *Authenticator) AuthenticateSession(ctx context.Context, token string) (*Principal, error) {
	sessions, ok := a.keys.(SessionStore)
	if !ok || KindOf(token) != KindSession || len(token) > 512 {
		return nil, ErrUnauthenticated
	}
	hash := HashSecret(token)
	sess, u, found, err := sessions.AuthSession(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("auth: look up session: %w", err)
	}
	if !found {
		return nil, ErrUnauthenticated
	}
	if !SecretMatches(token, sess.TokenHash) || sess.RevokedAt != nil || u.OrgDisabled || !a.now().Before(sess.ExpiresAt) ||
		(u.PasswordChangedAt != nil && sess.CreatedAt.Before(*u.PasswordChangedAt)) {
		return nil, ErrUnauthenticated
	}
	grants := map[string][]string{}
	if u.Role == RoleOwner {
		for _, app := range Apps {
			grants[app] = append([]string(nil), AllActions...)
		}
	} else {
		perms, err := sessions.AuthGrants(ctx, u.ID)
		if err != nil {
			return nil, fmt.Errorf("auth: read permissions: %w", err)
		}
		for app, actions := range perms {
			grants[app] = ParseActions(actions)
		}
	}
	return &Principal{OrgID: u.OrgID, Kind: KindUser, ID: u.ID, Person: u.ID, Role: u.Role, Grants: grants,
		ExpiresAt: sess.ExpiresAt, Session: hash}, nil
}

// NewSession issues a session token for a person, valid for ttl from now. Pass as now the
// moment the password was checked against the stored hash: a password changed after it
// ends the session.
func NewSession(userID, orgID string, now time.Time, ttl time.Duration) (token string, sess SessionRecord, err error) {
	token, err = NewSecret(KindSession)
	if err != nil {
		return "", SessionRecord{}, err
	}
	return token, SessionRecord{TokenHash: HashSecret(token), UserID: userID, OrgID: orgID, CreatedAt: now.UTC(),
		ExpiresAt: now.Add(ttl).UTC()}, nil
}

// NewPassword returns a random initial password (144 bits, 24 characters), shown once to
// whoever creates the account.
func NewPassword() (string, error) {
	buf := make([]byte, 18)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("auth: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(buf), nil
}
