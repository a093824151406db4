package store

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/opentreasury/treasury/internal/ids"
)

// CreateOrganization inserts an organisation.
func (s *Store) CreateOrganization(ctx context.Context, o *Organization) error {
	return s.with(ctx).Create(o).Error
}

// OrganizationExists reports whether an organisation with this id exists.
func (s *Store) OrganizationExists(ctx context.Context, id string) (bool, error) {
	var n int64
	err := s.with(ctx).Model(&Organization{}).Where("id = ?", id).Count(&n).Error
	return n > 0, err
}

// AuditRecorded reports whether an organisation's audit log holds an action at all.
func (s *Store) AuditRecorded(ctx context.Context, orgID, action string) (bool, error) {
	var found []int
	err := s.with(ctx).Model(&AuditLog{}).Select("1").Where("org_id = ? AND action = ?", orgID, action).Limit(1).Find(&found).Error
	return len(found) > 0, err
}

// CreateUser inserts a user with its per-app permissions.
func (s *Store) CreateUser(ctx context.Context, u *User, perms []MemberPermission) error {
	return s.with(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(u).Error; err != nil {
			return err
		}
		for i := range perms {
			perms[i].UserID = u.ID
		}
		if len(perms) == 0 {
			return nil
		}
		return tx.Create(&perms).Error
	})
}

// CreateAPIKey inserts the stored half of a new key.
func (s *Store) CreateAPIKey(ctx context.Context, k *APIKey) error {
	return s.with(ctx).Create(k).Error
}

// APIKeyBySecretHash finds a key by the hash of its secret, revoked or not.
func (s *Store) APIKeyBySecretHash(ctx context.Context, hash string) (*APIKey, error) {
	var k APIKey
	err := s.with(ctx).Where("secret_hash = ?", hash).Take(&k).Error
	if err != nil {
		return nil, notFound(err)
	}
	return &k, nil
}

// TouchAPIKey records that a key was used at the given time.
func (s *Store) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	return s.with(ctx).Model(&APIKey{}).Where("id = ?", id).Update("last_used_at", at.UTC()).Error
}

