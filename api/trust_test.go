package api

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// createdBy means one thing everywhere: the credential that made the record, with the
// person behind it as createdByUser. Every kind of record a developer makes says so, made
// through a person's key, through their session, and through a key no person made.
func TestCreatedByIsTheCredentialEverywhere(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixtureOn(t, s)
		u := matrixPerson(t, f, f.creds.OrgID, auth.RoleMember, map[string]string{"pay": "read,write,developer"}, "-")
		session := sessionFor(t, f, u)
		m := signedIn{token: session, csrf: auth.CSRFToken(session), userID: u.ID}
		var devKey createdKey
		if r := f.as(t, m, "POST", "/developer/api-keys?app=pay", `{"kind":"tk","actions":["developer","read","write"]}`); r.status != 201 ||
			json.Unmarshal(r.body, &devKey) != nil {
			t.Fatalf("the person's developer key: %d %s", r.status, r.body)
		}
		since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
		type creator struct {
			ID            string  `json:"id"`
			CreatedBy     *string `json:"createdBy"`
			CreatedByUser *string `json:"createdByUser"`
		}
		seeded, err := f.store.APIKeyBySecretHash(context.Background(), hashOf(f.creds.Keys["pay"].SK))
		if err != nil {
			t.Fatal(err)
		}
		// Each maker makes one of every record, which must name it as its creator.
		makers := []struct {
			name       string
			do         func(method, path, body string) response
			by, byUser string
		}{
			{"the person's key", func(method, path, body string) response { return f.post(t, path, devKey.Secret, body) }, devKey.ID, u.ID},
			{"the person's session", func(method, path, body string) response { return f.as(t, m, method, path+"?app=pay", body) }, u.ID, u.ID},
			{"the seeded sk_", func(method, path, body string) response { return f.post(t, path, f.creds.Keys["pay"].SK, body) }, seeded.ID, ""},
		}
		for _, mk := range makers {
			made := map[string]response{
				"api key":          mk.do("POST", "/developer/api-keys", `{"kind":"pk"}`),
				"oauth client":     mk.do("POST", "/developer/oauth-clients", `{"scopes":"pay:read"}`),
				"websocket config": mk.do("POST", "/developer/websockets", `{"events":["order.*"]}`),
				"webhook":          mk.do("POST", "/developer/webhooks", `{"url":"https://hooks.example.com/`+u.ID+`","events":["order.*"]}`),
			}
			var hook creator
			_ = json.Unmarshal(made["webhook"].body, &hook)
			made["webhook recovery"] = mk.do("POST", "/developer/webhooks/"+hook.ID+"/recover", `{"since":"`+since+`"}`)
			if mk.name == "the person's session" {
				// Policy routes name their app in the path, not in ?app=.
				made["policy draft"] = f.as(t, m, "POST", "/api/v1/policies/pay/drafts", `{"rules":{"maxOrderUsd":"7"}}`)
			} else {
				made["policy draft"] = mk.do("POST", "/api/v1/policies/pay/drafts", `{"rules":{"maxOrderUsd":"7"}}`)
			}
			var draft creator
			_ = json.Unmarshal(made["policy draft"].body, &draft)
			if mk.name == "the person's session" {
				made["policy dry run"] = f.as(t, m, "POST", "/api/v1/policies/pay/dry-runs", `{"draftId":"`+draft.ID+`"}`)
			} else {
				made["policy dry run"] = mk.do("POST", "/api/v1/policies/pay/dry-runs", `{"draftId":"`+draft.ID+`"}`)
			}
			for kind, r := range made {
				var c creator
				if r.status != 201 && r.status != 202 || json.Unmarshal(r.body, &c) != nil {
					t.Fatalf("%s makes a %s: %d %s", mk.name, kind, r.status, r.body)
				}
				if deref(c.CreatedBy) != mk.by || deref(c.CreatedByUser) != mk.byUser {
					t.Errorf("%s made a %s: createdBy %q, createdByUser %q; want %q, %q", mk.name, kind,
						deref(c.CreatedBy), deref(c.CreatedByUser), mk.by, mk.byUser)
				}
			}
		}
	})
}

