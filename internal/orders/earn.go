package orders

import (
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/policy"
)

// Earn deposits Amount of Asset into Protocol's vault, or withdraws it (SPEC 3.2).
type Earn struct {
	Protocol string          `json:"protocol"`
	Action   string          `json:"action"` // deposit or withdraw
	Asset    string          `json:"asset"`
	Amount   decimal.Decimal `json:"amount"`
}

func (*Earn) Domain() string { return DomainEarn }

func (e *Earn) Valued() (string, decimal.Decimal) { return e.Asset, e.Amount }

// Legs: a withdrawal claims the vault's yield after it.
func (e *Earn) Legs(string) []string {
	if e.Action == "withdraw" {
		return []string{"WITHDRAW", "CLAIM"}
	}
	return []string{"DEPOSIT"}
}

func (e *Earn) Check(chain string) []FieldError {
	c := checks{chain: chain}
	c.venues(DomainEarn)
	c.asset("asset", e.Asset)
	c.amount("amount", e.Asset, e.Amount)
	c.token("asset", e.Asset)
	return c.errs
}

func (e *Earn) PolicyOrder(app, walletID string, amountUSD decimal.Decimal) policy.Order {
	return policy.Order{Domain: DomainEarn, App: app, WalletID: walletID, AmountUSD: amountUSD, Asset: e.Asset,
		Protocol: e.Protocol}
}
