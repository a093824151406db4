package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DevchainTransaction is one transaction on the simulated chain.
type DevchainTransaction struct {
	Hash        string `gorm:"primaryKey"`
	Chain       string
	Digest      string
	Kind        string
	FromAddress string
	ToAddress   string
	Asset       string
	Amount      decimal.Decimal `gorm:"type:numeric"`
	Status      string
	Failure     string
	BroadcastAt time.Time
	ConfirmsAt  time.Time
	// Submissions counts the broadcasts of this same signed transaction (retries).
	Submissions int `gorm:"default:1"`
}

func (DevchainTransaction) TableName() string { return "devchain_transactions" }

// Devchain transaction states.
const (
	DevchainPending   = "pending"
	DevchainConfirmed = "confirmed"
	DevchainFailed    = "failed"
)

// DevchainBroadcast records a transaction unless one with the same digest exists, and
// returns the stored one: broadcasting the same signed payload twice is one transaction.
func (s *Store) DevchainBroadcast(ctx context.Context, t *DevchainTransaction) (*DevchainTransaction, error) {
	t.Status = DevchainPending
	t.BroadcastAt, t.ConfirmsAt = t.BroadcastAt.UTC(), t.ConfirmsAt.UTC()
	t.Submissions = 1
	// One transaction per digest: the same leg signed and broadcast again is a retry.
	again := clause.OnConflict{Columns: []clause.Column{{Name: "digest"}},
		DoUpdates: clause.Assignments(map[string]any{"submissions": gorm.Expr("devchain_transactions.submissions + 1")})}
	if err := s.with(ctx).Clauses(again).Create(t).Error; err != nil {
		return nil, err
	}
	var cur DevchainTransaction
	if err := s.with(ctx).Where("digest = ?", t.Digest).Take(&cur).Error; err != nil {
		return nil, err
	}
	return &cur, nil
}

// DevchainTransactions returns the simulated chain's transactions of the given digests.
func (s *Store) DevchainTransactions(ctx context.Context, digests []string) ([]DevchainTransaction, error) {
	var out []DevchainTransaction
	for chunk := range slices.Chunk(digests, 500) {
		var part []DevchainTransaction
		if err := s.with(ctx).Where("digest IN ?", chunk).Find(&part).Error; err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// DevchainSettle settles a pending transaction whose confirmation time has come: it fails
// with the reason revert gives, or else applies its transfer (once) and confirms. A
// transfer the sender cannot cover fails with "insufficient funds".
func (s *Store) DevchainSettle(ctx context.Context, hash string, now time.Time, revert func(*DevchainTransaction) string) (*DevchainTransaction, error) {
	var out DevchainTransaction
	err := s.Tx(ctx, func(tx *Store) error {
		if err := tx.forUpdate(ctx).Where("hash = ?", hash).Take(&out).Error; err != nil {
			return notFound(err)
		}
		if out.Status != DevchainPending || now.Before(out.ConfirmsAt) {
			return nil
		}
		out.Status, out.Failure = DevchainConfirmed, revert(&out)
		if out.Failure != "" {
			out.Status = DevchainFailed
		} else if out.Kind == "TRANSFER" {
			err := tx.Tx(ctx, func(inner *Store) error {
				if err := inner.DevchainCredit(ctx, out.Chain, out.FromAddress, out.Asset, out.Amount.Neg()); err != nil {
					return err
				}
				return inner.DevchainCredit(ctx, out.Chain, out.ToAddress, out.Asset, out.Amount)
			})
			if errors.Is(err, ErrInsufficientFunds) {
				out.Status, out.Failure = DevchainFailed, "insufficient funds"
			} else if err != nil {
				return err
			}
		}
		return tx.with(ctx).Model(&DevchainTransaction{}).Where("hash = ?", hash).
			Updates(map[string]any{"status": out.Status, "failure": out.Failure}).Error
	})
	if err != nil {
		return nil, fmt.Errorf("devchain settle %s: %w", hash, err)
	}
	return &out, nil
}
