package store

import (
	"context"
	"errors"

	"github.com/opentreasury/treasury/internal/auth"
)

// The authenticator's lookups (auth.KeyStore, auth.TokenStore, auth.SessionStore): auth
// declares what it reads, in its own terms, so that it imports no storage; these answer
// it from the rows. An unknown hash is not an error to auth, only ok false.

var _ interface {
	auth.KeyStore
	auth.TokenStore
	auth.SessionStore
} = (*Store)(nil)

// AuthKey is the key whose secret hashes to hash, revoked or not.
func (s *Store) AuthKey(ctx context.Context, hash string) (auth.KeyRecord, bool, error) {
	k, err := s.APIKeyBySecretHash(ctx, hash)
	if err != nil {
		return auth.KeyRecord{}, false, lookupErr(err)
	}
	disabled, err := s.organizationDisabled(ctx, k.OrgID)
	if err != nil {
		return auth.KeyRecord{}, false, err
	}
	return auth.KeyRecord{ID: k.ID, OrgID: k.OrgID, App: k.App, Kind: k.Kind, Actions: k.Actions, ResourceIDs: k.ResourceIDs,
		SecretHash: k.SecretHash, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt, CreatedByUser: k.CreatedByUser,
		OrgDisabled: disabled}, true, nil
}

// AuthAccessToken is the access token whose hash is hash, with its client's revocation.
func (s *Store) AuthAccessToken(ctx context.Context, hash string) (auth.TokenRecord, bool, error) {
	t, c, err := s.OAuthTokenByHash(ctx, hash)
	if err != nil {
		return auth.TokenRecord{}, false, lookupErr(err)
	}
	disabled, err := s.organizationDisabled(ctx, t.OrgID)
	if err != nil {
		return auth.TokenRecord{}, false, err
	}
	return auth.TokenRecord{TokenHash: t.TokenHash, ClientID: t.ClientID, OrgID: t.OrgID, App: t.App, Actions: t.Actions,
		ExpiresAt: t.ExpiresAt, ClientRevoked: c.RevokedAt != nil, ClientCreatedByUser: c.CreatedByUser,
		OrgDisabled: disabled}, true, nil
}

// AuthSession is the session whose token hashes to hash, revoked or expired or not, with
// its person.
func (s *Store) AuthSession(ctx context.Context, hash string) (auth.SessionRecord, auth.PersonRecord, bool, error) {
	sess, u, disabled, err := s.SessionByHash(ctx, hash)
	if err != nil {
		return auth.SessionRecord{}, auth.PersonRecord{}, false, lookupErr(err)
	}
	return auth.SessionRecord{TokenHash: sess.TokenHash, UserID: sess.UserID, OrgID: sess.OrgID, CreatedAt: sess.CreatedAt,
			ExpiresAt: sess.ExpiresAt, RevokedAt: sess.RevokedAt},
		auth.PersonRecord{ID: u.ID, OrgID: u.OrgID, Role: u.Role, PasswordChangedAt: u.PasswordChangedAt, OrgDisabled: disabled}, true, nil
}

// AuthGrants are a person's actions per app, comma separated, as member permissions keep
// them.
func (s *Store) AuthGrants(ctx context.Context, userID string) (map[string]string, error) {
	perms, err := s.MemberPermissions(ctx, userID)
	if err != nil {
		return nil, err
	}
	grants := make(map[string]string, len(perms))
	for _, p := range perms {
		grants[p.App] = p.Actions
	}
	return grants, nil
}

// lookupErr is a lookup's error as auth takes it: none for a missing row.
func lookupErr(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
