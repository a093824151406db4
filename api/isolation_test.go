package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/store"
)

// isolationTarget says which of org A pay's resources a route that takes an id is tried
// with, and a body the route accepts, so that only who asks decides the answer.
type isolationTarget struct {
	resources []string
	body      string
}

var (
	bothOrders     = isolationTarget{resources: []string{"draft order", "submitted order"}, body: `{}`}
	wsConfig       = isolationTarget{resources: []string{"websocket config"}, body: `{}`}
	webhookConfig  = isolationTarget{resources: []string{"webhook"}, body: `{}`}
	member         = isolationTarget{resources: []string{"member"}, body: `{"actions":["read","approve"]}`}
	signingRequest = isolationTarget{resources: []string{"signing request"}, body: `{"signature":"` + strings.Repeat("A", 86) + `=="}`}
)

// isolationTable lists every route that takes an id (and the channel, whose config id is in
// its query). A route added without an entry fails TestDataIsolation.
var isolationTable = map[string]isolationTarget{
	"PATCH /developer/team/:id":                                     member,
	"DELETE /developer/team/:id":                                    member,
	"POST /api/v1/approvals/:domain/:id/decide":                     {resources: []string{"approval item"}, body: `{"decision":"APPROVE"}`},
	"GET /api/v1/signing-requests/:id":                              signingRequest,
	"POST /api/v1/signing-requests/:id/signature":                   signingRequest,
	"GET /developer/api-keys/:id":                                   {resources: []string{"api key"}},
	"DELETE /developer/api-keys/:id":                                {resources: []string{"api key"}},
	"GET /developer/oauth-clients/:id":                              {resources: []string{"oauth client"}},
	"DELETE /developer/oauth-clients/:id":                           {resources: []string{"oauth client"}},
	"GET /developer/websockets/:id":                                 wsConfig,
	"PATCH /developer/websockets/:id":                               {resources: []string{"websocket config"}, body: `{"enabled":false}`},
	"DELETE /developer/websockets/:id":                              wsConfig,
	"POST /developer/websockets/:id/test":                           wsConfig,
	"GET /developer/webhooks/:id":                                   webhookConfig,
	"PATCH /developer/webhooks/:id":                                 {resources: []string{"webhook"}, body: `{"enabled":false}`},
	"DELETE /developer/webhooks/:id":                                webhookConfig,
	"POST /developer/webhooks/:id/rotate-secret":                    webhookConfig,
	"POST /developer/webhooks/:id/test":                             webhookConfig,
	"GET /developer/webhooks/:id/deliveries":                        webhookConfig,
	"POST /developer/webhooks/:id/deliveries/:deliveryId/redeliver": webhookConfig,
	"GET /api/v1/ws":                                                wsConfig,
}

func init() {
	for _, collection := range []string{"payments", "trade-orders", "earn-orders", "borrow-orders"} {
		isolationTable["GET /api/v1/"+collection+"/:id"] = bothOrders
		isolationTable["POST /api/v1/"+collection+"/:id/submit"] = bothOrders
	}
}

// takesAnID: the routes isolationTable must cover.
func takesAnID(path string) bool { return strings.Contains(path, ":id") || path == "/api/v1/ws" }

