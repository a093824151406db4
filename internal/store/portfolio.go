package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// CreateWallet inserts a wallet.
func (s *Store) CreateWallet(ctx context.Context, w *Wallet) error {
	return s.with(ctx).Create(w).Error
}

// SetAutoSign marks wallets as signed by the dev bundle's in-process signer (autoSign).
// Only the dev seed does: a real organisation's wallets are signed by its own devices.
func (s *Store) SetAutoSign(ctx context.Context, orgID string, walletIDs []string) error {
	return s.with(ctx).Model(&Wallet{}).Where("org_id = ? AND id IN ?", orgID, walletIDs).Update("auto_sign", true).Error
}

// Wallet returns one wallet of an organisation; another organisation's wallet is not found.
func (s *Store) Wallet(ctx context.Context, orgID, id string) (*Wallet, error) {
	var w Wallet
	if err := s.take(ctx, &w, walletOfOrg, orgID, id); err != nil {
		return nil, err
	}
	return &w, nil
}

var walletOfOrg = sqlStatement(`org_id = ? AND id = ?`)

// ListWallets pages through an organisation's wallets in id order; only, when given,
// keeps just those wallets.
func (s *Store) ListWallets(ctx context.Context, orgID, afterID string, limit int, only ...string) ([]Wallet, error) {
	q := inWallets(s.with(ctx).Where("org_id = ?", orgID), "id", only)
	return page[Wallet](q, afterID, oldestFirst, limit)
}

// CountWallets counts an organisation's wallets; only, when given, counts just those.
func (s *Store) CountWallets(ctx context.Context, orgID string, only ...string) (int64, error) {
	var n int64
	err := inWallets(s.with(ctx).Model(&Wallet{}).Where("org_id = ?", orgID), "id", only).Count(&n).Error
	return n, err
}

// WalletRef is what the balance sync needs to know of a wallet.
type WalletRef struct {
	ID      string
	Chain   string
	Address string
}

// ListWalletRefs pages through every wallet of every organisation, for the balance sync.
func (s *Store) ListWalletRefs(ctx context.Context, afterID string, limit int) ([]WalletRef, error) {
	q := s.with(ctx).Model(&Wallet{}).Select("id, chain, address")
	if afterID != "" {
		q = q.Where("id > ?", afterID)
	}
	var out []WalletRef
	err := q.Order("id").Limit(limit).Scan(&out).Error
	return out, err
}

// Position is one asset held in one wallet.
type Position struct {
	WalletID string
	Chain    string
	Asset    string
	Amount   decimal.Decimal
	SyncedAt time.Time
}

// PositionKey orders positions: by wallet, then asset.
type PositionKey struct {
	WalletID string
	Asset    string
}

// ListPositions returns an organisation's balances ordered by wallet and asset, after a key
// when one is given, at most limit of them (0: all); only, when given, keeps just those
// wallets' balances.
func (s *Store) ListPositions(ctx context.Context, orgID string, after *PositionKey, limit int, only ...string) ([]Position, error) {
	q := inWallets(s.positions(ctx).Where("w.org_id = ?", orgID), "b.wallet_id", only)
	if after != nil {
		q = q.Where("(b.wallet_id > ? OR (b.wallet_id = ? AND b.asset > ?))", after.WalletID, after.WalletID, after.Asset)
	}
	if limit > 0 {
		q = q.Limit(limit)
	}
	var out []Position
	err := q.Order("b.wallet_id, b.asset").Scan(&out).Error
	return out, err
}

// PositionsOfWallets returns the balances of the given wallets of an organisation.
func (s *Store) PositionsOfWallets(ctx context.Context, orgID string, walletIDs []string) ([]Position, error) {
	if len(walletIDs) == 0 {
		return nil, nil
	}
	var out []Position
	err := s.positions(ctx).Where("w.org_id = ? AND b.wallet_id IN ?", orgID, walletIDs).
		Order("b.wallet_id, b.asset").Scan(&out).Error
	return out, err
}

func (s *Store) positions(ctx context.Context) *gorm.DB {
	return s.with(ctx).Table("balances AS b").
		Select("b.wallet_id, w.chain, b.asset, b.amount, b.synced_at").
		Joins("JOIN wallets AS w ON w.id = b.wallet_id")
}

// LastWalletSync returns the most recent balance sync among an organisation's wallets (only
// those of only, when given), nil when none has been synced.
func (s *Store) LastWalletSync(ctx context.Context, orgID string, only ...string) (*time.Time, error) {
	var w Wallet
	err := inWallets(s.with(ctx).Select("synced_at").Where("org_id = ? AND synced_at IS NOT NULL", orgID), "id", only).
		Order("synced_at DESC").Limit(1).Take(&w).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return w.SyncedAt, err
}

