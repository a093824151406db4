package main

import "testing"

// The bot signs a statement only when it says the payment the rule judged.
func TestTheBotSignsOnlyTheStatementOfWhatItJudged(t *testing.T) {
	var it item
	it.OrderID, it.Domain = "ord_1", "payment"
	it.Order.Details.Asset, it.Order.Details.Amount = "USDC", "20000"
	it.Order.Details.Destination.Address = "0x2222222222222222222222222222222222222222"
	statement := func(order, to, asset, amount string) string {
		return `{"orderId":"` + order + `","intent":[{"leg":"TRANSFER","to":"` + to + `","asset":"` + asset + `","amount":"` + amount + `"}]}`
	}
	const to = "0x2222222222222222222222222222222222222222"
	for _, c := range []struct {
		statement, why string
	}{
		{statement("ord_1", to, "USDC", "20000000000"), ""},
		{statement("ord_2", to, "USDC", "20000000000"), "is of another order"},
		{statement("ord_1", "0x1111111111111111111111111111111111111111", "USDC", "20000000000"), "pays another destination or asset"},
		{statement("ord_1", to, "USDC", "20000000000000"), "moves another amount"},
		{statement("ord_1", to, "WBTC", "20000000000"), "pays another destination or asset"},
		{"{", "does not parse"},
	} {
		if got := differs(c.statement, it); got != c.why {
			t.Errorf("%s: %q, want %q", c.statement, got, c.why)
		}
	}
}