// RevokeAPIKey marks a key revoked; it stops authenticating at once.
func (s *Store) RevokeAPIKey(ctx context.Context, orgID, id string, at time.Time) error {
	res := s.with(ctx).Model(&APIKey{}).
		Where("id = ? AND org_id = ? AND revoked_at IS NULL", id, orgID).
		Update("revoked_at", at.UTC())
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// CreateOAuthClient inserts the stored half of a client-credentials client.
func (s *Store) CreateOAuthClient(ctx context.Context, c *OAuthClient) error {
	return s.with(ctx).Create(c).Error
}

// OAuthClient finds a client by id.
func (s *Store) OAuthClient(ctx context.Context, id string) (*OAuthClient, error) {
	var c OAuthClient
	if err := s.with(ctx).Where("id = ?", id).Take(&c).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// CredentialRevoked reports whether an API key or OAuth client (by id) is revoked or gone,
// or its organisation disabled.
func (s *Store) CredentialRevoked(ctx context.Context, id string) (bool, error) {
	var model any = &APIKey{}
	if strings.HasPrefix(id, ids.OAuthClient+"_") {
		model = &OAuthClient{}
	}
	// A count, not the column: gorm's Pluck of a nullable time into []*time.Time failed
	// now and then under concurrent connections ("storing driver.Value type <nil> into
	// type *time.Time"), and the check was skipped.
	var live int64
	err := s.with(ctx).Model(model).Where("id = ? AND revoked_at IS NULL", id).
		Where("org_id IN (SELECT id FROM organizations WHERE disabled_at IS NULL)").Count(&live).Error
	if err != nil {
		return false, err
	}
	return live == 0, nil
}

// ListOAuthClients lists the OAuth clients of one app of an organisation, newest first.
func (s *Store) ListOAuthClients(ctx context.Context, orgID, app string) ([]OAuthClient, error) {
	var out []OAuthClient
	err := s.with(ctx).Where("org_id = ? AND app = ?", orgID, app).Order("id DESC").Find(&out).Error
	return out, err
}

// UserByEmail finds a user by e-mail address.
func (s *Store) UserByEmail(ctx context.Context, email string) (*User, error) {
	var u User
	if err := s.with(ctx).Where("email = ?", email).Take(&u).Error; err != nil {
		return nil, notFound(err)
	}
	return &u, nil
}

// MemberPermissions lists the per-app grants of a user.
func (s *Store) MemberPermissions(ctx context.Context, userID string) ([]MemberPermission, error) {
	var out []MemberPermission
	err := s.with(ctx).Where("user_id = ?", userID).Order("app").Find(&out).Error
	return out, err
}

// ListAudit lists an organisation's audit records of the given apps, newest first, after a
// cursor id. With walletIDs, only records about orders from those wallets are listed.
func (s *Store) ListAudit(ctx context.Context, orgID string, apps, walletIDs []string, beforeID string, limit int) ([]AuditLog, error) {
	q := s.with(ctx).Where("org_id = ? AND app IN ?", orgID, apps)
	if len(walletIDs) > 0 {
		q = q.Where("resource_type = ? AND resource_id IN (?)", "order", s.ordersOfWallets(ctx, walletIDs))
	}
	return page[AuditLog](q, beforeID, newestFirst, limit)
}

// Policy returns an app's policy document.
func (s *Store) Policy(ctx context.Context, orgID, app string) (*Policy, error) {
	var p Policy
	if err := s.with(ctx).Where("org_id = ? AND app = ?", orgID, app).Take(&p).Error; err != nil {
		return nil, notFound(err)
	}
	return &p, nil
}

// ListAPIKeys lists the keys of one app of an organisation, newest first.
func (s *Store) ListAPIKeys(ctx context.Context, orgID, app string) ([]APIKey, error) {
	var out []APIKey
	err := s.with(ctx).Where("org_id = ? AND app = ?", orgID, app).Order("id DESC").Find(&out).Error
	return out, err
}

// APIKey returns one key record of an organisation.
func (s *Store) APIKey(ctx context.Context, orgID, id string) (*APIKey, error) {
	var k APIKey
	if err := s.with(ctx).Where("org_id = ? AND id = ?", orgID, id).Take(&k).Error; err != nil {
		return nil, notFound(err)
	}
	return &k, nil
}

// OAuthToken is the stored half of an issued access token.
type OAuthToken struct {
	TokenHash string `gorm:"primaryKey"`
	ClientID  string
	OrgID     string
	App       string
	Actions   string
	Scope     string
	CreatedAt time.Time
	ExpiresAt time.Time
}

func (OAuthToken) TableName() string { return "oauth_tokens" }

// CreateOAuthToken stores an issued access token.
func (s *Store) CreateOAuthToken(ctx context.Context, t *OAuthToken) error {
	t.CreatedAt, t.ExpiresAt = t.CreatedAt.UTC(), t.ExpiresAt.UTC()
	return s.with(ctx).Create(t).Error
}

// OAuthTokenByHash finds a token with its client, so that a revoked client's tokens fail.
func (s *Store) OAuthTokenByHash(ctx context.Context, hash string) (*OAuthToken, *OAuthClient, error) {
	var t OAuthToken
	if err := s.with(ctx).Where("token_hash = ?", hash).Take(&t).Error; err != nil {
		return nil, nil, notFound(err)
	}
	c, err := s.OAuthClient(ctx, t.ClientID)
	return &t, c, err
}

// RevokeOAuthClient revokes a client; its access tokens stop working with it.
func (s *Store) RevokeOAuthClient(ctx context.Context, orgID, id string, at time.Time) error {
	res := s.with(ctx).Model(&OAuthClient{}).Where("id = ? AND org_id = ? AND revoked_at IS NULL", id, orgID).Update("revoked_at", at.UTC())
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}
