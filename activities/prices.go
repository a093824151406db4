package activities

import (
	"context"

	"github.com/opentreasury/treasury/internal/prices"
	"github.com/opentreasury/treasury/workflows"
)

// Prices holds the activity of the price refresh. The refresher is a named field, not
// embedded: its Refresh must not become an activity of its own.
type Prices struct{ Refresher prices.Refresher }

// RefreshPrices reads every source once (prices.Refresher.Refresh).
func (p *Prices) RefreshPrices(ctx context.Context) (workflows.RefreshPricesResult, error) {
	res, err := p.Refresher.Refresh(ctx)
	return workflows.RefreshPricesResult(res), err
}
