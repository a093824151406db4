package store

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm/clause"
)

// Errors of a wallet's registration.
var (
	// ErrChallengeUnusable: the challenge is unknown (in this organisation), used or expired.
	ErrChallengeUnusable = errors.New("store: wallet challenge unknown, used or expired")
	// ErrWalletTaken: a wallet with this chain and address is registered already.
	ErrWalletTaken = errors.New("store: a wallet with this address is registered already")
)

// WalletChallenge is the message an organisation signs with a wallet's key to register it.
type WalletChallenge struct {
	ID        string
	OrgID     string
	Chain     string
	Address   string
	Message   string
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
}

func (WalletChallenge) TableName() string { return "wallet_challenges" }

// CreateWalletChallenge stores a challenge.
func (s *Store) CreateWalletChallenge(ctx context.Context, c *WalletChallenge) error {
	return s.with(ctx).Create(c).Error
}

// WalletChallenge finds an organisation's challenge by id, used or expired or not.
func (s *Store) WalletChallenge(ctx context.Context, orgID, id string) (*WalletChallenge, error) {
	var c WalletChallenge
	if err := s.with(ctx).Where("id = ? AND org_id = ?", id, orgID).Take(&c).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// RegisterWallet uses the challenge (once, before it expires at at) and records the
// wallet it proved, in one transaction: ErrChallengeUnusable, or ErrWalletTaken when the
// chain and address are registered already.
func (s *Store) RegisterWallet(ctx context.Context, challengeID string, w *Wallet, at time.Time) error {
	return s.Tx(ctx, func(tx *Store) error {
		res := tx.with(ctx).Model(&WalletChallenge{}).
			Where("id = ? AND org_id = ? AND used_at IS NULL AND expires_at > ?", challengeID, w.OrgID, at.UTC()).
			Update("used_at", at.UTC())
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrChallengeUnusable
		}
		ins := tx.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(w)
		if ins.Error != nil {
			return ins.Error
		}
		if ins.RowsAffected == 0 {
			return ErrWalletTaken
		}
		return nil
	})
}

// ArchiveWallet archives a wallet at at, and reports whether this call did (one archived
// already keeps its first time). ErrNotFound when the organisation has no such wallet.
func (s *Store) ArchiveWallet(ctx context.Context, orgID, id string, at time.Time) (*Wallet, bool, error) {
	res := s.with(ctx).Model(&Wallet{}).Where("id = ? AND org_id = ? AND archived_at IS NULL", id, orgID).Update("archived_at", at.UTC())
	if res.Error != nil {
		return nil, false, res.Error
	}
	w, err := s.Wallet(ctx, orgID, id)
	return w, res.RowsAffected > 0, err
}

// RelabelWallet sets a wallet's label; ErrNotFound when the organisation has no such
// wallet.
func (s *Store) RelabelWallet(ctx context.Context, orgID, id, label string) (*Wallet, error) {
	res := s.with(ctx).Model(&Wallet{}).Where("id = ? AND org_id = ?", id, orgID).Update("label", label)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 0 {
		return nil, ErrNotFound
	}
	return s.Wallet(ctx, orgID, id)
}