// Every app can find its wallets: any app's read lists the organisation's wallets (id,
// chain, address, scheme, label; no balances), a key restricted to some wallets only
// those, another organisation none of them, and a credential without read nothing.
func TestEveryAppListsTheOrganisationsWallets(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixtureOn(t, s)
		type listed struct {
			Data       []map[string]any `json:"data"`
			NextCursor *string          `json:"nextCursor"`
		}
		list := func(token, query string) (listed, response) {
			t.Helper()
			r := f.do(t, "GET", "/api/v1/wallets"+query, token, nil)
			var l listed
			if r.status == 200 {
				if err := json.Unmarshal(r.body, &l); err != nil {
					t.Fatal(err)
				}
			}
			return l, r
		}
		for _, token := range []string{f.creds.Keys["pay"].SK, f.creds.Keys["trade"].Read, f.creds.Keys["earn"].Read, f.creds.Keys["treasury"].Read} {
			l, r := list(token, "?limit=200")
			if r.status != 200 || len(l.Data) != len(f.creds.Wallets) {
				t.Fatalf("any app's read lists every wallet: %d %s", r.status, r.body)
			}
			for _, w := range l.Data {
				if len(w) != 5 || w["id"] == nil || w["chain"] == nil || w["address"] == nil || w["scheme"] == nil || w["label"] == nil {
					t.Fatalf("a wallet of the directory: %v (id, chain, address, scheme, label, nothing else)", w)
				}
			}
		}
		// Paged like every list.
		first, _ := list(f.creds.Keys["pay"].SK, "?limit=2")
		if len(first.Data) != 2 || first.NextCursor == nil {
			t.Fatalf("first page %+v", first)
		}
		second, _ := list(f.creds.Keys["pay"].SK, "?limit=200&cursor="+*first.NextCursor)
		if len(second.Data) != len(f.creds.Wallets)-2 || second.Data[0]["id"] == first.Data[1]["id"] {
			t.Fatalf("second page %+v", second)
		}
		// A key restricted to a wallet lists that one.
		mine := f.creds.Wallets[3].ID
		restricted := f.newKey(t, f.creds.Keys["pay"].SK, `{"kind":"tk","actions":["read","write"],"resourceIds":["`+mine+`"]}`)
		if l, r := list(restricted.Secret, ""); r.status != 200 || len(l.Data) != 1 || l.Data[0]["id"] != mine {
			t.Fatalf("a restricted key: %d %s", r.status, r.body)
		}
		// Without read, or from another organisation: nothing of ours.
		_, r := list(f.creds.Keys["pay"].Approve, "")
		r.wantProblem(t, 403, "permission_denied")
		if l, r := list(f.creds.OtherOrg.Keys["pay"]["sk"], ""); r.status != 200 || len(l.Data) != 1 || l.Data[0]["id"] == mine {
			t.Fatalf("another organisation: %d %s", r.status, r.body)
		}
	})
}

// Evaluating an order against the policy in force takes write; against a draft or an
// earlier version, which are a developer's settings, it takes developer.
func TestEvaluatingAgainstADraftOrAnEarlierVersionNeedsDeveloper(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixtureOn(t, s)
		sk := f.creds.Keys["pay"].SK
		writer := f.newKey(t, sk, `{"kind":"tk","actions":["write"]}`).Secret
		developer := f.newKey(t, sk, `{"kind":"tk","actions":["developer"]}`).Secret
		var draft struct{ ID string }
		if r := f.post(t, "/api/v1/policies/pay/drafts", sk, `{"rules":{"maxOrderUsd":"7"}}`); r.status != 201 || json.Unmarshal(r.body, &draft) != nil {
			t.Fatalf("draft: %d %s", r.status, r.body)
		}
		body := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
		if r := f.post(t, "/api/v1/policies/pay/evaluate", writer, body); r.status != 200 {
			t.Fatalf("a writer against the policy in force: %d %s", r.status, r.body)
		}
		for _, q := range []string{"?draft=" + draft.ID, "?version=1"} {
			f.post(t, "/api/v1/policies/pay/evaluate"+q, writer, body).wantProblem(t, 403, apitypes.CodePermissionDenied)
			if r := f.post(t, "/api/v1/policies/pay/evaluate"+q, developer, body); r.status != 200 {
				t.Fatalf("a developer %s: %d %s", q, r.status, r.body)
			}
		}
	})
}
