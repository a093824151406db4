package policy

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

func TestQuorumPicksTheHighestTierReached(t *testing.T) {
	r, err := Parse([]byte(`{"approvalTiers":[{"minUsd":"1000000","quorum":2},{"minUsd":"10000","quorum":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]int{"0": 0, "9999.99": 0, "10000": 1, "999999.999": 1, "1000000": 2, "5000000": 2}
	for usd, want := range cases {
		if got := r.Quorum(decimal.RequireFromString(usd)); got != want {
			t.Errorf("Quorum(%s) = %d, want %d", usd, got, want)
		}
	}
}

func TestParseIsStrict(t *testing.T) {
	cases := []struct {
		doc, wantErr string
	}{
		{`{"maxOrderUsd":"5000000"}`, ""},
		{`{"maxOrderUsd":"-1"}`, "maxOrderUsd"},
		{`{"dailyVolumeUsd":"-0.01"}`, "dailyVolumeUsd"},
		{`{"approvalTiers":[{"minUsd":"10","quorum":0}]}`, "quorum"},
		{`{"approvalTiers":[{"minUsd":"-10","quorum":1}]}`, "minUsd"},
		{`{"maxOrder":"5"}`, "unknown field"},
		{`{"maxOrderUSD":"5"}`, "unknown field"},
		{`[1]`, "JSON object"},
		{`{"maxOrderUsd":"five"}`, "policy"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.doc))
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s: unexpected %v", tc.doc, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: want error containing %q, got %v", tc.doc, tc.wantErr, err)
		}
	}
}

func TestDocumentRoundTripsAmountsAsStrings(t *testing.T) {
	max := decimal.RequireFromString("5000000.10")
	r := Rules{MaxOrderUSD: &max, DeniedPairs: [][2]string{{"WBTC", "SOL"}}}
	doc, err := r.Document()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc, `"maxOrderUsd":"5000000.1"`) {
		t.Fatalf("amounts must be JSON strings: %s", doc)
	}
	back, err := Parse([]byte(doc))
	if err != nil || !back.MaxOrderUSD.Equal(max) || back.DeniedPairs[0] != [2]string{"WBTC", "SOL"} {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}
