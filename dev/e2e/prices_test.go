package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/dev/wait"
)

// The dev bundle values orders from its price feeds through the code that reads
// Chainlink's: a feed moved at start values an ETH order at its new price; a feed whose
// keeper is held goes stale two heartbeats after its last round, and then a WBTC order is
// refused price_unavailable and the portfolio lists WBTC unpriced, while USDC goes on.
func TestDevPricesComeFromTheirFeedsAndGoStale(t *testing.T) {
	b := startBundle(t, t.TempDir(), "", func(o *devstack.Options) {
		o.PriceHeartbeat, o.PriceKeeperInterval, o.PriceRefreshInterval = 5*time.Second, time.Second, time.Second
		o.Prices = map[string]decimal.Decimal{"ETH": decimal.RequireFromString("3500.25")}
		o.HoldPrices = []string{"WBTC"}
	})
	defer func() { _ = b.Shutdown() }()
	creds := b.Credentials
	api := b.APIURL + "/api/v1"
	pay := creds.Keys["pay"].SK
	eth := ""
	for _, w := range creds.Wallets {
		if w.Chain == "ethereum" && w.AutoSign {
			eth = w.ID
			break
		}
	}
	payment := func(asset string) reply {
		return send(t, "POST", api+"/payments", pay, `{"walletId":"`+eth+`","asset":"`+asset+`","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
	}
	// The seed's 3000 is replaced by the feed's round at the first refresh.
	wait.For(t, time.Minute, "an ETH order valued at the moved feed's 3500.25", func() bool {
		r := payment("ETH")
		return r.status == 201 && r.body["amountUsd"] == "3500.25"
	})
	wait.For(t, time.Minute, "a WBTC order refused at its held feed's stale price", func() bool {
		r := payment("WBTC")
		if r.status != 422 {
			return false
		}
		errs, _ := r.body["errors"].([]any)
		if r.body["code"] != "price_unavailable" || len(errs) != 1 {
			t.Fatalf("the refusal: %s", r.raw)
		}
		if first, _ := errs[0].(map[string]any); first["field"] != "asset" {
			t.Fatalf("the refusal names %v: %s", first["field"], r.raw)
		}
		return true
	})
	wait.For(t, 30*time.Second, "a USDC order beside a stale WBTC", func() bool {
		r := payment("USDC")
		return r.status == 201 && r.body["amountUsd"] == "1.00"
	})
	wait.For(t, 30*time.Second, "the portfolio naming WBTC unpriced", func() bool {
		r := call(t, "GET", api+"/treasury/portfolio", creds.Keys["treasury"].SK)
		assets, _ := r.body["unpricedAssets"].([]any)
		return r.status == 200 && slices.Contains(assets, any("WBTC")) && len(assets) == 1
	})
}
