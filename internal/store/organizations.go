package store

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
)

// ErrLinkUnusable means a sign-in link is unknown, used already or expired: one answer
// for all three, so that a guess learns nothing.
var ErrLinkUnusable = errors.New("store: sign-in link unknown, used or expired")

// SignInLink is a one-time link that lets a person set their password: kept as the hash
// of its token, single use.
type SignInLink struct {
	TokenHash string `gorm:"primaryKey"`
	UserID    string
	OrgID     string
	// CreatedBy is "operator" or the credential that invited the person.
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
}

func (SignInLink) TableName() string { return "sign_in_links" }

// Organization finds an organisation by id.
func (s *Store) Organization(ctx context.Context, id string) (*Organization, error) {
	var o Organization
	if err := s.with(ctx).Where("id = ?", id).Take(&o).Error; err != nil {
		return nil, notFound(err)
	}
	return &o, nil
}

// ListOrganizations lists every organisation, oldest first, with its number of people.
func (s *Store) ListOrganizations(ctx context.Context) ([]OrganizationSummary, error) {
	var out []OrganizationSummary
	err := s.with(ctx).Table("organizations").
		Select("organizations.*, (SELECT COUNT(*) FROM users WHERE users.org_id = organizations.id) AS people, " +
			"(SELECT COUNT(*) FROM wallets WHERE wallets.org_id = organizations.id) AS wallets").
		Order("organizations.created_at, organizations.id").Scan(&out).Error
	return out, err
}

// OrganizationSummary is an organisation with how many people and wallets it has.
type OrganizationSummary struct {
	Organization
	People  int64
	Wallets int64
}

// DisableOrganization marks an organisation disabled at at, and reports whether this call
// did (one disabled already keeps its first time). ErrNotFound for an unknown id.
func (s *Store) DisableOrganization(ctx context.Context, id string, at time.Time) (*Organization, bool, error) {
	res := s.with(ctx).Model(&Organization{}).Where("id = ? AND disabled_at IS NULL", id).Update("disabled_at", at.UTC())
	if res.Error != nil {
		return nil, false, res.Error
	}
	o, err := s.Organization(ctx, id)
	return o, res.RowsAffected > 0, err
}

// organizationDisabled reports whether an organisation is disabled; an unknown one is.
func (s *Store) organizationDisabled(ctx context.Context, id string) (bool, error) {
	var live int64
	err := s.with(ctx).Model(&Organization{}).Where("id = ? AND disabled_at IS NULL", id).Count(&live).Error
	return live == 0, err
}

// CreateSignInLink stores a new link and ends the person's links not yet used: the
// newest link is the only one that works.
func (s *Store) CreateSignInLink(ctx context.Context, l *SignInLink) error {
	return s.with(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Model(&SignInLink{}).Where("user_id = ? AND used_at IS NULL", l.UserID).
			Update("expires_at", l.CreatedAt.UTC()).Error
		if err != nil {
			return err
		}
		return tx.Create(l).Error
	})
}

// RedeemSignInLink uses a link once: it sets the person's password hash and ends their
// sessions, in one transaction, and returns the person. A link unknown, used or expired
// at at is ErrLinkUnusable, and so is one of a disabled organisation.
func (s *Store) RedeemSignInLink(ctx context.Context, tokenHash, passwordHash string, at time.Time) (*User, error) {
	var u *User
	err := s.Tx(ctx, func(tx *Store) error {
		res := tx.with(ctx).Model(&SignInLink{}).
			Where("token_hash = ? AND used_at IS NULL AND expires_at > ?", tokenHash, at.UTC()).
			Update("used_at", at.UTC())
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrLinkUnusable
		}
		var l SignInLink
		if err := tx.with(ctx).Where("token_hash = ?", tokenHash).Take(&l).Error; err != nil {
			return err
		}
		if disabled, err := tx.organizationDisabled(ctx, l.OrgID); err != nil || disabled {
			if err == nil {
				err = ErrLinkUnusable
			}
			return err
		}
		if err := tx.SetPassword(ctx, l.UserID, passwordHash, at); err != nil {
			return err
		}
		var err error
		u, err = tx.UserInOrg(ctx, l.OrgID, l.UserID)
		return err
	})
	return u, err
}

// SignInLinkByHash finds a link by its token's hash, used or expired or not.
func (s *Store) SignInLinkByHash(ctx context.Context, hash string) (*SignInLink, error) {
	var l SignInLink
	if err := s.with(ctx).Where("token_hash = ?", hash).Take(&l).Error; err != nil {
		return nil, notFound(err)
	}
	return &l, nil
}
