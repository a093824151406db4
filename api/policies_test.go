package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/store"
)

func TestPolicyReadWriteAndDryRun(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	r := f.do(t, "GET", "/api/v1/policies/pay", sk, nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var pol apitypes.Policy
	if err := json.Unmarshal(r.body, &pol); err != nil || pol.Version != 1 || len(pol.Rules.DestinationWhitelist) == 0 {
		t.Fatalf("seeded policy %s", r.body)
	}

	eth := f.creds.Wallets[0].ID
	pay := func(amount, to string) string {
		return `{"walletId":"` + eth + `","asset":"USDC","amount":"` + amount + `","destination":{"address":"` + to + `"}}`
	}
	const ok = "0x1111111111111111111111111111111111111111"
	cases := []struct {
		name, body string
		allowed    bool
		quorum     int
		violated   string
	}{
		{"small payment", pay("500", ok), true, 0, ""},
		{"tier 1", pay("20000", ok), true, 1, ""},
		{"tier 2", pay("1000000", ok), true, 2, ""},
		{"over the limit", pay("5000001", ok), false, 2, "maxOrderUsd"},
		{"not whitelisted", pay("5", "0x9999999999999999999999999999999999999999"), false, 0, "destinationWhitelist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(t, "/api/v1/policies/pay/evaluate", sk, tc.body)
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var e apitypes.PolicyEvaluation
			if err := json.Unmarshal(r.body, &e); err != nil {
				t.Fatal(err)
			}
			if e.Allowed != tc.allowed || e.Quorum != tc.quorum || e.ApprovalRequired != (tc.quorum > 0) || e.PolicyVersion != 1 {
				t.Fatalf("evaluation %s", r.body)
			}
			if tc.violated != "" && (len(e.Violations) != 1 || e.Violations[0].Rule != tc.violated) {
				t.Fatalf("violations %s", r.body)
			}
		})
	}

	// A new policy applies at once to the next evaluation; its version moves on.
	r = f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{"maxOrderUsd":"100","approvalTiers":[{"minUsd":"50","quorum":1}]}`), "Content-Type", "application/json")
	if r.status != 200 || !strings.Contains(string(r.body), `"version":2`) {
		t.Fatalf("put %d %s", r.status, r.body)
	}
	r = f.post(t, "/api/v1/policies/pay/evaluate", sk, pay("500", "0x9999999999999999999999999999999999999999"))
	var e apitypes.PolicyEvaluation
	_ = json.Unmarshal(r.body, &e)
	if e.Allowed || len(e.Violations) != 1 || e.Violations[0].Rule != "maxOrderUsd" || e.Quorum != 1 || e.PolicyVersion != 2 {
		t.Fatalf("after the change: %s", r.body)
	}
	audit, _ := f.store.ListAudit(t.Context(), f.creds.OrgID, []string{"pay"}, nil, "", 100)
	audit = slices.DeleteFunc(audit, func(a store.AuditLog) bool { return a.CorrelationID == "seed" })
	if len(audit) != 1 || audit[0].Action != "policy.published" {
		t.Fatalf("audit %+v", audit)
	}

	// Refusals.
	f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{"maxOrderUSD":"1"}`)).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{"approvalTiers":[{"minUsd":"1","quorum":0}]}`)).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "GET", "/api/v1/policies/pay", f.creds.Keys["pay"].Read, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "PUT", "/api/v1/policies/pay", f.creds.Keys["pay"].Approve, strings.NewReader(`{}`)).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/api/v1/policies/trade", sk, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/api/v1/policies/mining", sk, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	f.post(t, "/api/v1/policies/treasury/evaluate", f.creds.Keys["treasury"].SK, `{}`).wantProblem(t, 404, apitypes.CodeNotFound)
	f.post(t, "/api/v1/policies/pay/evaluate", f.creds.Keys["pay"].Read, pay("5", ok)).wantProblem(t, 403, apitypes.CodePermissionDenied)
	// Another organisation's policy is its own.
	other := f.do(t, "GET", "/api/v1/policies/pay", f.creds.OtherOrg.Keys["pay"]["sk"], nil)
	if other.status != 200 || !strings.Contains(string(other.body), `"version":1`) {
		t.Fatalf("other org policy: %s", other.body)
	}
}

// What GET answers can be edited and put back: PUT takes the policy whole ({app, version,
// rules, …}) as well as bare rules, and takes its rules.
func TestAPolicyReadCanBePutBack(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	got := f.do(t, "GET", "/api/v1/policies/pay", sk, nil)
	var p map[string]any
	if got.status != 200 || json.Unmarshal(got.body, &p) != nil {
		t.Fatalf("get: %d %s", got.status, got.body)
	}
	p["rules"].(map[string]any)["maxOrderUsd"] = "123456"
	edited, _ := json.Marshal(p)
	r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(string(edited)))
	var put map[string]any
	if r.status != 200 || json.Unmarshal(r.body, &put) != nil || put["version"] != p["version"].(float64)+1 ||
		put["rules"].(map[string]any)["maxOrderUsd"] != "123456" {
		t.Fatalf("put back: %d %s", r.status, r.body)
	}
	// The app it names is the path's; nothing but a policy's fields beside the rules.
	p["app"] = "trade"
	wrongApp, _ := json.Marshal(p)
	if r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(string(wrongApp))); r.status != 422 || !strings.Contains(string(r.body), `"field":"app"`) {
		t.Fatalf("another app's name: %d %s", r.status, r.body)
	}
	if r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{"rules":{"maxOrderUsd":"1"},"colour":"red"}`)); r.status != 422 ||
		!strings.Contains(string(r.body), `"field":"colour"`) {
		t.Fatalf("an unknown field beside the rules: %d %s", r.status, r.body)
	}
	if r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{"rules":{"maxOrderUSD":"1"}}`)); r.status != 422 ||
		!strings.Contains(string(r.body), `"field":"rules"`) {
		t.Fatalf("rules with a misspelt field: %d %s", r.status, r.body)
	}
}
