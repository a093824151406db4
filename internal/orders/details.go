package orders

import (
	"crypto/sha256"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mr-tron/base58"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/policy"
)

// Details are what an order asks for, in its domain's own fields: a *Payment, *Trade,
// *Earn or *Borrow. Parse makes them from a request's body; the store keeps them as they
// are (Fields), so that nothing after the create reads the order's body again.
type Details interface {
	// Domain is the domain's name: payment, trade, earn or borrow.
	Domain() string
	// Valued is the asset and amount whose USD value is the order's value.
	Valued() (asset string, amount decimal.Decimal)
	// Legs are the order's on-chain steps on chain, in the order they run.
	Legs(chain string) []string
	// Check validates what depends on the wallet's chain: the assets it carries, the
	// amounts it can represent, the shape of its addresses.
	Check(chain string) []FieldError
	// PolicyOrder is what the policy looks at in the order of app from walletID, worth
	// amountUSD.
	PolicyOrder(app, walletID string, amountUSD decimal.Decimal) policy.Order
}

// Draft is a parsed order body: the wallet it is drawn on and its domain's details.
type Draft struct {
	WalletID string
	Details
}

// newDetails is an empty value of the domain's type.
func newDetails(domain string) (Details, error) {
	switch domain {
	case DomainPayment:
		return &Payment{}, nil
	case DomainTrade:
		return &Trade{}, nil
	case DomainEarn:
		return &Earn{}, nil
	case DomainBorrow:
		return &Borrow{}, nil
	}
	return nil, fmt.Errorf("orders: %q is not an order domain", domain)
}

// ErrStoredDetails is a column's value that is no order's details: no retry reads it.
var ErrStoredDetails = errors.New("orders: stored details do not read back")

// Fields keeps an order's Details in a database column: JSON of the domain's fields
// with the domain's name first, so that a row is read back as the type it was written
// from.
type Fields struct{ Details }

// MarshalJSON writes the domain's fields, as Details do.
func (f Fields) MarshalJSON() ([]byte, error) { return json.Marshal(f.Details) }

// GormDataType names the column's type for gorm, which cannot infer it from an interface.
func (Fields) GormDataType() string { return "text" }

// Value writes the details as {"domain": …, and the domain's fields}.
func (f Fields) Value() (driver.Value, error) {
	if f.Details == nil {
		return nil, fmt.Errorf("orders: an order without details")
	}
	b, err := json.Marshal(f.Details)
	if err != nil {
		return nil, err
	}
	// Every domain writes at least one field, so its object is never empty.
	return `{"domain":"` + f.Domain() + `",` + string(b[1:]), nil
}

// Scan reads what Value wrote.
func (f *Fields) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("%w: a %T", ErrStoredDetails, src)
	}
	var head struct {
		Domain string `json:"domain"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return fmt.Errorf("%w: %w", ErrStoredDetails, err)
	}
	d, err := newDetails(head.Domain)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStoredDetails, err)
	}
	if err := json.Unmarshal(b, d); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStoredDetails, head.Domain, err)
	}
	f.Details = d
	return nil
}

// Payload is the canonical JSON of what the order asks for (its id, wallet, chain,
// domain, fields and legs) with keys sorted, and its SHA-256: approvals bind to this
// hash and signing requests are derived from exactly this payload.
func Payload(orderID, walletID, chain string, d Details, legs []string) (string, string, error) {
	fields, err := json.Marshal(d)
	if err != nil {
		return "", "", err
	}
	return PayloadOfJSON(orderID, walletID, chain, d, fields, legs)
}

// PayloadOfJSON is Payload for a caller that holds the domain's fields as JSON already
// (json.Marshal of d).
func PayloadOfJSON(orderID, walletID, chain string, d Details, fields json.RawMessage, legs []string) (string, string, error) {
	// The domain's fields stay the JSON they were written as (no number passes through a
	// float64); the map sorts every key.
	var own map[string]json.RawMessage
	if err := json.Unmarshal(fields, &own); err != nil {
		return "", "", err
	}
	p := map[string]any{"orderId": orderID, "domain": d.Domain(), "walletId": walletID, "chain": chain, "legs": legs}
	for k, v := range own {
		p[k] = v
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(b)
	return string(b), hex.EncodeToString(sum[:]), nil
}

// checks gathers the field errors of one Check.
type checks struct {
	chain string
	errs  []FieldError
}

func (c *checks) add(name, format string, args ...any) {
	c.errs = append(c.errs, FieldError{Field: name, Message: fmt.Sprintf(format, args...)})
}

// asset refuses an asset the chain does not carry.
func (c *checks) asset(name, asset string) {
	assets := ChainAssets[c.chain]
	if asset != "" && !slices.Contains(assets, asset) {
		c.add(name, "%s is not an asset on %s (%s)", asset, c.chain, strings.Join(assets, ", "))
	}
}

// amount refuses an amount finer than the asset's base unit, or one whose base units
// the chain's integer cannot carry: the chain would carry it as another amount (an EVM
// word wraps), so the signed transaction would say something else than the order and its
// approval.
func (c *checks) amount(name, asset string, amount decimal.Decimal) {
	places, ok := AssetDecimals[asset]
	if !ok {
		return
	}
	bits := AmountBits(c.chain)
	shifted := amount.Shift(places)
	switch {
	case !shifted.Equal(shifted.Truncate(0)):
		c.add(name, "has more decimal places than %s's %d", asset, places)
	case shifted.BigInt().BitLen() > int(bits):
		most := decimal.NewFromBigInt(MaxBaseUnits(bits), -places)
		c.add(name, "is more than %s carries on %s: its base units do not fit in %d bits (at most %s %s)",
			asset, c.chain, bits, most.String(), asset)
	}
}

// token refuses a chain's native asset where EVM vaults and lending pools take ERC-20
// tokens only.
func (c *checks) token(name, asset string) {
	assets := ChainAssets[c.chain]
	if slices.Contains(EVMChains, c.chain) && len(assets) > 0 && asset == assets[0] {
		c.add(name, "%s is %s's native asset: vaults and lending pools there take ERC-20 tokens (%s)",
			asset, c.chain, strings.Join(assets[1:], ", "))
	}
}

// ChainsWithoutVenues are the chains with no swap router, vault or lending pool yet: only
// payments run there.
var ChainsWithoutVenues = []string{"solana"}

// venues refuses a trade, an Earn or a Borrow order on a chain without venues, naming the
// wallet that puts the order on that chain.
func (c *checks) venues(domain string) {
	if slices.Contains(ChainsWithoutVenues, c.chain) {
		c.add("walletId", "is a %s wallet, and %s has no venue for %s orders yet: they run on %s", c.chain, c.chain, domain,
			strings.Join(EVMChains, " and "))
	}
}

// address refuses an address of another chain's shape.
func (c *checks) address(name, address string) {
	ok := evmAddress.MatchString(address)
	if c.chain == "solana" {
		key, err := base58.Decode(address)
		ok = solanaAddress.MatchString(address) && err == nil && len(key) == 32
	}
	if !ok {
		c.add(name, "is not an address on %s", c.chain)
	}
}
