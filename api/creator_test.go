package api

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/store/storetest"
)

// createdBy means one thing everywhere: the credential that made the record, with the
// person behind it as createdByUser. Every kind of record a developer makes says so, made
// through a person's key, through their session, and through a key no person made.
func TestCreatedByIsTheCredentialEverywhere(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixtureOn(t, s)
		u := matrixPerson(t, f, f.creds.OrgID, store.RoleMember, map[string]string{"pay": "read,write,developer"}, "-")
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
