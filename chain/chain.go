// Package chain is the boundary to blockchains: the Adapter interface the workers use,
// and Devchain, a simulated chain for development and tests.
package chain

import (
	"context"

	"github.com/shopspring/decimal"
)

// Adapter is what the service needs of a chain. A production deployment supplies an
// implementation backed by real nodes; the dev bundle uses Devchain.
type Adapter interface {
	// Balances returns every asset amount held by an address on a chain.
	Balances(ctx context.Context, chain, address string) (map[string]decimal.Decimal, error)
}
