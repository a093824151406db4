package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
)

// isolationTarget says which of org A pay's resources a route that takes an id is tried
// with, and a body the route accepts, so that only who asks decides the answer.
type isolationTarget struct {
	resources []string
	body      string
}

var (
	bothOrders    = isolationTarget{resources: []string{"draft order", "submitted order"}, body: `{}`}
	wsConfig      = isolationTarget{resources: []string{"websocket config"}, body: `{}`}
	webhookConfig = isolationTarget{resources: []string{"webhook"}, body: `{}`}
	// A recovery needs its window before the webhook is looked up.
	webhookRecovery = isolationTarget{resources: []string{"webhook"}, body: `{"since":"2026-01-01T00:00:00Z"}`}
	member          = isolationTarget{resources: []string{"member"}, body: `{"actions":["read","approve"]}`}
	policyDraft     = isolationTarget{resources: []string{"policy draft"}, body: `{}`}
	payoutSchedule  = isolationTarget{resources: []string{"payout schedule"}, body: `{"paused":true}`}
	signingRequest  = isolationTarget{resources: []string{"signing request"}, body: `{"signature":"` + strings.Repeat("A", 86) + `=="}`}
)

// isolationTable lists every route that takes an id (and the channel, whose config id is in
// its query). A route added without an entry fails TestDataIsolation.
var isolationTable = map[string]isolationTarget{
	"PATCH /developer/team/:id":                                     member,
	"GET /api/v1/payout-schedules/:id":                              payoutSchedule,
	"PATCH /api/v1/payout-schedules/:id":                            payoutSchedule,
	"DELETE /api/v1/payout-schedules/:id":                           payoutSchedule,
	"GET /api/v1/payout-schedules/:id/runs":                         payoutSchedule,
	"DELETE /developer/team/:id":                                    member,
	"POST /api/v1/approvals/:domain/:id/decide":                     {resources: []string{"approval item"}, body: `{"decision":"APPROVE"}`},
	"GET /api/v1/signing-requests/:id":                              signingRequest,
	"POST /api/v1/signing-requests/:id/signature":                   signingRequest,
	"POST /api/v1/signing-requests/:id/refusal":                     signingRequest,
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
	"POST /developer/webhooks/:id/recover":                          webhookRecovery,
	"GET /developer/webhooks/:id/recoveries":                        webhookConfig,
	"GET /developer/webhooks/:id/recoveries/:recoveryId":            webhookConfig,
	"GET /api/v1/ws":                                                wsConfig,
	"GET /api/v1/policies/:app/drafts/:id":                          policyDraft,
	"PUT /api/v1/policies/:app/drafts/:id":                          {resources: []string{"policy draft"}, body: `{"rules":{}}`},
	"POST /api/v1/policies/:app/drafts/:id/approve":                 policyDraft,
	"POST /api/v1/policies/:app/drafts/:id/publish":                 policyDraft,
	"POST /api/v1/policies/:app/drafts/:id/discard":                 policyDraft,
	"GET /api/v1/policies/:app/dry-runs/:id":                        {resources: []string{"policy dry run"}},
	// The organisation's, read with its audit chain, not one app's:
	// TestTheWholeChainIsVerifiedInTheBackground shows that only the treasury app's readers
	// of the organisation read one.
	"GET /api/v1/audit-logs/verifications/:id": {},
	// Wallets are the organisation's, not one app's: TestAWalletIsRegisteredWithProofOfItsKey
	// shows that only treasury's developers of the organisation change them.
	"PATCH /api/v1/treasury/wallets/:id":        {},
	"POST /api/v1/treasury/wallets/:id/archive": {},
}

func init() {
	for _, collection := range []string{"payments", "trade-orders", "earn-orders", "borrow-orders"} {
		isolationTable["GET /api/v1/"+collection+"/:id"] = bothOrders
		isolationTable["POST /api/v1/"+collection+"/:id/submit"] = bothOrders
	}
}

// takesAnID: the routes isolationTable must cover.
func takesAnID(path string) bool { return strings.Contains(path, ":id") || path == "/api/v1/ws" }

// isolationRow is the row of docs/api.md's reach table for each of org A pay's resources.
var isolationRow = map[string]string{
	"draft order": "orders", "submitted order": "orders", "approval item": "approval items",
	"signing request": "signing requests", "api key": developerResources, "oauth client": developerResources,
	"websocket config": developerResources, "webhook": developerResources, "member": "team",
	"policy draft": "policy versions and drafts", "policy dry run": "policy versions and drafts",
	"payout schedule": "payout schedules",
}

const (
	developerResources = "API keys, OAuth clients, WebSocket configs and webhooks"
	auditChain         = "audit chain (export and check)"
)

