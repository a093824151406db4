package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// Limits are in USD, so an order whose asset has no fresh price fails closed: create and
// evaluate answer 422 price_unavailable naming the asset's field (a trade's sellAsset)
// and when the price was last updated; positions show priceAt and a null value at a stale
// price, and the portfolio names the assets its totals leave out. A fresh round lets
// orders in again.
func TestOrdersFailClosedWithoutAFreshPrice(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		f := newFixtureOn(t, s)
		eth := f.creds.Wallets[0].ID
		if f.creds.Wallets[0].Chain != "ethereum" {
			t.Fatalf("wallet 0 is on %s", f.creds.Wallets[0].Chain)
		}
		updated := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
		staleAfter := updated.Add(2 * time.Hour)
		if err := s.UpsertPrice(ctx, &store.Price{Asset: "WBTC", USDPrice: decimal.NewFromInt(60000), UpdatedAt: updated,
			Source: "feed:ethereum:0xfeed", StaleAfter: &staleAfter}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeletePricesExcept(ctx, []string{"ETH", "USDC", "WBTC", "SOL"}); err != nil { // MATIC has none
			t.Fatal(err)
		}
		payment := func(asset, amount string) string {
			return `{"walletId":"` + eth + `","asset":"` + asset + `","amount":"` + amount + `","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
		}
		refusals := []struct {
			target, key, body, field, detail string
		}{
			{"/api/v1/payments", f.creds.Keys["pay"].SK, payment("WBTC", "0.1"), "asset", updated.Format(time.RFC3339)},
			{"/api/v1/policies/pay/evaluate", f.creds.Keys["pay"].SK, payment("WBTC", "0.1"), "asset", "stale"},
			{"/api/v1/trade-orders", f.creds.Keys["trade"].SK, `{"walletId":"` + eth + `","sellAsset":"WBTC","buyAsset":"ETH","sellAmount":"0.5","maxSlippageBps":50}`, "sellAsset", "stale"},
			{"/api/v1/earn-orders", f.creds.Keys["earn"].SK, `{"walletId":"` + eth + `","protocol":"aave","action":"deposit","asset":"WBTC","amount":"0.1"}`, "asset", "stale"},
		}
		for _, tc := range refusals {
			r := f.post(t, tc.target, tc.key, tc.body)
			r.wantProblem(t, 422, apitypes.CodePriceUnavailable)
			if len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != tc.field || !strings.Contains(r.problem.Detail, tc.detail) ||
				!strings.Contains(r.problem.Detail, "WBTC") {
				t.Fatalf("%s: %s", tc.target, r.body)
			}
		}
		// A price that never was: the other code path, the same answer.
		polygon := ""
		for _, w := range f.creds.Wallets {
			if w.Chain == "polygon" {
				polygon = w.ID
			}
		}
		r := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, `{"walletId":"`+polygon+`","asset":"MATIC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
		r.wantProblem(t, 422, apitypes.CodePriceUnavailable)
		if len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != "asset" || !strings.Contains(r.problem.Detail, "MATIC has no USD price") {
			t.Fatalf("MATIC without a price: %s", r.body)
		}
		// Another asset is unaffected.
		if r := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, payment("USDC", "5")); r.status != 201 {
			t.Fatalf("a USDC payment beside a stale WBTC: %d %s", r.status, r.body)
		}

		// The reads: WBTC's value is null with its priceAt, the totals leave it out.
		if err := s.ReplaceBalances(ctx, eth, map[string]decimal.Decimal{"ETH": decimal.NewFromInt(1), "WBTC": decimal.NewFromInt(2), "MATIC": decimal.Zero}, time.Now()); err != nil {
			t.Fatal(err)
		}
		treasury := f.creds.Keys["treasury"].SK
		var positions struct{ Data []apitypes.Position }
		if r := f.do(t, "GET", "/api/v1/treasury/positions?limit=200", treasury, nil); r.status != 200 || json.Unmarshal(r.body, &positions) != nil {
			t.Fatalf("positions: %d %s", r.status, r.body)
		}
		seen := 0
		for _, p := range positions.Data {
			if p.WalletID != eth {
				continue
			}
			seen++
			switch p.Asset {
			case "WBTC":
				if p.USDValue != nil || p.PriceAt == nil || !p.PriceAt.Equal(updated) {
					t.Fatalf("a stale WBTC position: %+v", p)
				}
			case "ETH":
				if p.USDValue == nil || *p.USDValue != "3000.00" || p.PriceAt == nil {
					t.Fatalf("an ETH position: %+v", p)
				}
			case "MATIC":
				if p.USDValue != nil || p.PriceAt != nil {
					t.Fatalf("a MATIC position without a price: %+v", p)
				}
			}
		}
		if seen != 3 {
			t.Fatalf("%d positions of the wallet, want 3", seen)
		}
		var portfolio apitypes.Portfolio
		if r := f.do(t, "GET", "/api/v1/treasury/portfolio", treasury, nil); r.status != 200 || json.Unmarshal(r.body, &portfolio) != nil {
			t.Fatalf("portfolio: %d %s", r.status, r.body)
		}
		// The polygon wallet holds MATIC, which has no price at all.
		if strings.Join(portfolio.UnpricedAssets, ",") != "MATIC,WBTC" {
			t.Fatalf("unpriced assets %v: %+v", portfolio.UnpricedAssets, portfolio)
		}

		// A fresh round lets WBTC orders in again.
		now := time.Now().UTC()
		later := now.Add(2 * time.Hour)
		if _, err := s.RecordPrice(ctx, &store.Price{Asset: "WBTC", USDPrice: decimal.NewFromInt(61000), UpdatedAt: now, StaleAfter: &later}); err != nil {
			t.Fatal(err)
		}
		r = f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, payment("WBTC", "0.1"))
		if r.status != 201 || decodeOrder(t, r)["amountUsd"] != "6100.00" {
			t.Fatalf("a WBTC payment at a fresh price: %d %s", r.status, r.body)
		}
	})
}
