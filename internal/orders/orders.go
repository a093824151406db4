// Package orders holds the rules of the four order domains (SPEC section 3.2): which
// fields each takes, how they are validated, which legs an order has, and its canonical
// payload. It is pure: no I/O, so handlers and workflows reach the same answers.
package orders

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/shopspring/decimal"
)

// Domain names.
const (
	DomainPayment = "payment"
	DomainTrade   = "trade"
	DomainEarn    = "earn"
	DomainBorrow  = "borrow"
)

// DomainInfo ties a domain to its app and its collection path under /api/v1.
type DomainInfo struct {
	Name       string
	App        string
	Collection string
}

// Domains lists the four order domains.
var Domains = []DomainInfo{
	{DomainPayment, "pay", "payments"},
	{DomainTrade, "trade", "trade-orders"},
	{DomainEarn, "earn", "earn-orders"},
	{DomainBorrow, "borrow", "borrow-orders"},
}

// Why an order ended rejected.
const (
	RejectedByPolicy   = "policy"
	RejectedByApprover = "approver"
	RejectedExpired    = "expired"
)

// Statuses of an approval item (SPEC 3.3).
const (
	ItemPending  = "pending"
	ItemApproved = "approved"
	ItemRejected = "rejected"
	ItemExpired  = "expired"
)

// ItemStatuses lists every approval item status, for validating filters.
var ItemStatuses = []string{ItemPending, ItemApproved, ItemRejected, ItemExpired}

// The decisions an approver records.
const (
	Approve = "APPROVE"
	Reject  = "REJECT"
)

// Statuses of a signing request (SPEC 3.5).
const (
	SigningPending = "pending"
	SigningSigned  = "signed"
	SigningExpired = "expired"
	// SigningRefused: the signer refused it; the order failed signer_refused.
	SigningRefused = "refused"
)

// SigningStatuses lists every signing request status, for validating filters.
var SigningStatuses = []string{SigningPending, SigningSigned, SigningExpired, SigningRefused}

// ChainAssets are the assets each supported chain carries; the first is the native one.
var ChainAssets = map[string][]string{
	"ethereum": {"ETH", "USDC", "WBTC"},
	"polygon":  {"MATIC", "USDC"},
	"solana":   {"SOL", "USDC"},
}

// AssetDecimals are the decimal places of each asset's base unit on every chain that
// carries it: an amount finer than that cannot be sent and is refused at create.
var AssetDecimals = map[string]int32{"ETH": 18, "MATIC": 18, "USDC": 6, "WBTC": 8, "SOL": 9}

// EVMChains are the chains whose Earn vaults (ERC-4626) and lending pools hold ERC-20
// tokens only: their native asset is deposited or borrowed wrapped, as a token.
var EVMChains = []string{"ethereum", "polygon"}

// MaxSlippageBps bounds a trade's maxSlippageBps (50 %).
const MaxSlippageBps = 5000

// maxDecimals is the most fractional digits an amount may have.
const maxDecimals = 18

// MaxAmountLength bounds an amount as written. The largest amount any chain can carry,
// 2^256-1 base units of an asset without decimals, has 78 digits; a longer string can
// only be refused, and is refused before it is read as a number.
const MaxAmountLength = 100

// amountBits is the width of the integer a chain carries an amount in: an EVM word (256
// bits) on EVM chains, a u64 for SOL and SPL tokens on Solana.
var amountBits = map[string]uint{"ethereum": 256, "polygon": 256, "solana": 64}

// AmountBits is the width of the integer an amount on chain is carried in (256 when the
// chain is not known here: an EVM chain added by configuration).
func AmountBits(chain string) uint {
	if b, ok := amountBits[chain]; ok {
		return b
	}
	return 256
}

// MaxBaseUnits is the largest amount, in base units, an integer of bits carries.
func MaxBaseUnits(bits uint) *big.Int {
	return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), bits), big.NewInt(1))
}

// FieldError names one invalid field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

type field struct {
	name     string
	required bool
}