// listRow is the row of the reach table whose records a list route shows (the ids of
// other resources it mentions, such as a signing request's order, come with them); ""
// for lists that show none of an app's resources.
func listRow(path string) string {
	path = strings.Replace(path, developerAlias, "/developer/", 1)
	switch {
	case strings.HasSuffix(path, "/approvals"):
		return "approval items"
	case strings.HasSuffix(path, "/signing-requests"):
		return "signing requests"
	case strings.HasSuffix(path, "/events"):
		return "events"
	case strings.HasSuffix(path, "/audit-logs"):
		return "audit records"
	case strings.HasPrefix(path, "/api/v1/audit-logs/"):
		return auditChain
	case path == "/developer/logs":
		return "request logs"
	case path == "/developer/team":
		return "team"
	case strings.HasPrefix(path, "/api/v1/policies/"):
		return "policy versions and drafts"
	case strings.HasPrefix(path, "/developer/"):
		return developerResources
	case strings.HasPrefix(path, "/api/v1/payout-schedules"):
		return "payout schedules"
	case strings.HasSuffix(path, "/payments") || strings.HasSuffix(path, "-orders"):
		return "orders"
	}
	return ""
}

// TestDataIsolation creates real resources in org A's pay app and proves that every other
// credential reaches exactly what docs/api.md's table "What a credential reaches" says:
// those of org A's other apps that order, and of another organisation, reach nothing but
// the organisation's team; treasury's reach the audit records and, with sign, the signing
// requests. Every route that takes an id answers 403 or 404 where the table says no and
// lets the caller through where it says yes; no list shows one of the resources' ids to a
// caller the table keeps from that list's records, and the lists the table opens show
// them. The people among the callers try the console's pages and forms too.
func TestDataIsolation(t *testing.T) {
	f := newFixture(t)
	engine := unlimitedRouter(f)
	ctx := context.Background()
	reach := readReachTable(t)
	authn := auth.NewAuthenticator(f.store)
	pay := f.creds.Keys["pay"].SK
	answered := func(status int) func(r response) string {
		return func(r response) string {
			t.Helper()
			var body struct{ ID string }
			if err := json.Unmarshal(r.body, &body); err != nil || r.status != status || body.ID == "" {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			return body.ID
		}
	}
	created, accepted := answered(201), answered(202)

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
	a["payout schedule"] = created(f.post(t, "/api/v1/payout-schedules", pay, `{"payment":{"walletId":"`+wallet+`","asset":"USDC","amount":"1",`+
		`"destination":{"address":"0x1111111111111111111111111111111111111111"}},"every":"P1D"}`))
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
	a["policy draft"] = created(f.post(t, "/api/v1/policies/pay/drafts", pay, `{"rules":{"maxOrderUsd":"1"}}`))
	a["policy dry run"] = accepted(f.post(t, "/api/v1/policies/pay/dry-runs", pay, `{"draftId":"`+a["policy draft"]+`"}`))
	// People belong to the organisation, not to an app: the team page of every app of org A
	// lists them (the reach table's row "team").
	orgWide := map[string]bool{"member": true}

	// Org A's other apps: every key, an OAuth token with every scope, and a member holding
	// every action, on each app but pay; treasury's signing device besides.
	sameOrg := map[string]credential{}
	for _, app := range []string{"trade", "earn", "borrow", "treasury"} {
		k := f.creds.Keys[app]
		for kind, secret := range map[string]string{"sk": k.SK, "pk": k.PK, "read": k.Read, "approve": k.Approve, "sign": k.Sign} {
			if secret != "" {
				sameOrg[app+" "+kind] = credential{bearer: secret}
			}
		}
		sameOrg["oauth "+app] = credential{bearer: isolationToken(t, f, k.SK, app)}
	}
	sameOrg["treasury sign (a signing device)"] = credential{bearer: f.newKey(t, f.creds.Keys["treasury"].SK,
		`{"kind":"tk","actions":["sign"],"resourceIds":["`+wallet+`"]}`).Secret}
	sameOrg["treasury sign, unrestricted (no device)"] = credential{bearer: f.newKey(t, f.creds.Keys["treasury"].SK, `{"kind":"tk","actions":["sign"]}`).Secret}
	sameOrg["treasury sign, another wallet"] = credential{bearer: f.newKey(t, f.creds.Keys["treasury"].SK,
		`{"kind":"tk","actions":["sign"],"resourceIds":["`+f.creds.Wallets[1].ID+`"]}`).Secret}
	// People are signed in without a password: its hash is slow, and sign-in is not what
	// this test is about.
	for _, app := range []string{"trade", "treasury"} {
		sameOrg["member "+app+":all"] = credential{app: app, session: sessionFor(t, f, matrixPerson(t, f, f.creds.OrgID, auth.RoleMember,
			map[string]string{app: "read,write,approve,sign,developer"}, "-"))}
	}
	// Another organisation, in the same app: its sk_, a tk_ holding every action, its pk_,
	// an OAuth token with every scope, and its owner, signed in.
	otherSK := f.creds.OtherOrg.Keys["pay"]["sk"]
	otherOrg := map[string]credential{
		"other org pay sk": {bearer: otherSK},
		"other org pay tk": {bearer: f.newKey(t, otherSK, `{"kind":"tk","actions":["read","write","approve","sign","developer"]}`).Secret},
		"other org pay pk": {bearer: f.newKey(t, otherSK, `{"kind":"pk"}`).Secret},
		"other org oauth":  {bearer: isolationToken(t, f, otherSK, "pay")},
		"other org owner":  {session: sessionFor(t, f, matrixPerson(t, f, f.creds.OtherOrg.OrgID, auth.RoleOwner, nil, "-"))},
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

	// The resources are real: pay's own sk reads each of them (a webhook's recovery is
	// tried with the webhook's id for both, which reaches no recovery).
	idRoutes := routesIn(t, engine, isolationTable, takesAnID)
	for _, route := range idRoutes {
		if route.method != "GET" || route.path == "/api/v1/ws" || strings.Contains(route.path, "-orders/") ||
			strings.Contains(route.path, "/recoveries/") {
			continue
		}
		for _, name := range route.entry.resources {
			if rec := send(credential{bearer: pay}, "GET", target(route, a[name]), ""); rec.Code != 200 {
				t.Errorf("%s with pay's own sk on its %s: %d %s", route.key, name, rec.Code, rec.Body)
			}
		}
	}

	// whatReaches is a credential's column of the table and the actions it holds there.
	whatReaches := func(cr credential, group string) (string, []string, *auth.Principal) {
		p := cr.principal(ctx, authn)
		if p == nil {
			t.Fatal("a credential of the test does not authenticate")
		}
		if group == "another organisation" {
			return reachOtherOrg, nil, p
		}
		app := p.App
		if app == "" {
			app = p.Apps()[0]
		}
		return reachColumn(app, "pay"), held(p, app), p
	}
	for group, creds := range map[string]map[string]credential{"another app of org A": sameOrg, "another organisation": otherOrg} {
		for name, cr := range creds {
			column, held, p := whatReaches(cr, group)
			for _, route := range idRoutes {
				rule := routeAccess[route.key]
				for _, res := range route.entry.resources {
					want := reach.reaches(t, isolationRow[res], column, held, rule.actions) && rule.allowed(t, reach, p) &&
						(route.path != "/api/v1/ws" || cr.session == "")
					if res == "signing request" && name == "treasury sign, another wallet" {
						want = false // beyond its wallets
					}
					rec := send(cr, route.method, target(route, a[res]), route.entry.body)
					// The channel takes tokens only: a person's cookie is not one.
					tokenOnly := route.path == "/api/v1/ws" && cr.session != "" && rec.Code == 401
					refused := rec.Code == 403 || rec.Code == 404 || tokenOnly
					if refused == want || (want && route.method == "GET" && rec.Code != 200) {
						t.Errorf("%s (%s, %s %v) on %s's %s: the table says reaches=%v, got %d %s", name, group, column, held, route.key, res, want, rec.Code, rec.Body)
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
				row := listRow(route.Path)
				rule := routeAccess[route.Method+" "+strings.Replace(route.Path, developerAlias, "/developer/", 1)]
				open := row != "" && reach.reaches(t, row, column, held, rule.actions)
				for res, id := range a {
					if strings.Contains(rec.Body.String(), id) && !open && !(orgWide[res] && group == "another app of org A") {
						t.Errorf("%s (%s, %s %v): GET %s lists org A pay's %s %s; the table keeps its %q from it", name, group, column, held, route.Path, res, id, row)
					}
				}
			}
		}
	}

	// The lists the table opens across apps do show them: treasury's signing device lists
	// pay's signing request, the dashboard pay's audit records.
	for name, want := range map[string]struct{ path, id string }{
		"treasury sign (a signing device)": {"/api/v1/signing-requests", a["signing request"]},
		"treasury read":                    {"/api/v1/audit-logs", a["draft order"]},
	} {
		if rec := send(sameOrg[name], "GET", want.path, ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), want.id) {
			t.Errorf("%s: GET %s does not show %s: %d %s", name, want.path, want.id, rec.Code, rec.Body)
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
