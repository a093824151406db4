package orders

import (
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/policy"
)

// Payment sends Amount of Asset from the order's wallet to Destination (SPEC 3.2).
type Payment struct {
	Asset       string          `json:"asset"`
	Amount      decimal.Decimal `json:"amount"`
	Destination Destination     `json:"destination"`
	// Reference is the integrator's own, up to 200 characters.
	Reference string `json:"reference,omitempty"`
}

// Destination is where a payment goes.
type Destination struct {
	Address string `json:"address"`
	Label   string `json:"label,omitempty"`
}

func (*Payment) Domain() string { return DomainPayment }

func (p *Payment) Valued() (string, decimal.Decimal) { return p.Asset, p.Amount }

func (*Payment) Legs(string) []string { return []string{"TRANSFER"} }

func (p *Payment) Check(chain string) []FieldError {
	c := checks{chain: chain}
	c.asset("asset", p.Asset)
	c.amount("amount", p.Asset, p.Amount)
	c.address("destination.address", p.Destination.Address)
	return c.errs
}

func (p *Payment) PolicyOrder(app, walletID string, amountUSD decimal.Decimal) policy.Order {
	return policy.Order{Domain: DomainPayment, App: app, WalletID: walletID, AmountUSD: amountUSD, Asset: p.Asset,
		Destination: p.Destination.Address}
}
