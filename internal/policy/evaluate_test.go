package policy

import (
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// seeded is the policy every app of the demo organisation starts with (SPEC section 10).
func seeded(t *testing.T) Rules {
	t.Helper()
	r, err := Parse([]byte(`{
		"maxOrderUsd": "5000000",
		"dailyVolumeUsd": "6000000",
		"destinationWhitelist": ["0x1111111111111111111111111111111111111111", "0x000000000000000000000000000000000000dEaD"],
		"deniedPairs": [["WBTC", "SOL"]],
		"allowedProtocols": ["aave", "compound"],
		"approvalTiers": [{"minUsd": "10000", "quorum": 1}, {"minUsd": "1000000", "quorum": 2}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEvaluate(t *testing.T) {
	d := decimal.RequireFromString
	cases := []struct {
		name       string
		order      Order
		spent      string
		violations []string
		quorum     int
	}{
		{"small payment to whitelisted address", Order{Domain: "payment", AmountUSD: d("500"), Destination: "0x1111111111111111111111111111111111111111"}, "0", nil, 0},
		{"whitelist ignores hex case", Order{Domain: "payment", AmountUSD: d("500"), Destination: "0x000000000000000000000000000000000000DEAD"}, "0", nil, 0},
		{"payment to unknown address", Order{Domain: "payment", AmountUSD: d("500"), Destination: "0x9999999999999999999999999999999999999999"}, "0", []string{RuleDestinationWhitelist}, 0},
		{"tier 1 at its minimum", Order{Domain: "payment", AmountUSD: d("10000"), Destination: "0x1111111111111111111111111111111111111111"}, "0", nil, 1},
		{"just under tier 1", Order{Domain: "payment", AmountUSD: d("9999.99"), Destination: "0x1111111111111111111111111111111111111111"}, "0", nil, 0},
		{"tier 2", Order{Domain: "payment", AmountUSD: d("1000000"), Destination: "0x1111111111111111111111111111111111111111"}, "0", nil, 2},
		{"at the order limit", Order{Domain: "earn", AmountUSD: d("5000000"), Protocol: "aave"}, "0", nil, 2},
		{"over the order limit by a cent", Order{Domain: "earn", AmountUSD: d("5000000.01"), Protocol: "aave"}, "0", []string{RuleMaxOrderUSD}, 2},
		{"daily volume reached exactly", Order{Domain: "borrow", AmountUSD: d("1000"), Protocol: "Compound"}, "5999000", nil, 0},
		{"daily volume exceeded", Order{Domain: "borrow", AmountUSD: d("1000.01"), Protocol: "compound"}, "5999000", []string{RuleDailyVolumeUSD}, 0},
		{"unknown protocol", Order{Domain: "earn", AmountUSD: d("100"), Protocol: "maker"}, "0", []string{RuleAllowedProtocols}, 0},
		{"denied pair", Order{Domain: "trade", AmountUSD: d("100"), SellAsset: "WBTC", BuyAsset: "SOL"}, "0", []string{RuleDeniedPairs}, 0},
		{"denied pair the other way round", Order{Domain: "trade", AmountUSD: d("100"), SellAsset: "SOL", BuyAsset: "WBTC"}, "0", []string{RuleDeniedPairs}, 0},
		{"allowed pair", Order{Domain: "trade", AmountUSD: d("100"), SellAsset: "ETH", BuyAsset: "USDC"}, "0", nil, 0},
		{"several violations at once", Order{Domain: "trade", AmountUSD: d("7000000"), SellAsset: "WBTC", BuyAsset: "SOL"}, "0",
			[]string{RuleMaxOrderUSD, RuleDailyVolumeUSD, RuleDeniedPairs}, 2},
		{"payment rules do not apply to trades", Order{Domain: "trade", AmountUSD: d("1"), SellAsset: "ETH", BuyAsset: "USDC", Destination: "0xnot"}, "0", nil, 0},
	}
	r := seeded(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := r.Evaluate(tc.order, Usage{DailyVolumeUSD: d(tc.spent)})
			var got []string
			for _, v := range e.Violations() {
				got = append(got, v.Rule)
				if v.Message == "" {
					t.Fatalf("violation %s without a message", v.Rule)
				}
			}
			if !slices.Equal(got, tc.violations) {
				t.Fatalf("violations %v, want %v (checks %+v)", got, tc.violations, e.Checks)
			}
			if e.Allowed() != (len(tc.violations) == 0) || e.Quorum != tc.quorum || e.ApprovalRequired != (tc.quorum > 0) {
				t.Fatalf("allowed %v quorum %d required %v", e.Allowed(), e.Quorum, e.ApprovalRequired)
			}
		})
	}
}

func TestEvaluateWithAllowedPairsAndNoRules(t *testing.T) {
	d := decimal.RequireFromString
	r, err := Parse([]byte(`{"allowedPairs": [["ETH", "USDC"]]}`))
	if err != nil {
		t.Fatal(err)
	}
	if e := r.Evaluate(Order{Domain: "trade", AmountUSD: d("1"), SellAsset: "USDC", BuyAsset: "ETH"}, Usage{}); !e.Allowed() {
		t.Fatalf("allowed pair refused: %+v", e)
	}
	if e := r.Evaluate(Order{Domain: "trade", AmountUSD: d("1"), SellAsset: "WBTC", BuyAsset: "ETH"}, Usage{}); e.Allowed() {
		t.Fatal("a pair outside allowedPairs must be refused")
	}
	empty := Rules{}
	e := empty.Evaluate(Order{Domain: "payment", AmountUSD: d("99999999"), Destination: "0xany"}, Usage{})
	if !e.Allowed() || e.ApprovalRequired || len(e.Checks) != 0 {
		t.Fatalf("an empty policy allows everything without approval: %+v", e)
	}
}

func TestWindowsCountTheirKeysVolume(t *testing.T) {
	d := decimal.RequireFromString
	r, err := Parse([]byte(`{"windows":[{"scope":"wallet","hours":24,"limitUsd":"1000"},{"scope":"destination","hours":1,"limitUsd":"100"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	pay := Order{Domain: "payment", App: "payments", WalletID: "wal_1", Asset: "USDC", AmountUSD: d("60"), Destination: "0xAB"}
	e := r.Evaluate(pay, Usage{Windows: []decimal.Decimal{d("900"), d("40")}})
	if !e.Allowed() || len(e.Windows) != 2 {
		t.Fatalf("60 on 900/1000 and 40/100 passes: %+v", e)
	}
	if w := e.Windows[1]; w.Key != "0xab" || !w.RemainingUSD.Equal(d("60")) || !w.UsedUSD.Equal(d("40")) {
		t.Errorf("destination window: %+v", w)
	}
	e = r.Evaluate(pay, Usage{Windows: []decimal.Decimal{d("940.01"), d("0")}})
	if e.Allowed() || e.Violations()[0].Rule != RuleWindows || !strings.Contains(e.Violations()[0].Message, "wallet wal_1 over 24 h") {
		t.Fatalf("1000.01 of 1000 must be refused: %+v", e)
	}
	trade := Order{Domain: "trade", App: "trading", WalletID: "wal_1", Asset: "ETH", AmountUSD: d("10")}
	if e := r.Evaluate(trade, Usage{}); len(e.Windows) != 1 || e.Windows[0].Scope != ScopeWallet {
		t.Errorf("a destination window does not apply to a trade: %+v", e.Windows)
	}
}

// TestABatchIsJudgedOnItsTotalAndEveryRecipient: limits and tiers see the batch's total;
// the whitelist sees every recipient and names those off it by index; a destination window,
// which cannot count a batch's recipients, refuses it rather than let it through uncounted.
func TestABatchIsJudgedOnItsTotalAndEveryRecipient(t *testing.T) {
	d := decimal.RequireFromString
	r, err := Parse([]byte(`{"maxOrderUsd":"1000","destinationWhitelist":["0x1111111111111111111111111111111111111111","0x2222222222222222222222222222222222222222"],` +
		`"approvalTiers":[{"minUsd":"500","quorum":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	listed := []string{"0x1111111111111111111111111111111111111111", "0x2222222222222222222222222222222222222222"}
	e := r.Evaluate(Order{Domain: "payment", AmountUSD: d("600"), Recipients: listed}, Usage{})
	if !e.Allowed() || e.Quorum != 1 {
		t.Fatalf("a whitelisted batch worth 600 USD: allowed %v, quorum %d (%+v)", e.Allowed(), e.Quorum, e.Checks)
	}
	e = r.Evaluate(Order{Domain: "payment", AmountUSD: d("1000.01"), Recipients: listed}, Usage{})
	if v := e.Violations(); len(v) != 1 || v[0].Rule != RuleMaxOrderUSD {
		t.Fatalf("a batch over the order limit in total: violations %+v", v)
	}
	off := append(slices.Clone(listed), "0x3333333333333333333333333333333333333333", "0x1111111111111111111111111111111111111111", "0xdead")
	e = r.Evaluate(Order{Domain: "payment", AmountUSD: d("1"), Recipients: off}, Usage{})
	v := e.Violations()
	if len(v) != 1 || v[0].Rule != RuleDestinationWhitelist || !strings.Contains(v[0].Message, "recipients[2] 0x3333333333333333333333333333333333333333") ||
		!strings.Contains(v[0].Message, "recipients[4] 0xdead") || strings.Contains(v[0].Message, "recipients[3]") {
		t.Fatalf("a batch with recipients off the whitelist: violations %+v", v)
	}
	w, err := Parse([]byte(`{"windows":[{"scope":"destination","hours":1,"limitUsd":"100"},{"scope":"wallet","hours":24,"limitUsd":"1000"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e = w.Evaluate(Order{Domain: "payment", WalletID: "wal_1", AmountUSD: d("1"), Recipients: listed}, Usage{})
	if v := e.Violations(); len(v) != 1 || v[0].Rule != RuleWindows || !strings.Contains(v[0].Message, "destination window") {
		t.Fatalf("a batch under a destination window: violations %+v", v)
	}
	if len(e.Windows) != 1 || e.Windows[0].Key != "wal_1" {
		t.Fatalf("the wallet's window still counts the batch: %+v", e.Windows)
	}
}

// Rules that limit no volume decide alike whatever volume was counted, which is why an
// evaluation under them counts none; rules that do are told apart by it.
func TestOnlyVolumeRulesDependOnTheVolumeCounted(t *testing.T) {
	d := decimal.RequireFromString
	withVolume := seeded(t)
	without := withVolume
	without.DailyVolumeUSD = nil
	windowed := without
	windowed.Windows = []Window{{Scope: ScopeWallet, Hours: 24, LimitUSD: d("1000")}}
	if !withVolume.CountsVolume() || !windowed.CountsVolume() || without.CountsVolume() {
		t.Fatalf("CountsVolume: daily %v, window %v, neither %v", withVolume.CountsVolume(), windowed.CountsVolume(), without.CountsVolume())
	}
	order := Order{Domain: "payment", WalletID: "wal_1", AmountUSD: d("500"), Destination: "0x1111111111111111111111111111111111111111"}
	none, huge := Usage{}, Usage{DailyVolumeUSD: d("999999999"), Windows: []decimal.Decimal{d("999999999")}}
	if a, b := without.Evaluate(order, none), without.Evaluate(order, huge); a.Allowed() != b.Allowed() || !b.Allowed() || a.Quorum != b.Quorum {
		t.Fatalf("without volume rules the volume counted changed the decision: %+v, %+v", a.Checks, b.Checks)
	}
	for name, r := range map[string]Rules{"dailyVolumeUsd": withVolume, "a window": windowed} {
		if !r.Evaluate(order, none).Allowed() || r.Evaluate(order, huge).Allowed() {
			t.Fatalf("%s: the volume counted did not decide", name)
		}
	}
}
