package service

import (
	"context"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/store"
)

// What the tests of package service_test read of the package's insides. They are a package
// of their own because their fixture is the dev seed, which makes its organisation through
// this package.

// ValueTotal is what the portfolio values positions at.
func ValueTotal(positions []store.Position, prices map[string]store.Price, now time.Time) decimal.Decimal {
	return value(positions, prices, now).total
}

// CurrentPrices are the prices a read is answered with.
func (s *Service) CurrentPrices(ctx context.Context) (map[string]store.Price, error) {
	return s.currentPrices(ctx)
}
