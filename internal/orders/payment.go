package orders

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/policy"
)

// Payment sends Amount of Asset from the order's wallet to Destination (SPEC 3.2), or, a
// batch payment, to each of its Recipients their own amount (SPEC 3.9): Amount is then
// their total.
type Payment struct {
	Asset       string          `json:"asset"`
	Amount      decimal.Decimal `json:"amount"`
	Destination Destination     `json:"destination,omitzero"`
	Recipients  []Recipient     `json:"recipients,omitempty"`
	// PartSize, for a batch, is how many recipients each part pays, fixed when the order is
	// made (from its chain's configuration), so that its legs never change after.
	PartSize int `json:"partSize,omitempty"`
	// Reference is the integrator's own, up to 200 characters.
	Reference string `json:"reference,omitempty"`
}

// Destination is where a payment goes.
type Destination struct {
	Address string `json:"address"`
	Label   string `json:"label,omitempty"`
}

// Recipient is one payee of a batch payment.
type Recipient struct {
	Address   string          `json:"address"`
	Amount    decimal.Decimal `json:"amount"`
	Reference string          `json:"reference,omitempty"`
	Label     string          `json:"label,omitempty"`
}

// How many recipients a batch payment has (SPEC 3.9).
const (
	MinRecipients = 2
	MaxRecipients = 500
)

// DefaultBatchPartSize is how many recipients one transaction of a batch pays, unless the
// chain's configuration says otherwise (batchPartSize): the rest go into further parts,
// each a TRANSFER leg of its own. On an EVM chain a token transfer to an address that
// never held the token costs about 116,000 gas under the current rules (measured on
// go-ethereum 1.17: most of it the new balance's storage), and a transaction may use at most
// 2^24 gas (EIP-7825): a part of 100 needs at most 11.7 M, 14 M with the adapter's 20 %
// headroom (internal/chain/evm's TestAFullBatchPartFitsOneTransaction). A chain whose blocks
// hold less needs a smaller part configured.
const DefaultBatchPartSize = 100

// SolanaBatchPartSize is a Solana batch's part: a transaction is at most 1,232 bytes, and
// each USDC recipient takes about 91 of them (its key and token account, the account's
// creation and the transfer), beside some 350 of the transaction's own.
const SolanaBatchPartSize = 8

// DefaultPartSize is a batch's part on chain when its configuration sets none.
func DefaultPartSize(chain string) int {
	if chain == "solana" {
		return SolanaBatchPartSize
	}
	return DefaultBatchPartSize
}

func (*Payment) Domain() string { return DomainPayment }

// IsBatch reports whether the payment pays recipients rather than one destination.
func (p *Payment) IsBatch() bool { return len(p.Recipients) > 0 }

func (p *Payment) Valued() (string, decimal.Decimal) { return p.Asset, p.Amount }

// Legs: one TRANSFER, or for a batch one per part.
func (p *Payment) Legs(chain string) []string {
	n := 1
	if p.IsBatch() {
		size := p.partSize(chain)
		n = (len(p.Recipients) + size - 1) / size
	}
	return slices.Repeat([]string{"TRANSFER"}, n)
}

// Part is the recipients that leg position of a batch on chain pays, and the index of its
// first one in Recipients.
func (p *Payment) Part(chain string, position int) ([]Recipient, int) {
	size := p.partSize(chain)
	first := min(position*size, len(p.Recipients))
	return p.Recipients[first:min(first+size, len(p.Recipients))], first
}

func (p *Payment) partSize(chain string) int {
	if p.PartSize > 0 {
		return p.PartSize
	}
	return DefaultPartSize(chain)
}

func (p *Payment) Check(chain string) []FieldError {
	c := checks{chain: chain}
	c.asset("asset", p.Asset)
	if !p.IsBatch() {
		c.amount("amount", p.Asset, p.Amount)
		c.address("destination.address", p.Destination.Address)
		return c.errs
	}
	for i, r := range p.Recipients {
		name := "recipients[" + strconv.Itoa(i) + "]"
		c.amount(name+".amount", p.Asset, r.Amount)
		c.address(name+".address", r.Address)
	}
	if len(c.errs) == 0 {
		// Each amount fits; their total, the batch's value, must too.
		c.amount("recipients", p.Asset, p.Amount)
	}
	return c.errs
}

func (p *Payment) PolicyOrder(app, walletID string, amountUSD decimal.Decimal) policy.Order {
	o := policy.Order{Domain: DomainPayment, App: app, WalletID: walletID, AmountUSD: amountUSD, Asset: p.Asset,
		Destination: p.Destination.Address}
	for _, r := range p.Recipients {
		o.Recipients = append(o.Recipients, r.Address)
	}
	return o
}

// parseRecipients reads a batch's recipients strictly, as Parse reads a body.
func parseRecipients(v []byte, add func(f, format string, args ...any)) []Recipient {
	var raw []map[string]any
	if err := json.Unmarshal(v, &raw); err != nil {
		add("recipients", "must be an array of objects {address, amount, reference?, label?}")
		return nil
	}
	if len(raw) < MinRecipients || len(raw) > MaxRecipients {
		add("recipients", "must list from %d to %d recipients, not %d", MinRecipients, MaxRecipients, len(raw))
		return nil
	}
	out := make([]Recipient, len(raw))
	ok := true
	for i, m := range raw {
		name := fmt.Sprintf("recipients[%d]", i)
		bad := func(f, format string, args ...any) { ok = false; add(name+f, format, args...) }
		if m == nil {
			bad("", "must be an object {address, amount, reference?, label?}")
			continue
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.Contains([]string{"address", "amount", "reference", "label"}, k) {
				bad("."+k, "is not a field of a recipient")
			}
		}
		str := func(f string, limit int, required bool) string {
			s, isString := m[f].(string)
			switch {
			case m[f] == nil && required:
				bad("."+f, "is required")
			case m[f] != nil && !isString:
				bad("."+f, "must be a string")
			case len(s) > limit:
				bad("."+f, "must be at most %d characters", limit)
			}
			return s
		}
		out[i].Address = str("address", 100, true)
		out[i].Reference = str("reference", 200, false)
		out[i].Label = str("label", 200, false)
		if m["amount"] == nil {
			bad(".amount", "is required")
		} else if s, isString := m["amount"].(string); !isString {
			bad(".amount", `must be a decimal string such as "1250.50", not a number`)
		} else if d, msg := parseAmount(s); msg != "" {
			bad(".amount", "%s", msg)
		} else {
			out[i].Amount = d
		}
	}
	if !ok {
		return nil
	}
	return out
}
