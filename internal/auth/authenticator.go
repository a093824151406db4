package auth

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnauthenticated means the token is missing, malformed, unknown, revoked or expired.
// Callers must not tell these apart in what they answer.
var ErrUnauthenticated = errors.New("auth: unauthenticated")

// KeyRecord is a stored API key as the authenticator reads it; the secret itself is only
// ever kept as a hash.
type KeyRecord struct {
	ID    string
	OrgID string
	App   string
	Kind  string
	// Actions and ResourceIDs are comma separated.
	Actions     string
	ResourceIDs string
	SecretHash  string
	LastUsedAt  *time.Time
	RevokedAt   *time.Time
	// CreatedByUser is the person (usr_…) behind the credential that created the key, or "".
	CreatedByUser string
	// OrgDisabled: the operator disabled the key's organisation.
	OrgDisabled bool
}

// TokenRecord is an issued OAuth access token with what the authenticator needs of its
// client.
type TokenRecord struct {
	TokenHash string
	ClientID  string
	OrgID     string
	App       string
	// Actions are comma separated.
	Actions   string
	ExpiresAt time.Time
	// ClientRevoked: the token's client is revoked, which ends its tokens at once.
	ClientRevoked bool
	// ClientCreatedByUser is the person (usr_…) behind the credential that created the
	// client, or "".
	ClientCreatedByUser string
	// OrgDisabled: the operator disabled the client's organisation.
	OrgDisabled bool
}

// The interfaces below are what the authenticator reads and writes of stored credentials.
// They are declared here, in terms of this package, so that auth stays a package of pure
// rules that imports no storage; the store satisfies them. Each lookup reports ok false
// when no record has the hash, and an error only when it could not look.

// KeyStore is what the authenticator reads and writes of stored keys.
type KeyStore interface {
	// AuthKey finds a key by the hash of its secret, revoked or not.
	AuthKey(ctx context.Context, hash string) (k KeyRecord, ok bool, err error)
	TouchAPIKey(ctx context.Context, id string, at time.Time) error
}

// TokenStore is what the authenticator reads of issued OAuth access tokens; a KeyStore
// that also is one lets access tokens through.
type TokenStore interface {
	// AuthAccessToken finds an access token by its hash, with its client; ok is false
	// when there is no such token, or its client no longer exists.
	AuthAccessToken(ctx context.Context, hash string) (t TokenRecord, ok bool, err error)
}

// Authenticator turns a bearer token into a Principal.
type Authenticator struct {
	keys KeyStore
	now  func() time.Time
	// lastUsedGranularity bounds how often lastUsedAt is written for a busy key.
	lastUsedGranularity time.Duration
}

// NewAuthenticator builds an authenticator over the key store.
func NewAuthenticator(keys KeyStore) *Authenticator {
	return &Authenticator{keys: keys, now: time.Now, lastUsedGranularity: time.Minute}
}

// Authenticate checks an API key and returns who it acts as. Any failure to recognise the
// token is ErrUnauthenticated; other errors mean the store could not be asked.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (*Principal, error) {
	kind := KindOf(token)
	// A session token is good only in its cookie, where the CSRF check guards it.
	if kind == "" || kind == KindSession || len(token) > 512 {
		return nil, ErrUnauthenticated
	}
	hash := HashSecret(token)
	if kind == KindAccessToken {
		return a.accessToken(ctx, hash)
	}
	k, found, err := a.keys.AuthKey(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("auth: look up key: %w", err)
	}
	if !found {
		return nil, ErrUnauthenticated
	}
	if !HashMatches(hash, k.SecretHash) || k.Kind != kind || k.RevokedAt != nil || k.OrgDisabled {
		return nil, ErrUnauthenticated
	}
	now := a.now().UTC()
	if k.LastUsedAt == nil || now.Sub(*k.LastUsedAt) >= a.lastUsedGranularity {
		// Best effort: a failed write of lastUsedAt must not fail the request.
		_ = a.keys.TouchAPIKey(ctx, k.ID, now)
	}
	p := &Principal{OrgID: k.OrgID, App: k.App, Kind: k.Kind, ID: k.ID, Person: k.CreatedByUser}
	switch k.Kind {
	case KindSecret:
		p.Actions = append([]string(nil), AllActions...)
	case KindResource:
		p.Actions = ParseActions(k.Actions)
		p.ResourceIDs = ParseActions(k.ResourceIDs)
	case KindPublishable:
		p.Actions = nil
	}
	return p, nil
}

// accessToken checks an OAuth access token: known, not expired, its client not revoked.
func (a *Authenticator) accessToken(ctx context.Context, hash string) (*Principal, error) {
	tokens, ok := a.keys.(TokenStore)
	if !ok {
		return nil, ErrUnauthenticated
	}
	t, found, err := tokens.AuthAccessToken(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("auth: look up token: %w", err)
	}
	if !found || !HashMatches(hash, t.TokenHash) || !a.now().Before(t.ExpiresAt) || t.ClientRevoked || t.OrgDisabled {
		return nil, ErrUnauthenticated
	}
	return &Principal{OrgID: t.OrgID, App: t.App, Kind: KindAccessToken, ID: t.ClientID, Actions: ParseActions(t.Actions),
		ExpiresAt: t.ExpiresAt, Person: t.ClientCreatedByUser}, nil
}
