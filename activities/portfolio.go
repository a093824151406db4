// Package activities holds the side effects the workflows call: store transitions, chain
// reads and writes. Every activity is safe to retry.
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/sdk/activity"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// PortfolioStore is what the balance sync needs of the store (*store.Store).
type PortfolioStore interface {
	ListWalletRefs(ctx context.Context, afterID string, limit int) ([]store.WalletRef, error)
	ReplaceBalances(ctx context.Context, walletID string, amounts map[string]decimal.Decimal, syncedAt time.Time) error
}

// Portfolio holds the activities of the balance sync.
type Portfolio struct {
	Store PortfolioStore
	Chain chain.Adapter
	Log   *slog.Logger
	Now   func() time.Time
}

// ListWalletRefs returns a page of wallets to sync.
func (p *Portfolio) ListWalletRefs(ctx context.Context, in workflows.ListWalletRefsInput) ([]workflows.WalletRef, error) {
	refs, err := p.Store.ListWalletRefs(ctx, in.After, in.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]workflows.WalletRef, len(refs))
	for i, r := range refs {
		out[i] = workflows.WalletRef{ID: r.ID, Chain: r.Chain, Address: r.Address}
	}
	return out, nil
}

// SyncWalletBalances reads each wallet's balances from its chain and stores them. Storing
// replaces the wallet's balances, so a retry writes the same result again. The batch fails
// (and is retried) only when every wallet in it failed.
func (p *Portfolio) SyncWalletBalances(ctx context.Context, in workflows.SyncWalletBalancesInput) (workflows.SyncWalletBalancesResult, error) {
	var res workflows.SyncWalletBalancesResult
	var errs []error
	for _, w := range in.Wallets {
		if err := p.syncOne(ctx, w); err != nil {
			res.Failed++
			errs = append(errs, fmt.Errorf("wallet %s: %w", w.ID, err))
			p.Log.Warn("balance sync failed", "walletId", w.ID, "chain", w.Chain, "error", err.Error())
			continue
		}
		res.Synced++
		activity.RecordHeartbeat(ctx, res.Synced)
	}
	if res.Synced == 0 && res.Failed > 0 {
		return res, errors.Join(errs...)
	}
	return res, nil
}

func (p *Portfolio) syncOne(ctx context.Context, w workflows.WalletRef) error {
	amounts, err := p.Chain.Balances(ctx, w.Chain, w.Address)
	if err != nil {
		return err
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	return p.Store.ReplaceBalances(ctx, w.ID, amounts, now())
}
