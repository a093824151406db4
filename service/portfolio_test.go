package service

import (
	"testing"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/store"
)

func TestValueSumsExactlyAndRoundsHalfEvenForDisplay(t *testing.T) {
	d := decimal.RequireFromString
	cases := []struct {
		name      string
		positions []store.Position
		prices    map[string]decimal.Decimal
		total     string
		chains    map[string]string
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
			total:     "0.00", chains: map[string]string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := value(tc.positions, tc.prices)
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
