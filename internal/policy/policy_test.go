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

func TestDiffNamesEachChangedRule(t *testing.T) {
	from, err := Parse([]byte(`{"maxOrderUsd":"5000000","destinationWhitelist":["0xa","0xb"],"approvalTiers":[{"minUsd":"10000","quorum":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	to, err := Parse([]byte(`{"maxOrderUsd":"1000000","destinationWhitelist":["0xb","0xc"],"windows":[{"scope":"wallet","hours":24,"limitUsd":"1000000"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	changes := Diff(from, to)
	got := map[string]Change{}
	for _, c := range changes {
		got[c.Rule] = c
	}
	if len(changes) != 4 {
		t.Fatalf("want 4 changes, got %+v", changes)
	}
	if c := got["maxOrderUsd"]; c.Kind != ChangeChanged || string(c.From) != `"5000000"` || string(c.To) != `"1000000"` {
		t.Errorf("maxOrderUsd: %+v", c)
	}
	if c := got["destinationWhitelist"]; len(c.Added) != 1 || string(c.Added[0]) != `"0xc"` || len(c.Removed) != 1 || string(c.Removed[0]) != `"0xa"` || c.Text != `destinationWhitelist: +"0xc", -"0xa"` {
		t.Errorf("destinationWhitelist: %+v", c)
	}
	if c := got["approvalTiers"]; c.Kind != ChangeRemoved || string(c.To) != "null" {
		t.Errorf("approvalTiers: %+v", c)
	}
	if c := got["windows"]; c.Kind != ChangeAdded || string(c.From) != "null" {
		t.Errorf("windows: %+v", c)
	}
	if d := Diff(to, to); len(d) != 0 {
		t.Errorf("a policy differs from itself: %+v", d)
	}
}

func TestWindowsAreParsedStrictly(t *testing.T) {
	cases := []struct{ doc, wantErr string }{
		{`{"windows":[{"scope":"wallet","hours":24,"limitUsd":"1000000"}]}`, ""},
		{`{"windows":[{"scope":"planet","hours":24,"limitUsd":"1"}]}`, "scope"},
		{`{"windows":[{"scope":"app","hours":0,"limitUsd":"1"}]}`, "hours"},
		{`{"windows":[{"scope":"app","hours":24,"limitUsd":1}]}`, "limitUsd"},
		{`{"windows":[{"scope":"app","hours":24}]}`, "limitUsd"},
		{`{"windows":[{"scope":"app","hours":24,"limitUsd":"1","per":"x"}]}`, "unknown field"},
		{`{"changeApprovals":-1}`, "changeApprovals"},
		{`{"changeApprovals":2}`, ""},
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
