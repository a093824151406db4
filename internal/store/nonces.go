package store

import (
	"context"
	"strings"

	"gorm.io/gorm/clause"
)

// accountNonce is the next nonce the service assigns to an address on a chain.
type accountNonce struct {
	Chain     string `gorm:"primaryKey"`
	Address   string `gorm:"primaryKey"`
	NextNonce uint64
}

func (accountNonce) TableName() string { return "account_nonces" }

// releasedNonce is a nonce given back below the address's next one: a hole to fill first.
type releasedNonce struct {
	Chain   string `gorm:"primaryKey"`
	Address string `gorm:"primaryKey"`
	Nonce   uint64 `gorm:"primaryKey"`
}

func (releasedNonce) TableName() string { return "released_nonces" }

// lockNonces returns the address's nonce row, created at floor if it has none, locked
// until the transaction ends: every nonce change of one address is serialised on it.
func (s *Store) lockNonces(ctx context.Context, chainName, address string, floor uint64) (*accountNonce, error) {
	row := accountNonce{Chain: chainName, Address: strings.ToLower(address), NextNonce: floor}
	if err := s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return nil, err
	}
	var cur accountNonce
	err := s.forUpdate(ctx).Where("chain = ? AND address = ?", row.Chain, row.Address).Take(&cur).Error
	return &cur, err
}

// TakeNonce assigns the next nonce of an address, inside the caller's transaction (the
// step that records the signing request), so an assignment rolled back never happened.
// It fills a released hole first, lowest first; it never goes below floor, the count of
// transactions the chain has already mined from the address (it may have sent some
// without this service).
func (s *Store) TakeNonce(ctx context.Context, chainName, address string, floor uint64) (uint64, error) {
	cur, err := s.lockNonces(ctx, chainName, address, floor)
	if err != nil {
		return 0, err
	}
	holes := s.with(ctx).Where("chain = ? AND address = ?", cur.Chain, cur.Address)
	if err := holes.Where("nonce < ?", floor).Delete(&releasedNonce{}).Error; err != nil {
		return 0, err
	}
	var lowest []releasedNonce
	err = s.with(ctx).Where("chain = ? AND address = ?", cur.Chain, cur.Address).Order("nonce").Limit(1).Find(&lowest).Error
	if err != nil {
		return 0, err
	}
	if len(lowest) == 1 {
		return lowest[0].Nonce, s.with(ctx).Delete(&lowest[0]).Error
	}
	n := max(cur.NextNonce, floor)
	err = s.with(ctx).Model(&accountNonce{}).Where("chain = ? AND address = ?", cur.Chain, cur.Address).
		Update("next_nonce", n+1).Error
	return n, err
}

// ReleaseNonce gives back a nonce whose transaction will never be signed. The highest
// nonce out is simply taken back (with any holes just below it); a lower one becomes a hole
// the next TakeNonce fills, so the address's nonces stay gap-free.
func (s *Store) ReleaseNonce(ctx context.Context, chainName, address string, nonce uint64) error {
	cur, err := s.lockNonces(ctx, chainName, address, 0)
	if err != nil {
		return err
	}
	if nonce >= cur.NextNonce {
		return nil // never assigned, or already given back
	}
	if nonce+1 < cur.NextNonce {
		return s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).
			Create(&releasedNonce{Chain: cur.Chain, Address: cur.Address, Nonce: nonce}).Error
	}
	next := nonce
	for next > 0 {
		var hole []releasedNonce
		err := s.with(ctx).Where("chain = ? AND address = ? AND nonce = ?", cur.Chain, cur.Address, next-1).Find(&hole).Error
		if err != nil {
			return err
		}
		if len(hole) == 0 {
			break
		}
		if err := s.with(ctx).Delete(&hole[0]).Error; err != nil {
			return err
		}
		next--
	}
	return s.with(ctx).Model(&accountNonce{}).Where("chain = ? AND address = ?", cur.Chain, cur.Address).
		Update("next_nonce", next).Error
}
