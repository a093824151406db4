package orders

import (
	"math/big"
	"reflect"
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
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":"500","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, nil},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":"500.25","destination":{"address":"0x1111111111111111111111111111111111111111","label":"Acme"},"reference":"inv-7"}`, nil},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":500,"destination":{"address":"0x1"}}`, []string{"amount"}},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":"0","destination":{"address":"0x1"}}`, []string{"amount"}},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":"-5","destination":{"address":"0x1"}}`, []string{"amount"}},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":"1e3","destination":{"address":"0x1"}}`, []string{"amount"}},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":"0.0000000000000000001","destination":{"address":"0x1"}}`, []string{"amount"}},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","Amount":"5","destination":{"address":"0x1"}}`, []string{"Amount", "amount"}},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":"5","destination":{"address":"0x1","memo":"x"}}`, []string{"destination"}},
		{DomainPayment, `{"walletId":"wal_1","asset":"USDC","amount":"5","destination":{"address":""}}`, []string{"destination.address"}},
		{DomainPayment, `{"asset":"USDC","amount":"5","destination":{"address":"0x1"},"colour":"red"}`, []string{"colour", "walletId"}},
		{DomainPayment, `[1,2]`, []string{"body"}},
		{DomainPayment, `{"walletId":"w"} {"walletId":"w"}`, []string{"body"}},
		{DomainTrade, `{"walletId":"wal_1","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":50}`, nil},
		{DomainTrade, `{"walletId":"wal_1","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":5001}`, []string{"maxSlippageBps"}},
		{DomainTrade, `{"walletId":"wal_1","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":1.5}`, []string{"maxSlippageBps"}},
		{DomainTrade, `{"walletId":"wal_1","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":"50"}`, []string{"maxSlippageBps"}},
		{DomainEarn, `{"walletId":"wal_1","protocol":"aave","action":"deposit","asset":"USDC","amount":"10"}`, nil},
		{DomainEarn, `{"walletId":"wal_1","protocol":"aave","action":"stake","asset":"USDC","amount":"10"}`, []string{"action"}},
		{DomainEarn, `{"walletId":"wal_1","protocol":"Aave V3","action":"deposit","asset":"USDC","amount":"10"}`, []string{"protocol"}},
		{DomainBorrow, `{"walletId":"wal_1","protocol":"compound","action":"draw","asset":"USDC","amount":"10","collateralAsset":"ETH"}`, nil},
		{DomainBorrow, `{"walletId":"wal_1","protocol":"compound","action":"draw","asset":"USDC","amount":"10","destination":{"address":"0x1"}}`, []string{"destination"}},
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
		{DomainPayment, `{"walletId":"w","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", nil},
		{DomainPayment, `{"walletId":"w","asset":"SOL","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", []string{"asset"}},
		{DomainPayment, `{"walletId":"w","asset":"ETH","amount":"1","destination":{"address":"0x11"}}`, "ethereum", []string{"destination.address"}},
		{DomainPayment, `{"walletId":"w","asset":"SOL","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "solana", []string{"destination.address"}},
		{DomainPayment, `{"walletId":"w","asset":"SOL","amount":"1","destination":{"address":"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"}}`, "solana", nil},
		{DomainTrade, `{"walletId":"w","sellAsset":"ETH","buyAsset":"ETH","sellAmount":"1","maxSlippageBps":10}`, "ethereum", []string{"buyAsset"}},
		{DomainTrade, `{"walletId":"w","sellAsset":"WBTC","buyAsset":"MATIC","sellAmount":"1","maxSlippageBps":10}`, "ethereum", []string{"buyAsset"}},
		// Amounts are exact in the asset's base units: finer is refused, not rounded.
		{DomainPayment, `{"walletId":"w","asset":"USDC","amount":"1.000001","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", nil},
		{DomainPayment, `{"walletId":"w","asset":"USDC","amount":"1.0000001","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", []string{"amount"}},
		{DomainPayment, `{"walletId":"w","asset":"USDC","amount":"1.500000000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", nil},
		{DomainTrade, `{"walletId":"w","sellAsset":"WBTC","buyAsset":"ETH","sellAmount":"0.000000001","maxSlippageBps":10}`, "ethereum", []string{"sellAmount"}},
		{DomainPayment, `{"walletId":"w","asset":"SOL","amount":"0.0000000001","destination":{"address":"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"}}`, "solana", []string{"amount"}},
		// Vaults and pools of EVM chains take tokens, not the native asset.
		{DomainEarn, `{"walletId":"w","protocol":"aave","action":"deposit","asset":"ETH","amount":"1"}`, "ethereum", []string{"asset"}},
		{DomainBorrow, `{"walletId":"w","protocol":"aave","action":"draw","asset":"MATIC","amount":"1"}`, "polygon", []string{"asset"}},
		// Solana has no venues yet: trades, Earn and Borrow are refused on the wallet (SPEC 3.6).
		{DomainEarn, `{"walletId":"w","protocol":"aave","action":"deposit","asset":"SOL","amount":"1"}`, "solana", []string{"walletId"}},
		{DomainBorrow, `{"walletId":"w","protocol":"aave","action":"draw","asset":"USDC","amount":"1"}`, "solana", []string{"walletId"}},
		{DomainTrade, `{"walletId":"w","sellAsset":"SOL","buyAsset":"USDC","sellAmount":"1","maxSlippageBps":10}`, "solana", []string{"walletId"}},
		// A Solana address is base58 of 32 bytes: neither the hex of a key nor 31 bytes.
		{DomainPayment, `{"walletId":"w","asset":"SOL","amount":"1","destination":{"address":"` + strings.Repeat("ab", 32) + `"}}`, "solana", []string{"destination.address"}},
		{DomainPayment, `{"walletId":"w","asset":"SOL","amount":"1","destination":{"address":"` + strings.Repeat("2", 43) + `"}}`, "solana", []string{"destination.address"}},
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
		{"USDC at the word", DomainPayment, payment("USDC", amount(word, 6), evm), "ethereum", ""},
		{"USDC a base unit over the word", DomainPayment, payment("USDC", amount(new(big.Int).Add(word, one), 6), evm), "ethereum", "amount"},
		// The amount of the report: 2^256 base units and a little more, which an ERC-20
		// transfer would have encoded as 1 USDC.
		{"USDC 2^256 and one USDC", DomainPayment, payment("USDC", amount(new(big.Int).Add(new(big.Int).Add(word, one), big.NewInt(1_000_000)), 6), evm), "ethereum", "amount"},
		{"ETH at the word", DomainPayment, payment("ETH", amount(word, 18), evm), "ethereum", ""},
		{"MATIC over the word", DomainPayment, payment("MATIC", amount(new(big.Int).Add(word, one), 18), evm), "polygon", "amount"},
		{"trade sell amount over the word", DomainTrade, `{"walletId":"w","sellAsset":"WBTC","buyAsset":"ETH","sellAmount":"` + amount(new(big.Int).Add(word, one), 8) + `","maxSlippageBps":10}`, "ethereum", "sellAmount"},
		{"SOL at u64", DomainPayment, payment("SOL", amount(u64, 9), sol), "solana", ""},
		{"SOL over u64", DomainPayment, payment("SOL", amount(new(big.Int).Add(u64, one), 9), sol), "solana", "amount"},
		{"SPL USDC over u64", DomainPayment, payment("USDC", amount(new(big.Int).Add(u64, one), 6), sol), "solana", "amount"},
		{"SPL USDC far under the word but over u64", DomainPayment, payment("USDC", "1"+strings.Repeat("0", 20), sol), "solana", "amount"},
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
		_, errs := Parse(DomainPayment, []byte(payment("USDC", long, evm)))
		if !slices.Equal(fieldsOf(errs), []string{"amount"}) {
			t.Errorf("a %d-character amount: errors %+v", len(long), errs)
		}
	}
	if _, errs := Parse(DomainPayment, []byte(payment("USDC", "1"+strings.Repeat("0", MaxAmountLength-1), evm))); len(errs) > 0 {
		t.Errorf("a %d-character amount is refused as it is read: %+v", MaxAmountLength, errs)
	}
}

func TestLegs(t *testing.T) {
	cases := []struct {
		domain, body, chain, want string
	}{
		{DomainPayment, `{"walletId":"w","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, "ethereum", "TRANSFER"},
		{DomainTrade, `{"walletId":"w","sellAsset":"ETH","buyAsset":"USDC","sellAmount":"1","maxSlippageBps":10}`, "ethereum", "SWAP"},
		{DomainTrade, `{"walletId":"w","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"1","maxSlippageBps":10}`, "ethereum", "APPROVE,SWAP"},
		{DomainTrade, `{"walletId":"w","sellAsset":"MATIC","buyAsset":"USDC","sellAmount":"1","maxSlippageBps":10}`, "polygon", "SWAP"},
		{DomainEarn, `{"walletId":"w","protocol":"aave","action":"deposit","asset":"USDC","amount":"1"}`, "ethereum", "DEPOSIT"},
		{DomainEarn, `{"walletId":"w","protocol":"aave","action":"withdraw","asset":"USDC","amount":"1"}`, "ethereum", "WITHDRAW,CLAIM"},
		{DomainBorrow, `{"walletId":"w","protocol":"aave","action":"draw","asset":"USDC","amount":"1"}`, "ethereum", "DRAW"},
		{DomainBorrow, `{"walletId":"w","protocol":"aave","action":"repay","asset":"USDC","amount":"1"}`, "ethereum", "REPAY"},
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
	a, _ := Parse(DomainPayment, []byte(`{"walletId":"w","asset":"USDC","amount":"500.50","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))
	b, _ := Parse(DomainPayment, []byte(`{"destination":{"address":"0x1111111111111111111111111111111111111111"},"amount":"500.50","asset":"USDC","walletId":"w"}`))
	pa, ha, err := Payload("ord_1", "w", "ethereum", a.Details, a.Legs("ethereum"))
	if err != nil {
		t.Fatal(err)
	}
	pb, hb, _ := Payload("ord_1", "w", "ethereum", b.Details, b.Legs("ethereum"))
	if pa != pb || ha != hb || len(ha) != 64 {
		t.Fatalf("the same order in another field order must hash the same:\n%s\n%s", pa, pb)
	}
	// Approvals already given bind to this form: it may not change.
	want := `{"amount":"500.5","asset":"USDC","chain":"ethereum","destination":{"address":"0x1111111111111111111111111111111111111111"},"domain":"payment","legs":["TRANSFER"],"orderId":"ord_1","walletId":"w"}`
	if pa != want {
		t.Fatalf("payload\n%s\nwant\n%s", pa, want)
	}
	_, hc, _ := Payload("ord_2", "w", "ethereum", a.Details, a.Legs("ethereum"))
	if hc == ha {
		t.Fatal("another order must hash differently")
	}
}

// TestStoredDetailsReadBackAsTheirType: what a column keeps of an order's details is read
// back as the same domain's type with the same fields, and payloads hash the same after.
func TestStoredDetailsReadBackAsTheirType(t *testing.T) {
	bodies := map[string]string{
		DomainPayment: `{"walletId":"w","asset":"USDC","amount":"12.5","destination":{"address":"0x1111111111111111111111111111111111111111","label":"Acme <&>"},"reference":"inv-7"}`,
		DomainTrade:   `{"walletId":"w","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":0}`,
		DomainEarn:    `{"walletId":"w","protocol":"aave","action":"withdraw","asset":"USDC","amount":"10"}`,
		DomainBorrow:  `{"walletId":"w","protocol":"compound","action":"draw","asset":"USDC","amount":"10","collateralAsset":"ETH"}`,
	}
	for domain, body := range bodies {
		in, errs := Parse(domain, []byte(body))
		if len(errs) > 0 {
			t.Fatalf("%s: %v", domain, errs)
		}
		v, err := Fields{in.Details}.Value()
		if err != nil {
			t.Fatal(err)
		}
		var back Fields
		if err := back.Scan([]byte(v.(string))); err != nil {
			t.Fatalf("%s: %v", domain, err)
		}
		if back.Domain() != domain || !reflect.DeepEqual(back.Details, in.Details) {
			t.Errorf("%s: stored %s, read back %#v", domain, v, back.Details)
		}
		_, h1, _ := Payload("ord_1", "w", "ethereum", in.Details, in.Legs("ethereum"))
		_, h2, _ := Payload("ord_1", "w", "ethereum", back, back.Legs("ethereum"))
		if h1 != h2 {
			t.Errorf("%s: payload hash changed through the column", domain)
		}
	}
	var f Fields
	if err := f.Scan(`{"domain":"loan","amount":"1"}`); err == nil {
		t.Error("details of an unknown domain were read")
	}
}
