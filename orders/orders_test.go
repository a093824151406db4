package orders

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
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
