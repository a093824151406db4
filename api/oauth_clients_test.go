package api

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
)

// The payout job of SPEC 1 as an OAuth client: a pay developer registers a client with
// pay:read pay:write, whose tokens can create and list payments but not approve, and
// which stops working when revoked.
func TestOAuthClientLifecycle(t *testing.T) {
	f := newFixture(t)
	dev := f.creds.Keys["pay"].SK
	r := f.post(t, "/developer/oauth-clients", dev, `{"scopes":"pay:write pay:read","label":"payout job"}`)
	if r.status != 201 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create %d %s", r.status, r.body)
	}
	var created createdClient
	if err := json.Unmarshal(r.body, &created); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.ClientID, "oac_") || !strings.HasPrefix(created.ClientSecret, "ocs_") ||
		created.Scopes != "pay:read pay:write" || created.App != "pay" {
		t.Fatalf("created %+v", created)
	}

	status, tok, _ := f.token(t, url.Values{"grant_type": {"client_credentials"}}, created.ClientID, created.ClientSecret)
	if status != 200 || tok["scope"] != "pay:read pay:write" {
		t.Fatalf("token %d %v", status, tok)
	}
	access := tok["access_token"].(string)
	if r := f.do(t, "GET", "/api/v1/payments", access, nil); r.status != 200 {
		t.Fatalf("list payments with the token: %d", r.status)
	}
	f.do(t, "GET", "/developer/oauth-clients", access, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/api/v1/treasury/portfolio", access, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/api/v1/trade-orders", access, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)

	// The secret is shown once; other apps and organisations see nothing.
	if list := f.do(t, "GET", "/developer/oauth-clients", dev, nil); strings.Contains(string(list.body), created.ClientSecret) ||
		!strings.Contains(string(list.body), created.ID) {
		t.Fatalf("list %s", list.body)
	}
	if other := f.do(t, "GET", "/developer/oauth-clients", f.creds.Keys["trade"].SK, nil); strings.Contains(string(other.body), created.ID) {
		t.Fatal("another app lists this client")
	}
	f.do(t, "DELETE", "/developer/oauth-clients/"+created.ID, f.creds.Keys["trade"].SK, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	f.do(t, "DELETE", "/developer/oauth-clients/"+created.ID, f.creds.OtherOrg.Keys["pay"]["sk"], nil).wantProblem(t, 404, apitypes.CodeNotFound)

	// Revoked: its tokens fail at once, and it can get no new one.
	if r := f.do(t, "DELETE", "/developer/oauth-clients/"+created.ID, dev, nil); r.status != 200 || !strings.Contains(string(r.body), `"revokedAt":"`) {
		t.Fatalf("revoke %d %s", r.status, r.body)
	}
	f.do(t, "GET", "/api/v1/payments", access, nil).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	if status, _, _ := f.token(t, url.Values{"grant_type": {"client_credentials"}}, created.ClientID, created.ClientSecret); status != 401 {
		t.Fatalf("token after revoke: %d", status)
	}

	for _, bad := range []string{`{"scopes":""}`, `{"scopes":"trade:read"}`, `{"scopes":"pay:fly"}`, `{"scopes":"pay"}`, `{"scope":"pay:read"}`} {
		f.post(t, "/developer/oauth-clients", dev, bad).wantProblem(t, 422, apitypes.CodeValidationFailed)
	}
	f.post(t, "/developer/oauth-clients", f.creds.Keys["pay"].Read, `{"scopes":"pay:read"}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
	for _, secret := range []string{created.ClientSecret, access} {
		if strings.Contains(f.logs.String(), secret) {
			t.Fatal("a secret appeared in the logs")
		}
	}
}
