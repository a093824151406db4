package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opentreasury/treasury/store"
)

// ErrUnauthenticated means the token is missing, malformed, unknown, revoked or expired.
// Callers must not tell these apart in what they answer.
var ErrUnauthenticated = errors.New("auth: unauthenticated")

// KeyStore is what the authenticator reads and writes of stored keys.
type KeyStore interface {
	APIKeyBySecretHash(ctx context.Context, hash string) (*store.APIKey, error)
	TouchAPIKey(ctx context.Context, id string, at time.Time) error
}

// TokenStore is what the authenticator reads of issued OAuth access tokens; a KeyStore
// that also is one lets access tokens through.
type TokenStore interface {
	OAuthTokenByHash(ctx context.Context, hash string) (*store.OAuthToken, *store.OAuthClient, error)
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
		return a.accessToken(ctx, token, hash)
	}
	k, err := a.keys.APIKeyBySecretHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up key: %w", err)
	}
	if !SecretMatches(token, k.SecretHash) || k.Kind != kind || k.RevokedAt != nil {
		return nil, ErrUnauthenticated
	}
	now := a.now().UTC()
	if k.LastUsedAt == nil || now.Sub(*k.LastUsedAt) >= a.lastUsedGranularity {
		// Best effort: a failed write of lastUsedAt must not fail the request.
		_ = a.keys.TouchAPIKey(ctx, k.ID, now)
	}
	p := &Principal{OrgID: k.OrgID, App: k.App, Kind: k.Kind, ID: k.ID, Person: k.CreatedBy}
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
func (a *Authenticator) accessToken(ctx context.Context, token, hash string) (*Principal, error) {
	tokens, ok := a.keys.(TokenStore)
	if !ok {
		return nil, ErrUnauthenticated
	}
	t, client, err := tokens.OAuthTokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up token: %w", err)
	}
	if !SecretMatches(token, t.TokenHash) || !a.now().Before(t.ExpiresAt) || client.RevokedAt != nil {
		return nil, ErrUnauthenticated
	}
	return &Principal{OrgID: t.OrgID, App: t.App, Kind: KindAccessToken, ID: t.ClientID, Actions: ParseActions(t.Actions),
		ExpiresAt: t.ExpiresAt, Person: client.CreatedBy}, nil
}