var domainFields = map[string][]field{
	DomainPayment: {{"walletId", true}, {"asset", true}, {"amount", true}, {"destination", true}, {"reference", false}, {"recipients", false}},
	DomainTrade:   {{"walletId", true}, {"sellAsset", true}, {"buyAsset", true}, {"sellAmount", true}, {"maxSlippageBps", true}},
	DomainEarn:    {{"walletId", true}, {"protocol", true}, {"action", true}, {"asset", true}, {"amount", true}},
	DomainBorrow:  {{"walletId", true}, {"protocol", true}, {"action", true}, {"asset", true}, {"amount", true}, {"collateralAsset", false}},
}

var domainActions = map[string][]string{DomainEarn: {"deposit", "withdraw"}, DomainBorrow: {"draw", "repay"}}

var protocolPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// amountPattern is an amount as written in a body: digits, and a fraction after a point
// (docs/openapi.json PositiveAmountInput); no sign, exponent or bare point.
var amountPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// Parse reads an order body of a domain strictly: field names must match exactly (JSON's
// usual case-insensitive matching would let "Amount" through), unknown fields are errors,
// amounts must be decimal strings. Checks that need the wallet come later, in Check.
// With errors, the draft is what could be read.
func Parse(domain string, body []byte) (Draft, []FieldError) {
	fields, ok := domainFields[domain]
	if !ok {
		return Draft{}, []FieldError{{Field: "domain", Message: "unknown domain"}}
	}
	var raw map[string]json.RawMessage
	// Unmarshal, not a Decoder: a decoder stops after the object and would let trailing
	// text such as "}" or "]" through.
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return Draft{}, []FieldError{{Field: "body", Message: "must be one JSON object"}}
	}
	var errs []FieldError
	add := func(f, format string, args ...any) {
		errs = append(errs, FieldError{Field: f, Message: fmt.Sprintf(format, args...)})
	}
	var unknown []string
	for k := range raw {
		if !slices.ContainsFunc(fields, func(f field) bool { return f.name == k }) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		add(k, "is not a field of a %s", domain)
	}
	// A batch payment names its recipients instead of one destination and amount.
	_, batch := raw["recipients"]
	if batch && domain == DomainPayment {
		for _, f := range []string{"amount", "destination"} {
			if _, ok := raw[f]; ok {
				add(f, "is not a field of a batch payment: each recipient has its own, and the order's amount is their total")
			}
		}
	}
	for _, f := range fields {
		if batch && domain == DomainPayment && (f.name == "amount" || f.name == "destination") {
			continue
		}
		if v, ok := raw[f.name]; f.required && (!ok || string(v) == "null") {
			add(f.name, "is required")
		} else if ok && HoldsNUL(v) {
			add(f.name, NULMessage)
		}
	}
	var in struct {
		WalletID, Asset, Reference, SellAsset, BuyAsset, Protocol, Action, CollateralAsset string
		Amount, SellAmount                                                                 decimal.Decimal
		MaxSlippageBps                                                                     int
		Destination                                                                        Destination
	}
	str := func(name string, dst *string) {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			return
		}
		if err := json.Unmarshal(v, dst); err != nil {
			add(name, "must be a string")
		}
	}
	amount := func(name string, dst *decimal.Decimal) {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			return
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			add(name, `must be a decimal string such as "1250.50", not a number`)
			return
		}
		if d, msg := parseAmount(s); msg != "" {
			add(name, "%s", msg)
		} else {
			*dst = d
		}
	}
	str("walletId", &in.WalletID)
	str("asset", &in.Asset)
	str("reference", &in.Reference)
	str("sellAsset", &in.SellAsset)
	str("buyAsset", &in.BuyAsset)
	str("protocol", &in.Protocol)
	str("action", &in.Action)
	str("collateralAsset", &in.CollateralAsset)
	amount("amount", &in.Amount)
	amount("sellAmount", &in.SellAmount)
	if v, ok := raw["maxSlippageBps"]; ok && string(v) != "null" {
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil || v[0] == '"' || strings.ContainsAny(n.String(), ".eE") {
			add("maxSlippageBps", "must be an integer number of basis points")
		} else if i, err := n.Int64(); err != nil || i < 0 || i > MaxSlippageBps {
			add("maxSlippageBps", "must be from 0 to %d", MaxSlippageBps)
		} else {
			in.MaxSlippageBps = int(i)
		}
	}
	if v, ok := raw["destination"]; ok && string(v) != "null" {
		var d Destination
		dd := json.NewDecoder(bytes.NewReader(v))
		dd.DisallowUnknownFields()
		if err := dd.Decode(&d); err != nil || !exactKeys(v, "address", "label") {
			add("destination", "must be an object {address, label?}")
		} else if d.Address == "" {
			add("destination.address", "is required")
		} else if len(d.Label) > 200 {
			add("destination.label", "must be at most 200 characters")
		} else {
			in.Destination = d
		}
	}
	var recipients []Recipient
	if v, ok := raw["recipients"]; ok && domain == DomainPayment && !HoldsNUL(v) {
		if recipients = parseRecipients(v, add); recipients != nil {
			for _, r := range recipients {
				in.Amount = in.Amount.Add(r.Amount)
			}
		}
	}
	if len(in.Reference) > 200 {
		add("reference", "must be at most 200 characters")
	}
	if acts, ok := domainActions[domain]; ok && in.Action != "" && !slices.Contains(acts, in.Action) {
		add("action", "must be one of %s", strings.Join(acts, ", "))
	}
	if in.Protocol != "" && !protocolPattern.MatchString(in.Protocol) {
		add("protocol", "must be a lower-case protocol name such as aave")
	}
	draft := Draft{WalletID: in.WalletID}
	switch domain {
	case DomainPayment:
		draft.Details = &Payment{Asset: in.Asset, Amount: in.Amount, Destination: in.Destination, Recipients: recipients,
			Reference: in.Reference}
	case DomainTrade:
		draft.Details = &Trade{SellAsset: in.SellAsset, BuyAsset: in.BuyAsset, SellAmount: in.SellAmount, MaxSlippageBps: in.MaxSlippageBps}
	case DomainEarn:
		draft.Details = &Earn{Protocol: in.Protocol, Action: in.Action, Asset: in.Asset, Amount: in.Amount}
	case DomainBorrow:
		draft.Details = &Borrow{Protocol: in.Protocol, Action: in.Action, Asset: in.Asset, Amount: in.Amount, CollateralAsset: in.CollateralAsset}
	}
	return draft, errs
}

