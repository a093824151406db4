package store

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm/clause"
)

// ApproverKey is a public key an approver signs decisions with (SPEC 3.5a): a person's
// passkey, or the key an approving credential was created with.
type ApproverKey struct {
	ID    string
	OrgID string
	// Scheme is ed25519, secp256k1 or p256; PublicKey its bytes in standard base64.
	Scheme    string
	PublicKey string
	// Kind is passkey or key.
	Kind string
	// CredentialID is the key_… or oac_… it belongs to; UserID the person, for a passkey.
	CredentialID *string
	UserID       *string
	CreatedAt    time.Time
	RevokedAt    *time.Time
}

func (ApproverKey) TableName() string { return "approver_keys" }

// ErrApproverKeyTaken: the public key is an approver key of the organisation already,
// revoked or not. One key is one approver: shown under a second id, it would count twice.
var ErrApproverKeyTaken = errors.New("store: the public key is an approver key already")

// CreateApproverKey stores an approver key, or answers ErrApproverKeyTaken.
func (s *Store) CreateApproverKey(ctx context.Context, k *ApproverKey) error {
	res := s.with(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "org_id"}, {Name: "public_key"}}, DoNothing: true}).Create(k)
	if res.Error == nil && res.RowsAffected == 0 {
		return ErrApproverKeyTaken
	}
	return res.Error
}

// ApproverKey reads one of an organisation's approver keys, revoked or not.
func (s *Store) ApproverKey(ctx context.Context, orgID, id string) (*ApproverKey, error) {
	var k ApproverKey
	err := s.with(ctx).Where("id = ? AND org_id = ?", id, orgID).Take(&k).Error
	return &k, notFound(err)
}

// ListApproverKeys reads a page of an organisation's approver keys by id (newest first),
// those after afterID when it is set.
func (s *Store) ListApproverKeys(ctx context.Context, orgID, afterID string, limit int) ([]ApproverKey, error) {
	q := s.with(ctx).Where("org_id = ?", orgID)
	if afterID != "" {
		q = q.Where("id < ?", afterID)
	}
	var out []ApproverKey
	return out, q.Order("id DESC").Limit(limit).Find(&out).Error
}

// RevokeApproverKeysOf revokes the approver keys of a credential that is being revoked.
func (s *Store) RevokeApproverKeysOf(ctx context.Context, orgID, credentialID string, at time.Time) error {
	return s.with(ctx).Model(&ApproverKey{}).Where("org_id = ? AND credential_id = ? AND kind = ? AND revoked_at IS NULL", orgID, credentialID, "key").
		Update("revoked_at", at.UTC()).Error
}

// AttachApproverKey stores an approver key of an existing API key (k.CredentialID) and
// names it on the key.
func (s *Store) AttachApproverKey(ctx context.Context, k *ApproverKey) error {
	if k.CredentialID == nil {
		return ErrNotFound
	}
	return s.Tx(ctx, func(tx *Store) error {
		if err := tx.CreateApproverKey(ctx, k); err != nil {
			return err
		}
		res := tx.with(ctx).Model(&APIKey{}).Where("id = ? AND org_id = ?", *k.CredentialID, k.OrgID).Update("approver_key_id", k.ID)
		if res.Error == nil && res.RowsAffected == 0 {
			return ErrNotFound
		}
		return res.Error
	})
}

// PasskeysOf reads a person's passkeys, newest first, revoked ones included.
func (s *Store) PasskeysOf(ctx context.Context, orgID, userID string) ([]ApproverKey, error) {
	var out []ApproverKey
	return out, s.with(ctx).Where("org_id = ? AND user_id = ? AND kind = ?", orgID, userID, "passkey").Order("id DESC").Find(&out).Error
}

// RevokeApproverKey revokes one approver key.
func (s *Store) RevokeApproverKey(ctx context.Context, orgID, id string, at time.Time) error {
	return s.with(ctx).Model(&ApproverKey{}).Where("org_id = ? AND id = ? AND revoked_at IS NULL", orgID, id).
		Update("revoked_at", at.UTC()).Error
}

// passkeyRegistration is a person's passkey registration under way: the WebAuthn session
// (its challenge) between the options sent to the browser and its answer.
type passkeyRegistration struct {
	UserID    string `gorm:"primaryKey"`
	Session   string
	ExpiresAt time.Time
}

func (passkeyRegistration) TableName() string { return "passkey_registrations" }

// SavePasskeyRegistration keeps a person's registration under way, replacing one they
// started before.
func (s *Store) SavePasskeyRegistration(ctx context.Context, userID, session string, expires time.Time) error {
	return s.with(ctx).Clauses(clause.OnConflict{UpdateAll: true}).
		Create(&passkeyRegistration{UserID: userID, Session: session, ExpiresAt: expires.UTC()}).Error
}

// TakePasskeyRegistration reads and ends a person's registration under way, unless it
// expired before now (ErrNotFound then, as when there is none): a challenge serves once.
func (s *Store) TakePasskeyRegistration(ctx context.Context, userID string, now time.Time) (string, error) {
	var r passkeyRegistration
	err := s.Tx(ctx, func(tx *Store) error {
		if err := tx.with(ctx).Where("user_id = ?", userID).Take(&r).Error; err != nil {
			return notFound(err)
		}
		// Deleted by this transaction or by none: two answers to one challenge, at once,
		// cannot both use it.
		res := tx.with(ctx).Where("user_id = ? AND session = ?", userID, r.Session).Delete(&passkeyRegistration{})
		if res.Error == nil && res.RowsAffected == 0 {
			return ErrNotFound
		}
		return res.Error
	})
	if err != nil {
		return "", err
	}
	if !r.ExpiresAt.After(now) {
		return "", ErrNotFound
	}
	return r.Session, nil
}
