package service_test

import (
	"context"
	. "github.com/opentreasury/treasury/internal/service"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/store"
)

// setBalance makes a wallet hold exactly amount USDC, as the balance sync would.
func (f *fixture) setBalance(t *testing.T, walletID, amount string, at time.Time) {
	t.Helper()
	err := f.svc.Store.ReplaceBalances(context.Background(), walletID, map[string]decimal.Decimal{"USDC": decimal.RequireFromString(amount)}, at)
	if err != nil {
		t.Fatal(err)
	}
}

// A portfolio read is at most ValuationMaxAge older than the balances it values: within
// the bound the valuation may be the earlier one, past it never; 0 reads afresh.
func TestPortfolioIsNeverOlderThanTheValuationMaxAge(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	clock := time.Now().UTC().Add(time.Hour) // after the seed's sync
	f.svc.Now = func() time.Time { return clock }
	f.svc.ValuationMaxAge = 2 * time.Second
	who := f.as(t, f.creds.Keys["treasury"].SK)
	wallet := f.creds.Wallets[0].ID
	total := func() string {
		t.Helper()
		p, err := f.svc.Portfolio(ctx, who)
		if err != nil {
			t.Fatal(err)
		}
		return p.TotalUSD.StringFixedBank(2)
	}

	f.setBalance(t, wallet, "0", clock)
	before := total()
	f.setBalance(t, wallet, "1000", clock)
	clock = clock.Add(1900 * time.Millisecond)
	if got := total(); got != before {
		t.Fatalf("within the max age the portfolio was valued again (%s → %s): nothing was remembered", before, got)
	}
	clock = clock.Add(100 * time.Millisecond)
	after := total()
	if d := decimal.RequireFromString(after).Sub(decimal.RequireFromString(before)); !d.Equal(decimal.NewFromInt(1000)) {
		t.Fatalf("at the max age the portfolio still values the old balance: %s then %s", before, after)
	}

	f.svc.ValuationMaxAge = 0
	f.setBalance(t, wallet, "0", clock)
	if got := total(); got != before {
		t.Fatalf("with no max age the portfolio is %s, want %s at once", got, before)
	}
}

// A key restricted to some wallets is never answered with the organisation's portfolio,
// nor another reach's.
func TestPortfolioIsRememberedPerReach(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.svc.ValuationMaxAge = time.Hour
	all := f.as(t, f.creds.Keys["treasury"].SK)
	w0, w1 := f.creds.Wallets[0].ID, f.creds.Wallets[1].ID
	f.setBalance(t, w0, "100", time.Now())
	f.setBalance(t, w1, "7", time.Now())
	whole, err := f.svc.Portfolio(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{w0, w1} {
		only := all
		p := *all.Principal
		p.ResourceIDs = []string{id}
		only.Principal = &p
		got, err := f.svc.Portfolio(ctx, only)
		if err != nil {
			t.Fatal(err)
		}
		positions, err := f.svc.Store.ListPositions(ctx, all.OrgID, nil, 0, id)
		if err != nil {
			t.Fatal(err)
		}
		prices, err := f.svc.Store.Prices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := ValueTotal(positions, prices, time.Now()); !got.TotalUSD.Equal(want) || got.WalletCount != 1 {
			t.Fatalf("restricted to %s: %s over %d wallets, want %s over 1 (whole organisation: %s over %d)",
				id, got.TotalUSD, got.WalletCount, want, whole.TotalUSD, whole.WalletCount)
		}
	}
}

// Prices set are used by order creation within the max age.
func TestPricesAreReadAgainAfterTheValuationMaxAge(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	clock := time.Now().UTC()
	f.svc.Now = func() time.Time { return clock }
	f.svc.ValuationMaxAge = 2 * time.Second
	price := func() string {
		t.Helper()
		p, err := f.svc.CurrentPrices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p["USDC"].USDPrice.String()
	}
	was := price()
	if err := f.svc.Store.UpsertPrice(ctx, &store.Price{Asset: "USDC", USDPrice: decimal.RequireFromString("0.5"), UpdatedAt: clock}); err != nil {
		t.Fatal(err)
	}
	if got := price(); got != was {
		t.Fatalf("price within the max age = %s, want the remembered %s", got, was)
	}
	clock = clock.Add(2 * time.Second)
	if got := price(); got != "0.5" {
		t.Fatalf("price past the max age = %s, want 0.5", got)
	}
}
