package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
)

// newKey creates a key with the creator's secret, and fails t unless it is created.
func (f *fixture) newKey(t *testing.T, creator, body string) createdKey {
	t.Helper()
	r := f.post(t, "/developer/api-keys", creator, body)
	var k createdKey
	if err := json.Unmarshal(r.body, &k); err != nil || r.status != 201 {
		t.Fatalf("create key %s: %d %s", body, r.status, r.body)
	}
	return k
}

func TestAPIKeyLifecycle(t *testing.T) {
	f := newFixture(t)
	dev := f.creds.Keys["trade"].SK
	r := f.post(t, "/developer/api-keys", dev, `{"kind":"tk","actions":["read","read"],"label":"dashboard"}`)
	if r.status != 201 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create %d %s", r.status, r.body)
	}
	var created createdKey
	if err := json.Unmarshal(r.body, &created); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Secret, "tk_") || created.App != "trade" || len(created.Actions) != 1 || created.Actions[0] != "read" {
		t.Fatalf("created %+v", created)
	}
	// The new key works, with exactly its actions.
	if r := f.do(t, "GET", "/api/v1/trade-orders", created.Secret, nil); r.status != 200 {
		t.Fatalf("using the new key: %d", r.status)
	}
	f.post(t, "/api/v1/trade-orders", created.Secret, `{}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/developer/api-keys", created.Secret, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)

	// The secret is shown once: the list has the hint only.
	list := f.do(t, "GET", "/developer/api-keys", dev, nil)
	if strings.Contains(string(list.body), created.Secret) || !strings.Contains(string(list.body), created.ID) {
		t.Fatalf("list %s", list.body)
	}
	// Another app's developer sees none of it and cannot revoke it.
	if other := f.do(t, "GET", "/developer/api-keys", f.creds.Keys["pay"].SK, nil); strings.Contains(string(other.body), created.ID) {
		t.Fatal("another app lists this key")
	}
	f.do(t, "DELETE", "/developer/api-keys/"+created.ID, f.creds.Keys["pay"].SK, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	f.do(t, "DELETE", "/developer/api-keys/"+created.ID, f.creds.OtherOrg.Keys["pay"]["sk"], nil).wantProblem(t, 404, apitypes.CodeNotFound)

	// Revoked: refused at once.
	if r := f.do(t, "DELETE", "/developer/api-keys/"+created.ID, dev, nil); r.status != 200 || !strings.Contains(string(r.body), `"revokedAt":"`) {
		t.Fatalf("revoke %d %s", r.status, r.body)
	}
	f.do(t, "GET", "/api/v1/trade-orders", created.Secret, nil).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	if r := f.do(t, "DELETE", "/developer/api-keys/"+created.ID, dev, nil); r.status != 200 {
		t.Fatalf("revoking twice is fine: %d", r.status)
	}

	for _, bad := range []string{`{"kind":"xk"}`, `{"kind":"tk"}`, `{"kind":"tk","actions":["fly"]}`, `{"kind":"sk","actions":["read"]}`, `{"kind":"pk","Label":"x"}`} {
		f.post(t, "/developer/api-keys", dev, bad).wantProblem(t, 422, apitypes.CodeValidationFailed)
	}
	if r := f.post(t, "/developer/api-keys", dev, `{"kind":"pk"}`); r.status != 201 {
		t.Fatalf("pk %d %s", r.status, r.body)
	}
	// Issued secrets never reach the log.
	if strings.Contains(f.logs.String(), created.Secret) {
		t.Fatal("a secret appeared in the logs")
	}
}

