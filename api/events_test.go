package api

import (
	"encoding/json"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
)

func TestEventsAndAuditLogsAreScoped(t *testing.T) {
	f := newFixture(t)
	eth := f.creds.Wallets[0].ID
	payID := decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
		`{"walletId":"`+eth+`","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))["id"].(string)
	decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
		`{"walletId":"`+eth+`","asset":"USDC","amount":"6","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))
	tradeID := decodeOrder(t, f.post(t, "/api/v1/trade-orders", f.creds.Keys["trade"].SK,
		`{"walletId":"`+eth+`","sellAsset":"ETH","buyAsset":"USDC","sellAmount":"1","maxSlippageBps":30}`))["id"].(string)

	events := func(token, query string) (ids []string, next apitypes.Cursor) {
		t.Helper()
		r := f.do(t, "GET", "/api/v1/events"+query, token, nil)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var page apitypes.Page[map[string]any]
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Data {
			if e["event"] != "Order.Created" || e["sequence"] != float64(1) || e["orderStatus"] != "draft" {
				t.Fatalf("event %v", e)
			}
			ids = append(ids, e["orderId"].(string))
		}
		return ids, page.NextCursor
	}
	if got, _ := events(f.creds.Keys["pay"].Read, ""); len(got) != 2 || got[0] != payID {
		t.Fatalf("pay sees its own two events, got %v", got)
	}
	if got, _ := events(f.creds.Keys["trade"].SK, ""); len(got) != 1 || got[0] != tradeID {
		t.Fatalf("trade sees only its event, got %v", got)
	}
	// The treasury dashboard reads portfolio, positions and audit records, not the other
	// apps' events.
	f.do(t, "GET", "/api/v1/events", f.creds.Keys["treasury"].Read, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/api/v1/events", f.creds.Keys["treasury"].SK, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	if got, _ := events(f.creds.Keys["pay"].SK, "?orderId="+payID); len(got) != 1 || got[0] != payID {
		t.Fatalf("orderId filter: %v", got)
	}
	// The list pages like every other: ?cursor= takes nextCursor; ?after=, its first
	// name, takes the same value.
	first, next := events(f.creds.Keys["pay"].SK, "?limit=1")
	if len(first) != 1 || first[0] != payID || next == "" {
		t.Fatalf("first page %v next %q", first, next)
	}
	for _, param := range []string{"cursor", "after"} {
		if rest, end := events(f.creds.Keys["pay"].SK, "?limit=1&"+param+"="+string(next)); len(rest) != 1 || rest[0] == payID || end != "" {
			t.Fatalf("?%s=nextCursor: %v, then %v", param, rest, end)
		}
	}
	f.do(t, "GET", "/api/v1/events?cursor="+string(next)+"&after="+payID, f.creds.Keys["pay"].SK, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
	if got, _ := events(f.creds.OtherOrg.Keys["pay"]["sk"], ""); len(got) != 0 {
		t.Fatalf("another organisation sees our events: %v", got)
	}
	f.do(t, "GET", "/api/v1/events", f.creds.Keys["pay"].Approve, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/api/v1/events", f.creds.Keys["pay"].PK, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)

	audit := func(token string) []apitypes.AuditLog {
		t.Helper()
		r := f.do(t, "GET", "/api/v1/audit-logs", token, nil)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var page apitypes.Page[apitypes.AuditLog]
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		return page.Data
	}
	// Newest first: pay's two payments, then the seeding's records of pay only.
	payAudit := audit(f.creds.Keys["pay"].Read)
	if len(payAudit) < 2 || payAudit[0].Action != "payment.created" || payAudit[1].Action != "payment.created" || payAudit[0].Actor.Type != "key" {
		t.Fatalf("pay audit %+v", payAudit)
	}
	for _, a := range payAudit {
		if a.App != "pay" {
			t.Fatalf("pay's reader sees a record of %s", a.App)
		}
	}
	// The treasury app sees every app's: the trade order's, then the payments'.
	all := audit(f.creds.Keys["treasury"].Read)
	if len(all) < 3 || all[0].Action != "trade.created" || all[1].Action != "payment.created" || all[2].Action != "payment.created" {
		t.Fatalf("treasury audit %+v", all)
	}
}
