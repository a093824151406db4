package chain

import (
	"context"
	"fmt"
	"slices"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/store"
)

// Devchain is a SIMULATED chain: no network, no consensus. Its ledger lives in the
// service's own database (table devchain_accounts), so a restart loses nothing. It exists
// so the whole lifecycle can run on a laptop and in tests; replace it with a real Adapter
// for anything that moves real funds.
type Devchain struct {
	store *store.Store
}

// DevchainChains are the chains the simulation knows.
var DevchainChains = []string{"ethereum", "polygon", "solana"}

// NativeAssets is the fee-paying asset of each simulated chain.
var NativeAssets = map[string]string{"ethereum": "ETH", "polygon": "MATIC", "solana": "SOL"}

// NewDevchain returns the simulated chain over the store.
func NewDevchain(s *store.Store) *Devchain { return &Devchain{store: s} }

// Balances reads an address's simulated balances.
func (d *Devchain) Balances(ctx context.Context, chainName, address string) (map[string]decimal.Decimal, error) {
	if !slices.Contains(DevchainChains, chainName) {
		return nil, fmt.Errorf("devchain: unknown chain %q", chainName)
	}
	return d.store.DevchainBalances(ctx, chainName, address)
}

// Fund credits an address on the simulated chain, as a faucet would.
func (d *Devchain) Fund(ctx context.Context, chainName, address, asset string, amount decimal.Decimal) error {
	if !slices.Contains(DevchainChains, chainName) {
		return fmt.Errorf("devchain: unknown chain %q", chainName)
	}
	if !amount.IsPositive() {
		return fmt.Errorf("devchain: fund amount must be positive, got %s", amount)
	}
	return d.store.DevchainCredit(ctx, chainName, address, asset, amount)
}