// A tk_ key limited to one wallet reads only that wallet's orders, and only their
// approval items, events and audit records.
func TestResourceRestrictedKeyReadsOnlyItsWallets(t *testing.T) {
	f := newFixture(t)
	pay := f.creds.Keys["pay"].SK
	mine, theirs := f.creds.Wallets[0].ID, f.creds.Wallets[1].ID
	key := f.newKey(t, pay, `{"kind":"tk","actions":["read","approve"],"resourceIds":["`+mine+`"]}`)
	orderFrom := func(wallet string) string {
		o := decodeOrder(t, f.post(t, "/api/v1/payments", pay,
			`{"walletId":"`+wallet+`","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))
		id := o["id"].(string)
		item := &store.ApprovalItem{ID: ids.New(ids.ApprovalItem), OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: id,
			Status: "pending", RequiredApprovals: 1, Reason: "r", PayloadHash: "h", Summary: "{}", CreatedBy: "key_maker",
			CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
		if err := f.store.CreateApprovalItem(context.Background(), item); err != nil {
			t.Fatal(err)
		}
		return id
	}
	own, other := orderFrom(mine), orderFrom(theirs)

	for _, path := range []string{"/api/v1/payments", "/api/v1/approvals", "/api/v1/events", "/api/v1/audit-logs"} {
		r := f.do(t, "GET", path, key.Secret, nil)
		if r.status != 200 || !strings.Contains(string(r.body), own) || strings.Contains(string(r.body), other) {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
		// The unrestricted key of the app sees both.
		if r := f.do(t, "GET", path, pay, nil); !strings.Contains(string(r.body), other) {
			t.Errorf("%s with the sk: %s", path, r.body)
		}
	}
	f.do(t, "GET", "/api/v1/payments/"+other, key.Secret, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	if r := f.do(t, "GET", "/api/v1/events?orderId="+other, key.Secret, nil); strings.Contains(string(r.body), other) {
		t.Errorf("events of another wallet's order: %s", r.body)
	}
}

// A tk_ key restricted to wallets, even holding developer, hands out only tk_ keys on some
// of its own wallets: never an unrestricted key, an sk_ or pk_ key, nor an OAuth client.
func TestResourceRestrictedKeyHandsOutOnlyItsWallets(t *testing.T) {
	f := newFixture(t)
	pay := f.creds.Keys["pay"].SK
	mine, theirs := f.creds.Wallets[0].ID, f.creds.Wallets[1].ID
	restricted := f.newKey(t, pay, `{"kind":"tk","actions":["read","developer"],"resourceIds":["`+mine+`"]}`)
	for _, body := range []string{
		`{"kind":"tk","actions":["read"]}`,
		`{"kind":"tk","actions":["read"],"resourceIds":[]}`,
		`{"kind":"tk","actions":["read"],"resourceIds":["` + theirs + `"]}`,
		`{"kind":"tk","actions":["read"],"resourceIds":["` + mine + `","` + theirs + `"]}`,
		`{"kind":"tk","actions":["read"],"resourceIds":["wal_nothing_here"]}`,
		`{"kind":"sk"}`,
		`{"kind":"pk"}`,
	} {
		f.post(t, "/developer/api-keys", restricted.Secret, body).wantProblem(t, 403, apitypes.CodePermissionDenied)
	}
	f.post(t, "/developer/oauth-clients", restricted.Secret, `{"scopes":"pay:read"}`).wantProblem(t, 403, apitypes.CodePermissionDenied)

	if narrower := f.newKey(t, restricted.Secret, `{"kind":"tk","actions":["read"],"resourceIds":["`+mine+`","`+mine+`"]}`); !slices.Equal(narrower.ResourceIDs, []string{mine}) {
		t.Fatalf("a tk key on its own wallet: %+v", narrower)
	}
}

// resourceIds name wallets of the caller's organisation, and nothing else.
func TestKeyResourceIDsAreWalletsOfTheOrganisation(t *testing.T) {
	f := newFixture(t)
	ws, err := f.store.ListWallets(context.Background(), f.creds.OtherOrg.OrgID, "", 1)
	if err != nil || len(ws) != 1 {
		t.Fatalf("the other organisation's wallet: %v %v", ws, err)
	}
	for _, id := range []string{"wal_nothing_here", ws[0].ID, ""} {
		r := f.post(t, "/developer/api-keys", f.creds.Keys["pay"].SK,
			`{"kind":"tk","actions":["read"],"resourceIds":["`+f.creds.Wallets[0].ID+`","`+id+`"]}`)
		r.wantProblem(t, 422, apitypes.CodeValidationFailed)
		if len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != "resourceIds" || !strings.Contains(r.problem.Errors[0].Message, id+" is not a wallet") {
			t.Fatalf("%q: %s", id, r.body)
		}
	}
}

// A create that issues a secret, retried with its Idempotency-Key, answers the same record
// without the secret: it is shown once and kept nowhere in the clear, replay included.
func TestReplayedCreatesNeverHoldTheSecret(t *testing.T) {
	f, owner := newPeopleFixture(t)
	pay := f.creds.Keys["pay"].SK
	for _, c := range []struct {
		path, body, secretField string
	}{
		{"/developer/api-keys", `{"kind":"sk"}`, "secret"},
		{"/developer/oauth-clients", `{"scopes":"pay:read"}`, "clientSecret"},
		{"/developer/team?app=pay", `{"email":"replay@example.com","actions":["read"]}`, "signInLink"},
	} {
		send := func() response {
			if strings.Contains(c.path, "/team") {
				return f.do(t, "POST", c.path, "", strings.NewReader(c.body), "Cookie", auth.SessionCookie+"="+owner.token,
					auth.CSRFHeader, owner.csrf, "Idempotency-Key", "replay-"+c.secretField)
			}
			return f.post(t, c.path, pay, c.body, "Idempotency-Key", "replay-"+c.secretField)
		}
		first, again := send(), send()
		var a, b map[string]any
		_ = json.Unmarshal(first.body, &a)
		_ = json.Unmarshal(again.body, &b)
		secret, _ := a[c.secretField].(string)
		if first.status != 201 || secret == "" || again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" ||
			b["id"] != a["id"] || b[c.secretField] != nil {
			t.Fatalf("%s: first %d %s, replay %d %s", c.path, first.status, first.body, again.status, again.body)
		}
		held, err := f.store.ClaimIdempotencyKey(context.Background(), &store.IdempotencyRecord{OrgID: f.creds.OrgID,
			Key: "replay-" + c.secretField, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}, time.Now().Add(-time.Hour))
		if err == nil || held == nil || len(held.ResponseBody) == 0 || strings.Contains(string(held.ResponseBody), secret) {
			t.Fatalf("%s: the stored answer %v %v", c.path, held, err)
		}
	}
}

// createdKey and createdClient are the answers to a create: the record and, this once, its
// secret.
type (
	createdKey    = apitypes.APIKey
	createdClient = apitypes.OAuthClient
	addedMember   = apitypes.TeamMember
)