// TestDataIsolation creates real resources in org A's pay app and proves that no
// credential of another app of org A, nor of another organisation, reaches them: every
// route that takes an id answers 403 or 404, and no list answers with one of their ids.
// The people among them try the console's pages and forms too.
// Treasury credentials are left out: treasury read spans every app of the organisation.
func TestDataIsolation(t *testing.T) {
	f := newFixture(t)
	engine := unlimitedRouter(f)
	ctx := context.Background()
	pay := f.creds.Keys["pay"].SK
	created := func(r response) string {
		t.Helper()
		var body struct{ ID string }
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != 201 || body.ID == "" {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		return body.ID
	}

	// Org A pay's resources, by the name isolationTable gives them.
	wallet := f.creds.Wallets[0].ID
	payment := func(amount string) string {
		return created(f.post(t, "/api/v1/payments", pay, `{"walletId":"`+wallet+`","asset":"USDC","amount":"`+amount+
			`","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))
	}
	a := map[string]string{"draft order": payment("1"), "submitted order": payment("20000")}
	if r := f.post(t, "/api/v1/payments/"+a["submitted order"]+"/submit", pay, `{}`); r.status != 202 {
		t.Fatalf("submit %d %s", r.status, r.body)
	}
	// The workflow would open these; the fake Temporal does not.
	now := time.Now()
	item := &store.ApprovalItem{ID: ids.New(ids.ApprovalItem), OrgID: f.creds.OrgID, App: "pay", Domain: "payment",
		OrderID: a["submitted order"], Status: "pending", RequiredApprovals: 1, Reason: "r", PayloadHash: "h", Summary: "{}",
		CreatedBy: "key_maker", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := f.store.CreateApprovalItem(ctx, item); err != nil {
		t.Fatal(err)
	}
	sig := &store.SigningRequest{ID: ids.New(ids.SigningRequest), OrgID: f.creds.OrgID, App: "pay", Domain: "payment",
		OrderID: a["submitted order"], Leg: "TRANSFER", WalletID: wallet, Chain: "ethereum", UnsignedTx: "{}",
		Digest: strings.Repeat("ab", 32), Status: "pending", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, err := f.store.CreateSigningRequest(ctx, sig); err != nil {
		t.Fatal(err)
	}
	a["approval item"], a["signing request"] = item.ID, sig.ID
	a["api key"] = created(f.post(t, "/developer/api-keys", pay, `{"kind":"tk","actions":["read"]}`))
	a["oauth client"] = created(f.post(t, "/developer/oauth-clients", pay, `{"scopes":"pay:read"}`))
	a["websocket config"] = created(f.post(t, "/developer/websockets", pay, `{"events":["order.*"]}`))
	a["webhook"] = created(f.post(t, "/developer/webhooks", pay, `{"url":"https://hooks.example.com/treasury","events":["order.*"]}`))
	ownerUser, err := f.store.UserByEmail(ctx, f.creds.Owner.Email)
	if err != nil {
		t.Fatal(err)
	}
	ownerSession := sessionFor(t, f, ownerUser)
	owner := signedIn{token: ownerSession, csrf: auth.CSRFToken(ownerSession)}
	a["member"] = created(f.as(t, owner, "POST", "/developer/team?app=pay", `{"email":"isolated@example.com","actions":["read"]}`))
	// People belong to the organisation, not to an app: the team page of every app of org A
	// lists them.
	orgWide := map[string]bool{"member": true}

	// Another app of org A: every key, an OAuth token with every scope, and a member holding
	// every action, on each app but pay and treasury.
	sameOrg := map[string]credential{}
	for _, app := range []string{"trade", "earn", "borrow"} {
		k := f.creds.Keys[app]
		for kind, secret := range map[string]string{"sk": k.SK, "pk": k.PK, "read": k.Read, "approve": k.Approve, "sign": k.Sign} {
			if secret != "" {
				sameOrg[app+" "+kind] = credential{bearer: secret}
			}
		}
		sameOrg["oauth "+app] = credential{bearer: isolationToken(t, f, k.SK, app)}
	}
	// People are signed in without a password: its hash is slow, and sign-in is not what
	// this test is about.
	sameOrg["member trade:all"] = credential{app: "trade", session: sessionFor(t, f, matrixPerson(t, f, f.creds.OrgID, store.RoleMember,
		map[string]string{"trade": "read,write,approve,sign,developer"}, "-"))}
	// Another organisation, in the same app: its sk_, a tk_ holding every action, its pk_,
	// an OAuth token with every scope, and its owner, signed in.
	otherSK := f.creds.OtherOrg.Keys["pay"]["sk"]
	otherOrg := map[string]credential{
		"other org pay sk": {bearer: otherSK},
		"other org pay tk": {bearer: f.newKey(t, otherSK, `{"kind":"tk","actions":["read","write","approve","sign","developer"]}`).Secret},
		"other org pay pk": {bearer: f.newKey(t, otherSK, `{"kind":"pk"}`).Secret},
		"other org oauth":  {bearer: isolationToken(t, f, otherSK, "pay")},
		"other org owner":  {session: sessionFor(t, f, matrixPerson(t, f, f.creds.OtherOrg.OrgID, store.RoleOwner, nil, "-"))},
	}

	send := func(cr credential, method, path, body string) *httptest.ResponseRecorder {
		if method != "GET" && body == "" {
			body = "{}"
		}
		return serve(t, f.handler, cr.requestWith(method, path, body))
	}
	target := func(route walkedRoute[isolationTarget], id string) string {
		if route.path == "/api/v1/ws" {
			return route.path + "?id=" + id
		}
		return concretePath(route.path, id)
	}

	// The resources are real: pay's own sk reads each of them.
	idRoutes := routesIn(t, engine, isolationTable, takesAnID)
	for _, route := range idRoutes {
		if route.method != "GET" || route.path == "/api/v1/ws" || strings.Contains(route.path, "-orders/") {
			continue
		}
		for _, name := range route.entry.resources {
			if rec := send(credential{bearer: pay}, "GET", target(route, a[name]), ""); rec.Code != 200 {
				t.Errorf("%s with pay's own sk on its %s: %d %s", route.key, name, rec.Code, rec.Body)
			}
		}
	}

	for group, creds := range map[string]map[string]credential{"another app of org A": sameOrg, "another organisation": otherOrg} {
		for name, cr := range creds {
			for _, route := range idRoutes {
				for _, res := range route.entry.resources {
					rec := send(cr, route.method, target(route, a[res]), route.entry.body)
					// The channel takes tokens only: a person's cookie is not one.
					tokenOnly := route.path == "/api/v1/ws" && cr.session != "" && rec.Code == 401
					if rec.Code != 403 && rec.Code != 404 && !tokenOnly {
						t.Errorf("%s (%s) on %s's %s: want 403 or 404, got %d %s", name, group, route.key, res, rec.Code, rec.Body)
					}
				}
			}
			for _, route := range engine.Routes() {
				if route.Method != "GET" || takesAnID(route.Path) {
					continue
				}
				rec := send(cr, "GET", concretePath(route.Path, ""), "")
				if rec.Code < 200 || rec.Code > 299 {
					continue
				}
				for res, id := range a {
					if strings.Contains(rec.Body.String(), id) && !(orgWide[res] && group == "another app of org A") {
						t.Errorf("%s (%s): GET %s lists org A pay's %s %s", name, group, route.Path, res, id)
					}
				}
			}
		}
	}

	// And the lists do show them to pay itself: their absence above means something.
	var seen strings.Builder
	for _, route := range engine.Routes() {
		if route.Method == "GET" && !takesAnID(route.Path) {
			seen.WriteString(send(credential{bearer: pay}, "GET", concretePath(route.Path, ""), "").Body.String())
		}
	}
	for res, id := range a {
		if !strings.Contains(seen.String(), id) {
			t.Errorf("no list shows pay's own %s %s to pay's sk", res, id)
		}
	}

	people := map[string]credential{}
	for _, creds := range []map[string]credential{sameOrg, otherOrg} {
		for name, cr := range creds {
			if cr.session != "" {
				people[name] = cr
			}
		}
	}
	consoleIsolation(t, f, a, orgWide, people, credential{session: ownerSession})
}

// isolationToken is an access token with every scope of app, from a client that the app's
// sk_ (secret) registers through the API.
func isolationToken(t *testing.T, f *fixture, secret, app string) string {
	t.Helper()
	var client createdClient
	r := f.post(t, "/developer/oauth-clients", secret, `{"scopes":"`+app+`:read `+app+`:write `+app+`:approve `+app+`:sign `+app+`:developer"}`)
	if err := json.Unmarshal(r.body, &client); err != nil || r.status != 201 {
		t.Fatalf("client: %d %s", r.status, r.body)
	}
	status, body, _ := f.token(t, url.Values{"grant_type": {"client_credentials"}}, client.ClientID, client.ClientSecret)
	token, _ := body["access_token"].(string)
	if status != 200 || token == "" {
		t.Fatalf("token: %d %v", status, body)
	}
	return token
}
