package api

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
)

// A treasury tk_ key restricted to some wallets sees those wallets, their positions, and a
// portfolio valued over them alone.
func TestResourceRestrictedKeySeesOnlyItsWalletsOnTreasury(t *testing.T) {
	f := newFixture(t)
	// Wallet 2 holds 100 ETH and 1M USDC on ethereum, wallet 3 100k MATIC and 1M USDC on
	// polygon: 1.3M + 1.05M.
	mine := []string{f.creds.Wallets[2].ID, f.creds.Wallets[3].ID}
	slices.Sort(mine)
	key := f.newKey(t, f.creds.Keys["treasury"].SK, `{"kind":"tk","actions":["read"],"resourceIds":["`+mine[0]+`","`+mine[1]+`"]}`)

	var p apitypes.Portfolio
	if err := json.Unmarshal(f.do(t, "GET", "/api/v1/treasury/portfolio", key.Secret, nil).body, &p); err != nil {
		t.Fatal(err)
	}
	want := []apitypes.ChainValue{{Chain: "ethereum", USDValue: "1300000.00"}, {Chain: "polygon", USDValue: "1050000.00"}}
	if p.TotalUSD != "2350000.00" || p.WalletCount != 2 || !slices.Equal(p.ChainRollup, want) || p.SyncedAt == nil {
		t.Fatalf("portfolio %+v, want 2350000.00 over 2 wallets, %v", p, want)
	}

	var wallets apitypes.Page[apitypes.Wallet]
	if err := json.Unmarshal(f.do(t, "GET", "/api/v1/treasury/wallets", key.Secret, nil).body, &wallets); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range wallets.Data {
		got = append(got, w.ID)
	}
	if !slices.Equal(got, mine) {
		t.Fatalf("wallets %v, want %v", got, mine)
	}

	// Paged one by one, the positions are the two of each wallet.
	got = nil
	target := "/api/v1/treasury/positions?limit=1"
	for range 10 {
		var page apitypes.Page[apitypes.Position]
		if err := json.Unmarshal(f.do(t, "GET", target, key.Secret, nil).body, &page); err != nil {
			t.Fatal(err)
		}
		for _, pos := range page.Data {
			got = append(got, pos.WalletID)
		}
		if page.NextCursor == "" {
			break
		}
		target = "/api/v1/treasury/positions?limit=1&cursor=" + string(page.NextCursor)
	}
	if want := []string{mine[0], mine[0], mine[1], mine[1]}; !slices.Equal(got, want) {
		t.Fatalf("positions of wallets %v, want %v", got, want)
	}
}
