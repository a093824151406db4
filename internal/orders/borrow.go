package orders

import (
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/policy"
)

// Borrow draws Amount of Asset from Protocol's lending pool against CollateralAsset, or
// repays it (SPEC 3.2).
type Borrow struct {
	Protocol        string          `json:"protocol"`
	Action          string          `json:"action"` // draw or repay
	Asset           string          `json:"asset"`
	Amount          decimal.Decimal `json:"amount"`
	CollateralAsset string          `json:"collateralAsset,omitempty"`
}

func (*Borrow) Domain() string { return DomainBorrow }

func (b *Borrow) Valued() (string, decimal.Decimal) { return b.Asset, b.Amount }

func (b *Borrow) Legs(string) []string {
	if b.Action == "repay" {
		return []string{"REPAY"}
	}
	return []string{"DRAW"}
}

func (b *Borrow) Check(chain string) []FieldError {
	c := checks{chain: chain}
	c.venues(DomainBorrow)
	c.asset("asset", b.Asset)
	c.asset("collateralAsset", b.CollateralAsset)
	c.amount("amount", b.Asset, b.Amount)
	c.token("asset", b.Asset)
	return c.errs
}

func (b *Borrow) PolicyOrder(app, walletID string, amountUSD decimal.Decimal) policy.Order {
	return policy.Order{Domain: DomainBorrow, App: app, WalletID: walletID, AmountUSD: amountUSD, Asset: b.Asset,
		Protocol: b.Protocol}
}
