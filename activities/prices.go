package activities

import (
	"context"

	"github.com/opentreasury/treasury/internal/prices"
	"github.com/opentreasury/treasury/workflows"
)

// Prices holds the activity of the price refresh.
type Prices struct{ prices.Refresher }

// RefreshPrices reads every source once (prices.Refresher.Refresh).
func (p *Prices) RefreshPrices(ctx context.Context) (workflows.RefreshPricesResult, error) {
	res, err := p.Refresh(ctx)
	return workflows.RefreshPricesResult(res), err
}
