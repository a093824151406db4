package service

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/store"
)

// DefaultTokenTTL is an access token's lifetime when OAuth.TTL is zero.
const DefaultTokenTTL = 15 * time.Minute

// The refusals of the grant, as RFC 6749 §5.2 names them.
const (
	OAuthInvalidRequest       = "invalid_request"
	OAuthInvalidClient        = "invalid_client"
	OAuthInvalidScope         = "invalid_scope"
	OAuthUnsupportedGrantType = "unsupported_grant_type"
)

// OAuthError is a refusal of the grant. It is not an *Error: the grant answers in RFC
// 6749's terms ({error, error_description}), not with a problem, so it has no Kind.
type OAuthError struct {
	// Code is one of the OAuth… codes above.
	Code        string
	Description string
}

func (e *OAuthError) Error() string { return e.Code + ": " + e.Description }

// OAuth issues access tokens by the client credentials grant (RFC 6749 §4.4). It stands
// apart from Service because no principal asks: the client authenticates with the request
// itself.
type OAuth struct {
	Store *store.Store
	// TTL is an access token's lifetime (DefaultTokenTTL when zero).
	TTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// TokenRequest is a token request as the client sent it.
type TokenRequest struct {
	GrantType    string
	ClientID     string
	ClientSecret string
	// Scope is the scopes asked for, space separated; nil asks for every scope of the
	// client.
	Scope *string
}

// Token is an issued access token.
type Token struct {
	AccessToken string
	ExpiresIn   time.Duration
	// Scope is the scopes granted, space separated.
	Scope string
}

func (o *OAuth) ttl() time.Duration {
	if o.TTL > 0 {
		return o.TTL
	}
	return DefaultTokenTTL
}

func (o *OAuth) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

func oauthRefusal(code, description string) *OAuthError {
	return &OAuthError{Code: code, Description: description}
}

// IssueToken grants an access token to a client that authenticates with its secret, for
// the scopes it asks among its own (all of them when it names none). A refusal is an
// *OAuthError; any other error means the store could not be asked.
func (o *OAuth) IssueToken(ctx context.Context, req TokenRequest) (*Token, error) {
	if req.GrantType == "" {
		return nil, oauthRefusal(OAuthInvalidRequest, "grant_type is required")
	}
	if req.GrantType != "client_credentials" {
		return nil, oauthRefusal(OAuthUnsupportedGrantType, "only client_credentials is supported")
	}
	badClient := oauthRefusal(OAuthInvalidClient, "client authentication failed")
	// An id no client has (not UTF-8 text, or with a NUL in it) never reaches the database,
	// which could not even compare it.
	if !utf8.ValidString(req.ClientID) || strings.ContainsRune(req.ClientID, 0) {
		return nil, badClient
	}
	client, err := o.Store.OAuthClient(ctx, req.ClientID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if req.ClientID == "" || req.ClientSecret == "" || err != nil || !auth.SecretMatches(req.ClientSecret, client.SecretHash) ||
		client.RevokedAt != nil {
		return nil, badClient
	}
	// Its organisation disabled refuses it as its revocation would.
	if revoked, err := o.Store.CredentialRevoked(ctx, client.ID); err != nil || revoked {
		if err == nil {
			err = badClient
		}
		return nil, err
	}
	granted := strings.Fields(client.Scopes)
	requested := granted
	if req.Scope != nil {
		requested = strings.Fields(*req.Scope)
		if len(requested) == 0 {
			return nil, oauthRefusal(OAuthInvalidScope, "scope is empty")
		}
	}
	var actions []string
	for _, s := range requested {
		app, action, _ := strings.Cut(s, ":")
		if !slices.Contains(granted, s) || app != client.App || !auth.IsAction(action) {
			return nil, oauthRefusal(OAuthInvalidScope, s+" is not a scope of this client")
		}
		if !slices.Contains(actions, action) {
			actions = append(actions, action)
		}
	}
	token, err := auth.NewSecret(auth.KindAccessToken)
	if err != nil {
		return nil, err
	}
	now, ttl := o.now(), o.ttl()
	scope := strings.Join(requested, " ")
	err = o.Store.CreateOAuthToken(ctx, &store.OAuthToken{TokenHash: auth.HashSecret(token), ClientID: client.ID, OrgID: client.OrgID,
		App: client.App, Actions: auth.FormatActions(actions), Scope: scope, CreatedAt: now, ExpiresAt: now.Add(ttl)})
	if err != nil {
		return nil, err
	}
	return &Token{AccessToken: token, ExpiresIn: ttl, Scope: scope}, nil
}
