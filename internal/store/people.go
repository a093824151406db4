package store

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/opentreasury/treasury/internal/auth"
)

// ErrEmailTaken means a user with that e-mail address already exists (in any organisation:
// an address signs in to one account).
var ErrEmailTaken = errors.New("store: e-mail address already in use")

// Session is a person's signed-in console session; the cookie's token is kept as a hash.
type Session struct {
	TokenHash string `gorm:"primaryKey"`
	UserID    string
	OrgID     string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt *time.Time
}

func (Session) TableName() string { return "sessions" }

// AddMember creates a member of an organisation with permissions on one app, or answers
// ErrEmailTaken when the address belongs to someone already.
func (s *Store) AddMember(ctx context.Context, u *User, perm MemberPermission) error {
	return s.with(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(u)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrEmailTaken
		}
		perm.UserID = u.ID
		if perm.Actions == "" {
			return nil
		}
		return tx.Create(&perm).Error
	})
}

// UserInOrg finds a user of an organisation by id.
func (s *Store) UserInOrg(ctx context.Context, orgID, id string) (*User, error) {
	var u User
	if err := s.with(ctx).Where("id = ? AND org_id = ?", id, orgID).Take(&u).Error; err != nil {
		return nil, notFound(err)
	}
	return &u, nil
}

// Member is a person of an organisation with the actions they hold on one app.
type Member struct {
	User
	Actions string
}

// ListMembers lists every person of an organisation, oldest first, with their actions on
// app ("" where they hold none).
func (s *Store) ListMembers(ctx context.Context, orgID, app string) ([]Member, error) {
	var out []Member
	err := s.with(ctx).Table("users").
		Select("users.*, COALESCE(member_permissions.actions, '') AS actions").
		Joins("LEFT JOIN member_permissions ON member_permissions.user_id = users.id AND member_permissions.app = ?", app).
		Where("users.org_id = ?", orgID).Order("users.created_at, users.id").Scan(&out).Error
	return out, err
}

// SetMemberPermission replaces a person's actions on one app; empty actions remove them.
func (s *Store) SetMemberPermission(ctx context.Context, perm MemberPermission) error {
	if perm.Actions == "" {
		return s.with(ctx).Where("user_id = ? AND app = ?", perm.UserID, perm.App).Delete(&MemberPermission{}).Error
	}
	return s.with(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "user_id"}, {Name: "app"}},
		DoUpdates: clause.AssignmentColumns([]string{"actions"}),
	}).Create(&perm).Error
}

// SetPassword replaces a person's password hash and ends every session signed in before
// at, so a changed password locks out whoever knew the old one.
func (s *Store) SetPassword(ctx context.Context, userID, hash string, at time.Time) error {
	return s.with(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Model(&User{}).Where("id = ?", userID).
			Updates(map[string]any{"password_hash": hash, "password_changed_at": at.UTC()}).Error
		if err != nil {
			return err
		}
		return tx.Model(&Session{}).Where("user_id = ? AND revoked_at IS NULL", userID).Update("revoked_at", at.UTC()).Error
	})
}

// CreateSession stores a session auth.NewSession issued.
func (s *Store) CreateSession(ctx context.Context, sess auth.SessionRecord) error {
	return s.with(ctx).Create(&Session{TokenHash: sess.TokenHash, UserID: sess.UserID, OrgID: sess.OrgID,
		CreatedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt, RevokedAt: sess.RevokedAt}).Error
}

// SessionByHash finds a session, revoked or expired or not, with its person and whether
// their organisation is disabled (read with the person: a session is read on every
// request it makes).
func (s *Store) SessionByHash(ctx context.Context, hash string) (*Session, *User, bool, error) {
	var sess Session
	if err := s.with(ctx).Where("token_hash = ?", hash).Take(&sess).Error; err != nil {
		return nil, nil, false, notFound(err)
	}
	var person struct {
		User
		OrgDisabled bool
	}
	res := s.with(ctx).Table("users").Select("users.*, organizations.disabled_at IS NOT NULL AS org_disabled").
		Joins("JOIN organizations ON organizations.id = users.org_id").Where("users.id = ?", sess.UserID).Limit(1).Scan(&person)
	if res.Error != nil {
		return nil, nil, false, res.Error
	}
	if res.RowsAffected == 0 {
		return nil, nil, false, ErrNotFound
	}
	return &sess, &person.User, person.OrgDisabled, nil
}

// RevokeSession ends a session (signing out); ending an ended one is not an error.
func (s *Store) RevokeSession(ctx context.Context, hash string, at time.Time) error {
	return s.with(ctx).Model(&Session{}).Where("token_hash = ? AND revoked_at IS NULL", hash).
		Update("revoked_at", at.UTC()).Error
}
