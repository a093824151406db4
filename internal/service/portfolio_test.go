package service

import (
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/store"
)

func TestValueSumsExactlyAndRoundsHalfEvenForDisplay(t *testing.T) {
	d := decimal.RequireFromString
	cases := []struct {
		name      string
		positions []store.Position
		prices    map[string]decimal.Decimal
		// stale are assets whose price went stale an hour ago.
		stale    []string
		total    string
		chains   map[string]string
		unpriced []string
	}{
		{
			name: "totals are summed before rounding",
			positions: []store.Position{
				{Chain: "ethereum", Asset: "A", Amount: d("0.004")},
				{Chain: "ethereum", Asset: "A", Amount: d("0.004")},
				{Chain: "polygon", Asset: "A", Amount: d("0.004")},
			},
			prices: map[string]decimal.Decimal{"A": d("1")},
			total:  "0.01", chains: map[string]string{"ethereum": "0.01", "polygon": "0.00"},
		},
		{
			name:      "half-even down",
			positions: []store.Position{{Chain: "solana", Asset: "B", Amount: d("0.125")}},
			prices:    map[string]decimal.Decimal{"B": d("1")},
			total:     "0.12", chains: map[string]string{"solana": "0.12"},
		},
		{
			name:      "half-even up",
			positions: []store.Position{{Chain: "solana", Asset: "B", Amount: d("0.135")}},
			prices:    map[string]decimal.Decimal{"B": d("1")},
			total:     "0.14", chains: map[string]string{"solana": "0.14"},
		},
		{
			name: "no float error",
			positions: []store.Position{
				{Chain: "ethereum", Asset: "C", Amount: d("0.1")},
				{Chain: "ethereum", Asset: "C", Amount: d("0.2")},
			},
			prices: map[string]decimal.Decimal{"C": d("1000000000000")},
			total:  "300000000000.00", chains: map[string]string{"ethereum": "300000000000.00"},
		},
		{
			name:      "unpriced asset adds nothing",
			positions: []store.Position{{Chain: "ethereum", Asset: "X", Amount: d("5")}},
			prices:    map[string]decimal.Decimal{},
			total:     "0.00", chains: map[string]string{}, unpriced: []string{"X"},
		},
		{
			name: "a stale price values nothing and names its asset; a zero holding needs no price",
			positions: []store.Position{
				{Chain: "ethereum", Asset: "S", Amount: d("2")},
				{Chain: "ethereum", Asset: "A", Amount: d("3")},
				{Chain: "polygon", Asset: "Z", Amount: d("0")},
			},
			prices: map[string]decimal.Decimal{"S": d("10"), "A": d("1")},
			stale:  []string{"S"},
			total:  "3.00", chains: map[string]string{"ethereum": "3.00"}, unpriced: []string{"S"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
			prices := map[string]store.Price{}
			for asset, usd := range tc.prices {
				p := store.Price{Asset: asset, USDPrice: usd, UpdatedAt: now.Add(-2 * time.Hour)}
				if slices.Contains(tc.stale, asset) {
					after := now.Add(-time.Hour)
					p.StaleAfter = &after
				}
				prices[asset] = p
			}
			v := value(tc.positions, prices, now)
			if !slices.Equal(v.unpriced, tc.unpriced) {
				t.Fatalf("unpriced %v, want %v", v.unpriced, tc.unpriced)
			}
			for i, p := range tc.positions {
				if _, ok := tc.prices[p.Asset]; ok != (v.priceAt[i] != nil) {
					t.Fatalf("position %d (%s): priceAt %v, with a price %v", i, p.Asset, v.priceAt[i], ok)
				}
			}
			if got := v.total.StringFixedBank(2); got != tc.total {
				t.Fatalf("total %s, want %s", got, tc.total)
			}
			if len(v.byChain) != len(tc.chains) {
				t.Fatalf("chains %v, want %v", v.byChain, tc.chains)
			}
			for ch, want := range tc.chains {
				if got := v.byChain[ch].StringFixedBank(2); got != want {
					t.Fatalf("%s: %s, want %s", ch, got, want)
				}
			}
		})
	}
}
