package orders

import (
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/policy"
)

// Trade sells SellAmount of SellAsset for BuyAsset, accepting at most MaxSlippageBps of
// slippage (SPEC 3.2).
type Trade struct {
	SellAsset      string          `json:"sellAsset"`
	BuyAsset       string          `json:"buyAsset"`
	SellAmount     decimal.Decimal `json:"sellAmount"`
	MaxSlippageBps int             `json:"maxSlippageBps"`
}

func (*Trade) Domain() string { return DomainTrade }

func (t *Trade) Valued() (string, decimal.Decimal) { return t.SellAsset, t.SellAmount }

// Legs: a token sold is approved to the router before the swap; the native asset is sent
// with it.
func (t *Trade) Legs(chain string) []string {
	if native := ChainAssets[chain]; len(native) > 0 && t.SellAsset != native[0] {
		return []string{"APPROVE", "SWAP"}
	}
	return []string{"SWAP"}
}

func (t *Trade) Check(chain string) []FieldError {
	c := checks{chain: chain}
	c.venues(DomainTrade)
	c.asset("sellAsset", t.SellAsset)
	c.asset("buyAsset", t.BuyAsset)
	c.amount("sellAmount", t.SellAsset, t.SellAmount)
	if t.SellAsset != "" && t.SellAsset == t.BuyAsset {
		c.add("buyAsset", "must differ from sellAsset")
	}
	return c.errs
}

func (t *Trade) PolicyOrder(app, walletID string, amountUSD decimal.Decimal) policy.Order {
	return policy.Order{Domain: DomainTrade, App: app, WalletID: walletID, AmountUSD: amountUSD, Asset: t.SellAsset,
		SellAsset: t.SellAsset, BuyAsset: t.BuyAsset}
}
