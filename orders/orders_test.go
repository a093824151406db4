package orders

import (
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

func fieldsOf(errs []FieldError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestParse(t *testing.T) {
	cases := []struct {
		domain, body string
		wantErrs     []string
	}{
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":"500","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, nil},
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":"500.25","destination":{"address":"0x1111111111111111111111111111111111111111","label":"Acme"},"reference":"inv-7"}`, nil},
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":500,"destination":{"address":"0x1"}}`, []string{"amount"}},
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":"0","destination":{"address":"0x1"}}`, []string{"amount"}},
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":"-5","destination":{"address":"0x1"}}`, []string{"amount"}},
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":"1e3","destination":{"address":"0x1"}}`, []string{"amount"}},
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":"0.0000000000000000001","destination":{"address":"0x1"}}`, []string{"amount"}},
		{Payment, `{"walletId":"wal_1","asset":"USDC","Amount":"5","destination":{"address":"0x1"}}`, []string{"Amount", "amount"}},
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":"5","destination":{"address":"0x1","memo":"x"}}`, []string{"destination"}},
		{Payment, `{"walletId":"wal_1","asset":"USDC","amount":"5","destination":{"address":""}}`, []string{"destination.address"}},
		{Payment, `{"asset":"USDC","amount":"5","destination":{"address":"0x1"},"colour":"red"}`, []string{"colour", "walletId"}},
		{Payment, `[1,2]`, []string{"body"}},
		{Payment, `{"walletId":"w"} {"walletId":"w"}`, []string{"body"}},
		{Trade, `{"walletId":"wal_1","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":50}`, nil},
		{Trade, `{"walletId":"wal_1","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":5001}`, []string{"maxSlippageBps"}},
		{Trade, `{"walletId":"wal_1","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":1.5}`, []string{"maxSlippageBps"}},
		{Trade, `{"walletId":"wal_1","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":"50"}`, []string{"maxSlippageBps"}},
		{Earn, `{"walletId":"wal_1","protocol":"aave","action":"deposit","asset":"USDC","amount":"10"}`, nil},
		{Earn, `{"walletId":"wal_1","protocol":"aave","action":"stake","asset":"USDC","amount":"10"}`, []string{"action"}},
		{Earn, `{"walletId":"wal_1","protocol":"Aave V3","action":"deposit","asset":"USDC","amount":"10"}`, []string{"protocol"}},
		{Borrow, `{"walletId":"wal_1","protocol":"compound","action":"draw","asset":"USDC","amount":"10","collateralAsset":"ETH"}`, nil},
		{Borrow, `{"walletId":"wal_1","protocol":"compound","action":"draw","asset":"USDC","amount":"10","destination":{"address":"0x1"}}`, []string{"destination"}},
	}
	for _, tc := range cases {
		t.Run(tc.domain+" "+tc.body, func(t *testing.T) {
			_, errs := Parse(tc.domain, []byte(tc.body))
			got := fieldsOf(errs)
			if !slices.Equal(got, tc.wantErrs) {
				t.Fatalf("errors on %v, want %v (%+v)", got, tc.wantErrs, errs)
			}
			for _, e := range errs {
				if e.Message == "" {
					t.Fatalf("error on %s without a message", e.Field)
				}
			}
		})
	}
}

func TestCheckAgainstTheWalletChain(t *testing.T) {
	cases := []struct {
		domain, body, chain string
		wantErrs            []string
	}{
		{Payment, `{"walletId":"w","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", nil},
		{Payment, `{"walletId":"w","asset":"SOL","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", []string{"asset"}},
		{Payment, `{"walletId":"w","asset":"ETH","amount":"1","destination":{"address":"0x11"}}`, "ethereum", []string{"destination.address"}},
		{Payment, `{"walletId":"w","asset":"SOL","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "solana", []string{"destination.address"}},
		{Payment, `{"walletId":"w","asset":"SOL","amount":"1","destination":{"address":"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"}}`, "solana", nil},
		{Trade, `{"walletId":"w","sellAsset":"ETH","buyAsset":"ETH","sellAmount":"1","maxSlippageBps":10}`, "ethereum", []string{"buyAsset"}},
		{Trade, `{"walletId":"w","sellAsset":"WBTC","buyAsset":"MATIC","sellAmount":"1","maxSlippageBps":10}`, "ethereum", []string{"buyAsset"}},
		// Amounts are exact in the asset's base units: finer is refused, not rounded.
		{Payment, `{"walletId":"w","asset":"USDC","amount":"1.000001","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", nil},
		{Payment, `{"walletId":"w","asset":"USDC","amount":"1.0000001","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", []string{"amount"}},
		{Payment, `{"walletId":"w","asset":"USDC","amount":"1.500000000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", nil},
		{Trade, `{"walletId":"w","sellAsset":"WBTC","buyAsset":"ETH","sellAmount":"0.000000001","maxSlippageBps":10}`, "ethereum", []string{"sellAmount"}},
		{Payment, `{"walletId":"w","asset":"SOL","amount":"0.0000000001","destination":{"address":"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"}}`, "solana", []string{"amount"}},
		// Vaults and pools of EVM chains take tokens, not the native asset.
		{Earn, `{"walletId":"w","protocol":"aave","action":"deposit","asset":"ETH","amount":"1"}`, "ethereum", []string{"asset"}},
		{Borrow, `{"walletId":"w","protocol":"aave","action":"draw","asset":"MATIC","amount":"1"}`, "polygon", []string{"asset"}},
		{Earn, `{"walletId":"w","protocol":"aave","action":"deposit","asset":"SOL","amount":"1"}`, "solana", nil},
	}
	for _, tc := range cases {
		in, errs := Parse(tc.domain, []byte(tc.body))
		if len(errs) > 0 {
			t.Fatalf("parse %s: %+v", tc.body, errs)
		}
		if got := fieldsOf(in.Check(tc.chain)); !slices.Equal(got, tc.wantErrs) {
			t.Errorf("%s on %s: errors on %v, want %v", tc.body, tc.chain, got, tc.wantErrs)
		}
	}
}

// TestAmountsAChainCannotCarryAreRefused: an amount whose base units overflow the chain's
// integer (an EVM word, Solana's u64) would be carried as another amount, so the signed
// transaction would differ from the order; it is refused naming the field, and so is an
// amount too long to be one at all.
func TestAmountsAChainCannotCarryAreRefused(t *testing.T) {
	word := MaxBaseUnits(256)
	u64 := MaxBaseUnits(64)
	one := big.NewInt(1)
	amount := func(units *big.Int, places int32) string { return decimal.NewFromBigInt(units, -places).String() }
	evm := "0x1111111111111111111111111111111111111111"
	sol := "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
	payment := func(asset, amt, to string) string {
		return `{"walletId":"w","asset":"` + asset + `","amount":"` + amt + `","destination":{"address":"` + to + `"}}`
	}
	cases := []struct {
		name, domain, body, chain string
		refused                   string
	}{
		{"USDC at the word", Payment, payment("USDC", amount(word, 6), evm), "ethereum", ""},
		{"USDC a base unit over the word", Payment, payment("USDC", amount(new(big.Int).Add(word, one), 6), evm), "ethereum", "amount"},
		// The amount of the report: 2^256 base units and a little more, which an ERC-20
		// transfer would have encoded as 1 USDC.
		{"USDC 2^256 and one USDC", Payment, payment("USDC", amount(new(big.Int).Add(new(big.Int).Add(word, one), big.NewInt(1_000_000)), 6), evm), "ethereum", "amount"},
		{"ETH at the word", Payment, payment("ETH", amount(word, 18), evm), "ethereum", ""},
		{"MATIC over the word", Payment, payment("MATIC", amount(new(big.Int).Add(word, one), 18), evm), "polygon", "amount"},
		{"trade sell amount over the word", Trade, `{"walletId":"w","sellAsset":"WBTC","buyAsset":"ETH","sellAmount":"` + amount(new(big.Int).Add(word, one), 8) + `","maxSlippageBps":10}`, "ethereum", "sellAmount"},
		{"SOL at u64", Payment, payment("SOL", amount(u64, 9), sol), "solana", ""},
		{"SOL over u64", Payment, payment("SOL", amount(new(big.Int).Add(u64, one), 9), sol), "solana", "amount"},
		{"SPL USDC over u64", Payment, payment("USDC", amount(new(big.Int).Add(u64, one), 6), sol), "solana", "amount"},
		{"SPL USDC far under the word but over u64", Earn, `{"walletId":"w","protocol":"aave","action":"deposit","asset":"USDC","amount":"1` + strings.Repeat("0", 20) + `"}`, "solana", "amount"},
	}
	for _, tc := range cases {
		in, errs := Parse(tc.domain, []byte(tc.body))
		if len(errs) > 0 {
			t.Fatalf("%s: parse: %+v", tc.name, errs)
		}
		errs = in.Check(tc.chain)
		switch got := fieldsOf(errs); {
		case tc.refused == "" && len(got) > 0:
			t.Errorf("%s: refused %v: %+v", tc.name, got, errs)
		case tc.refused != "" && !slices.Equal(got, []string{tc.refused}):
			t.Errorf("%s: errors on %v, want on %s", tc.name, got, tc.refused)
		case tc.refused != "" && !strings.Contains(errs[0].Message, "bits"):
			t.Errorf("%s: message %q does not say why", tc.name, errs[0].Message)
		}
	}

	// A 5,000-digit amount is no amount: refused as it is read, never carried on to be
	// priced or stored.
	for _, long := range []string{strings.Repeat("9", 5000), "1." + strings.Repeat("0", 4998), strings.Repeat("1", MaxAmountLength+1)} {
		_, errs := Parse(Payment, []byte(payment("USDC", long, evm)))
		if !slices.Equal(fieldsOf(errs), []string{"amount"}) {
			t.Errorf("a %d-character amount: errors %+v", len(long), errs)
		}
	}
	if _, errs := Parse(Payment, []byte(payment("USDC", "1"+strings.Repeat("0", MaxAmountLength-1), evm))); len(errs) > 0 {
		t.Errorf("a %d-character amount is refused as it is read: %+v", MaxAmountLength, errs)
	}
}

func TestLegs(t *testing.T) {
	cases := []struct {
		domain, body, chain, want string
	}{
		{Payment, `{"walletId":"w","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", "TRANSFER"},
		{Trade, `{"walletId":"w","sellAsset":"ETH","buyAsset":"USDC","sellAmount":"1","maxSlippageBps":10}`, "ethereum", "SWAP"},
		{Trade, `{"walletId":"w","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"1","maxSlippageBps":10}`, "ethereum", "APPROVE,SWAP"},
		{Trade, `{"walletId":"w","sellAsset":"MATIC","buyAsset":"USDC","sellAmount":"1","maxSlippageBps":10}`, "polygon", "SWAP"},
		{Earn, `{"walletId":"w","protocol":"aave","action":"deposit","asset":"USDC","amount":"1"}`, "ethereum", "DEPOSIT"},
		{Earn, `{"walletId":"w","protocol":"aave","action":"withdraw","asset":"USDC","amount":"1"}`, "ethereum", "WITHDRAW,CLAIM"},
		{Borrow, `{"walletId":"w","protocol":"aave","action":"draw","asset":"USDC","amount":"1"}`, "ethereum", "DRAW"},
		{Borrow, `{"walletId":"w","protocol":"aave","action":"repay","asset":"USDC","amount":"1"}`, "ethereum", "REPAY"},
	}
	for _, tc := range cases {
		in, errs := Parse(tc.domain, []byte(tc.body))
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if got := strings.Join(in.Legs(tc.chain), ","); got != tc.want {
			t.Errorf("%s: legs %s, want %s", tc.body, got, tc.want)
		}
	}
}

func TestPayloadIsCanonical(t *testing.T) {
	a, _ := Parse(Payment, []byte(`{"walletId":"w","asset":"USDC","amount":"500.50","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))
	b, _ := Parse(Payment, []byte(`{"destination":{"address":"0x1111111111111111111111111111111111111111"},"amount":"500.50","asset":"USDC","walletId":"w"}`))
	pa, ha, err := Payload("ord_1", Payment, "w", "ethereum", a.Details(), a.Legs("ethereum"))
	if err != nil {
		t.Fatal(err)
	}
	pb, hb, _ := Payload("ord_1", Payment, "w", "ethereum", b.Details(), b.Legs("ethereum"))
	if pa != pb || ha != hb || len(ha) != 64 {
		t.Fatalf("the same order in another field order must hash the same:\n%s\n%s", pa, pb)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(pa), &m); err != nil || m["amount"] != "500.5" && m["amount"] != "500.50" {
		t.Fatalf("payload %s", pa)
	}
	_, hc, _ := Payload("ord_2", Payment, "w", "ethereum", a.Details(), a.Legs("ethereum"))
	if hc == ha {
		t.Fatal("another order must hash differently")
	}
}