// parseAmount reads an amount as written in a body, or says why it is not one.
func parseAmount(s string) (decimal.Decimal, string) {
	if len(s) > MaxAmountLength {
		return decimal.Decimal{}, fmt.Sprintf("is %d characters long; no chain carries an amount of more than %d", len(s), MaxAmountLength)
	}
	d, err := decimal.NewFromString(s)
	switch {
	case strings.HasPrefix(s, "-") && amountPattern.MatchString(s[1:]):
		return d, "must be greater than zero"
	case err != nil || !amountPattern.MatchString(s):
		return d, "must be a decimal string such as \"1250.50\""
	case !d.IsPositive():
		return d, "must be greater than zero"
	case -d.Exponent() > maxDecimals:
		return d, fmt.Sprintf("has more than %d decimal places", maxDecimals)
	}
	return d, ""
}

// NULMessage refuses a field that HoldsNUL.
const NULMessage = "must not contain the NUL character (\\u0000)"

// HoldsNUL reports whether a JSON value has a string, or an object key, with the NUL
// character in it. No text column keeps one (PostgreSQL refuses it), so a request carrying
// one is invalid rather than a failure of the database.
func HoldsNUL(v json.RawMessage) bool {
	// In valid JSON a NUL can only be written as this escape.
	if !bytes.Contains(v, []byte(`\u0000`)) {
		return false
	}
	var x any
	if json.Unmarshal(v, &x) != nil {
		return false
	}
	var holds func(any) bool
	holds = func(x any) bool {
		switch x := x.(type) {
		case string:
			return strings.ContainsRune(x, 0)
		case []any:
			return slices.ContainsFunc(x, holds)
		case map[string]any:
			for k, e := range x {
				if strings.ContainsRune(k, 0) || holds(e) {
					return true
				}
			}
		}
		return false
	}
	return holds(x)
}

// exactKeys reports whether a JSON object uses only the given keys, with exact case.
func exactKeys(obj json.RawMessage, keys ...string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return false
	}
	for k := range m {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

var (
	evmAddress = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	// A Solana address is the base58 of a 32-byte ed25519 public key.
	solanaAddress = regexp.MustCompile(`^[1-9A-HJ-NP-Za-km-z]{32,44}$`)
)