// ReplaceBalances stores a wallet's balances as read from the chain at syncedAt: assets
// no longer held are removed, the rest upserted, and the wallet's sync time moved forward.
// A read older than the one already stored (a slow, retried attempt) changes nothing.
func (s *Store) ReplaceBalances(ctx context.Context, walletID string, amounts map[string]decimal.Decimal, syncedAt time.Time) error {
	syncedAt = syncedAt.UTC()
	for asset, amt := range amounts {
		if amt.IsNegative() {
			return fmt.Errorf("store: negative balance %s %s for wallet %s", amt, asset, walletID)
		}
	}
	return s.Tx(ctx, func(tx *Store) error {
		var w Wallet
		if err := tx.forUpdate(ctx).Select("id, synced_at").Where("id = ?", walletID).Take(&w).Error; err != nil {
			return notFound(err)
		}
		if w.SyncedAt != nil && w.SyncedAt.After(syncedAt) {
			return nil
		}
		db := tx.with(ctx)
		assets := make([]string, 0, len(amounts))
		rows := make([]Balance, 0, len(amounts))
		for asset, amt := range amounts {
			assets = append(assets, asset)
			rows = append(rows, Balance{WalletID: walletID, Asset: asset, Amount: amt, SyncedAt: syncedAt})
		}
		del := db.Where("wallet_id = ?", walletID)
		if len(assets) > 0 {
			del = del.Where("asset NOT IN ?", assets)
		}
		if err := del.Delete(&Balance{}).Error; err != nil {
			return err
		}
		if len(rows) > 0 {
			err := db.Clauses(clause.OnConflict{
				Columns:   []clause.Column{{Name: "wallet_id"}, {Name: "asset"}},
				DoUpdates: clause.AssignmentColumns([]string{"amount", "synced_at"}),
			}).Create(&rows).Error
			if err != nil {
				return err
			}
		}
		return db.Model(&Wallet{}).Where("id = ?", walletID).Update("synced_at", syncedAt).Error
	})
}

// UpsertPrice sets the USD price of an asset, whatever the one kept.
func (s *Store) UpsertPrice(ctx context.Context, p *Price) error {
	if p.USDPrice.IsNegative() {
		return fmt.Errorf("store: negative price %s for %s", p.USDPrice, p.Asset)
	}
	return s.with(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "asset"}},
		DoUpdates: clause.AssignmentColumns(priceColumns),
	}).Create(p).Error
}

var priceColumns = []string{"usd_price", "updated_at", "source", "round", "read_at", "stale_after"}

// RecordPrice keeps a reading of an asset's price unless the one kept is newer (updated
// later by its source): a slow read, or a retried one, never moves a price back. A reading
// of the same moment replaces the kept one, so a change of source or of heartbeat takes.
// It reports whether the reading was kept.
func (s *Store) RecordPrice(ctx context.Context, p *Price) (bool, error) {
	if !p.USDPrice.IsPositive() {
		return false, fmt.Errorf("store: price %s for %s is not positive", p.USDPrice, p.Asset)
	}
	p.UpdatedAt = p.UpdatedAt.UTC()
	kept := false
	err := s.Tx(ctx, func(tx *Store) error {
		var was Price
		err := tx.forUpdate(ctx).Select("asset, updated_at").Where("asset = ?", p.Asset).Take(&was).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
		case err != nil:
			return err
		case was.UpdatedAt.After(p.UpdatedAt):
			return nil
		}
		kept = true
		return tx.UpsertPrice(ctx, p)
	})
	return kept, err
}

// DeletePricesExcept deletes the prices of every asset but those named: an asset no source
// prices any more has no price, rather than its last one forever.
func (s *Store) DeletePricesExcept(ctx context.Context, assets []string) (int64, error) {
	q := s.with(ctx)
	if len(assets) > 0 {
		q = q.Where("asset NOT IN ?", assets)
	} else {
		q = q.Where("1 = 1")
	}
	res := q.Delete(&Price{})
	return res.RowsAffected, res.Error
}

// Prices returns every kept price by asset.
func (s *Store) Prices(ctx context.Context) (map[string]Price, error) {
	var rows []Price
	if err := s.with(ctx).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]Price, len(rows))
	for _, p := range rows {
		out[p.Asset] = p
	}
	return out, nil
}

// ChainHoldings returns, by address, the recorded balances of every wallet on a chain:
// what its last sync read (for a wallet the dev seed made and nothing has synced yet, what
// the seed planned it to hold, which the dev chains fund it with).
func (s *Store) ChainHoldings(ctx context.Context, chain string) (map[string]map[string]decimal.Decimal, error) {
	var rows []struct {
		Address, Asset string
		Amount         decimal.Decimal
	}
	err := s.with(ctx).Table("balances AS b").Select("w.address, b.asset, b.amount").
		Joins("JOIN wallets AS w ON w.id = b.wallet_id").Where("w.chain = ?", chain).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]decimal.Decimal{}
	for _, r := range rows {
		if out[r.Address] == nil {
			out[r.Address] = map[string]decimal.Decimal{}
		}
		out[r.Address][r.Asset] = r.Amount
	}
	return out, nil
}
