package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// access says who may call a route.
type access struct {
	public bool
	// app and actions: the principal needs one of actions on app; app "own" means the
	// principal's own app; "any" means an app whose records the principal reaches, as
	// docs/api.md's reach table says for the row named records.
	app     string
	actions []string
	records string
	// notFoundOK: a route about one resource may answer 404 instead of 403 to a caller
	// who may not see it (existence is never revealed).
	notFoundOK bool
	// channel: the WebSocket upgrade, open to sk_, pk_ and OAuth tokens of any app.
	channel bool
	// session: routes about the caller's own session, open to any signed-in person.
	session bool
	// owner: besides the rule above, only the organisation's owner, signed in.
	owner bool
	// appCredential: an app's key or OAuth token only; a person's session is refused.
	appCredential bool
	// person: a signed-in person only (a decision of maker-checker on policy).
	person bool
}

// routeAccess is the authorisation table: every route of the API must have an entry.
// A route added without one fails TestAuthorisationMatrix.
var routeAccess = map[string]access{
	"GET /healthz":                                                  {public: true},
	"GET /readyz":                                                   {public: true},
	"GET /api/v1/openapi.json":                                      {public: true},
	"POST /api/v1/oauth/token":                                      {public: true},
	"POST /api/v1/sessions":                                         {public: true},
	"GET /api/v1/session":                                           {session: true},
	"DELETE /api/v1/session":                                        {session: true},
	"POST /api/v1/session/password":                                 {session: true},
	"GET /developer/team":                                           {app: "own", actions: []string{"developer"}},
	"POST /developer/team":                                          {app: "own", actions: []string{"developer"}, owner: true},
	"PATCH /developer/team/:id":                                     {app: "own", actions: []string{"developer"}, owner: true, notFoundOK: true},
	"DELETE /developer/team/:id":                                    {app: "own", actions: []string{"developer"}, owner: true, notFoundOK: true},
	"GET /api/v1/payout-schedules":                                  {app: "pay", actions: []string{"read"}},
	"POST /api/v1/payout-schedules":                                 {app: "pay", actions: []string{"write"}},
	"GET /api/v1/payout-schedules/:id":                              {app: "pay", actions: []string{"read"}, notFoundOK: true},
	"PATCH /api/v1/payout-schedules/:id":                            {app: "pay", actions: []string{"write"}, notFoundOK: true},
	"DELETE /api/v1/payout-schedules/:id":                           {app: "pay", actions: []string{"write"}, notFoundOK: true},
	"GET /api/v1/payout-schedules/:id/runs":                         {app: "pay", actions: []string{"read"}, notFoundOK: true},
	"GET /api/v1/treasury/portfolio":                                {app: "treasury", actions: []string{"read"}},
	"GET /api/v1/treasury/wallets":                                  {app: "treasury", actions: []string{"read"}},
	"GET /api/v1/treasury/positions":                                {app: "treasury", actions: []string{"read"}},
	"POST /api/v1/treasury/wallets/challenges":                      {app: "treasury", actions: []string{"developer"}},
	"POST /api/v1/treasury/wallets":                                 {app: "treasury", actions: []string{"developer"}},
	"PATCH /api/v1/treasury/wallets/:id":                            {app: "treasury", actions: []string{"developer"}, notFoundOK: true},
	"POST /api/v1/treasury/wallets/:id/archive":                     {app: "treasury", actions: []string{"developer"}, notFoundOK: true},
	"GET /api/v1/wallets":                                           {app: "any", actions: []string{"read"}, records: "wallets"},
	"GET /api/v1/policies/:app":                                     {app: "pay", actions: []string{"developer"}},
	"PUT /api/v1/policies/:app":                                     {app: "pay", actions: []string{"developer"}},
	"POST /api/v1/policies/:app/evaluate":                           {app: "pay", actions: []string{"write", "developer"}},
	"GET /api/v1/policies/:app/versions":                            {app: "pay", actions: []string{"developer"}},
	"GET /api/v1/policies/:app/windows":                             {app: "pay", actions: []string{"developer"}},
	"GET /api/v1/policies/:app/versions/:version":                   {app: "pay", actions: []string{"developer"}, notFoundOK: true},
	"POST /api/v1/policies/:app/versions/:version/rollback":         {app: "pay", actions: []string{"developer"}, notFoundOK: true},
	"GET /api/v1/policies/:app/drafts":                              {app: "pay", actions: []string{"developer"}},
	"POST /api/v1/policies/:app/drafts":                             {app: "pay", actions: []string{"developer"}},
	"GET /api/v1/policies/:app/drafts/:id":                          {app: "pay", actions: []string{"developer"}, notFoundOK: true},
	"PUT /api/v1/policies/:app/drafts/:id":                          {app: "pay", actions: []string{"developer"}, notFoundOK: true},
	"POST /api/v1/policies/:app/drafts/:id/approve":                 {app: "pay", actions: []string{"developer"}, notFoundOK: true, person: true},
	"POST /api/v1/policies/:app/drafts/:id/publish":                 {app: "pay", actions: []string{"developer"}, notFoundOK: true},
	"POST /api/v1/policies/:app/drafts/:id/discard":                 {app: "pay", actions: []string{"developer"}, notFoundOK: true},
	"POST /api/v1/policies/:app/dry-runs":                           {app: "pay", actions: []string{"developer"}},
	"GET /api/v1/policies/:app/dry-runs/:id":                        {app: "pay", actions: []string{"developer"}, notFoundOK: true},
	"GET /api/v1/approvals":                                         {app: "any", actions: []string{"read", "approve"}, records: "approval items"},
	"POST /api/v1/approvals/:domain/:id/decide":                     {app: "pay", actions: []string{"approve"}, notFoundOK: true},
	"GET /api/v1/approver-keys":                                     {app: "any", actions: []string{"read", "approve", "sign", "developer"}, records: "approver keys"},
	"GET /api/v1/signing-requests":                                  {app: "any", actions: []string{"read", "sign"}, records: "signing requests"},
	"GET /api/v1/signing-requests/:id":                              {app: "any", actions: []string{"read", "sign"}, records: "signing requests", notFoundOK: true},
	"POST /api/v1/signing-requests/:id/signature":                   {app: "any", actions: []string{"sign"}, records: "signing requests", notFoundOK: true},
	"POST /api/v1/signing-requests/:id/refusal":                     {app: "any", actions: []string{"sign"}, records: "signing requests", notFoundOK: true},
	"GET /developer/api-keys":                                       {app: "own", actions: []string{"developer"}},
	"POST /developer/api-keys":                                      {app: "own", actions: []string{"developer"}},
	"GET /developer/api-keys/:id":                                   {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"DELETE /developer/api-keys/:id":                                {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"GET /developer/logs":                                           {app: "own", actions: []string{"developer"}},
	"GET /developer/oauth-clients":                                  {app: "own", actions: []string{"developer"}},
	"POST /developer/oauth-clients":                                 {app: "own", actions: []string{"developer"}},
	"GET /developer/oauth-clients/:id":                              {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"DELETE /developer/oauth-clients/:id":                           {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"GET /developer/websockets":                                     {app: "own", actions: []string{"developer"}},
	"POST /developer/websockets":                                    {app: "own", actions: []string{"developer"}},
	"GET /developer/websockets/:id":                                 {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"PATCH /developer/websockets/:id":                               {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"DELETE /developer/websockets/:id":                              {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"POST /developer/websockets/:id/test":                           {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"GET /developer/webhooks":                                       {app: "own", actions: []string{"developer"}},
	"POST /developer/webhooks":                                      {app: "own", actions: []string{"developer"}},
	"GET /developer/webhooks/:id":                                   {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"PATCH /developer/webhooks/:id":                                 {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"DELETE /developer/webhooks/:id":                                {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"POST /developer/webhooks/:id/rotate-secret":                    {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"POST /developer/webhooks/:id/test":                             {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"GET /developer/webhooks/:id/deliveries":                        {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"POST /developer/webhooks/:id/deliveries/:deliveryId/redeliver": {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"POST /developer/webhooks/:id/recover":                          {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"GET /developer/webhooks/:id/recoveries":                        {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"GET /developer/webhooks/:id/recoveries/:recoveryId":            {app: "own", actions: []string{"developer"}, notFoundOK: true},
	// The channel: sk_ and pk_ keys, tk_ keys holding read (or a device key), and OAuth
	// tokens of the config's app (wshub tests cover the 403 of another app or organisation
	// with a real config).
	"GET /api/v1/ws":         {channel: true, notFoundOK: true},
	"GET /api/v1/events":     {app: "any", actions: []string{"read"}, records: "events"},
	"GET /api/v1/audit-logs": {app: "any", actions: []string{"read"}, records: "audit records"},
	// The organisation's whole chain, every app's records: the dashboard's.
	"GET /api/v1/audit-logs/export":            {app: "any", actions: []string{"read"}, records: auditChain},
	"GET /api/v1/audit-logs/verify":            {app: "any", actions: []string{"read"}, records: auditChain},
	"POST /api/v1/audit-logs/verifications":    {app: "any", actions: []string{"read"}, records: auditChain},
	"GET /api/v1/audit-logs/verifications/:id": {app: "any", actions: []string{"read"}, records: auditChain, notFoundOK: true},
	// The chains' JSON-RPC: read on the credential's own app (the matrix's router has no
	// node, so an allowed caller hears 404).
	"POST /api/v1/rpc/:chain": {app: "own", actions: []string{"read"}, appCredential: true},
	"POST /rpc/:chain":        {app: "own", actions: []string{"read"}, appCredential: true},
}

func init() {
	for _, d := range []struct{ collection, app string }{{"payments", "pay"}, {"trade-orders", "trade"}, {"earn-orders", "earn"}, {"borrow-orders", "borrow"}} {
		base := "/api/v1/" + d.collection
		routeAccess["POST "+base] = access{app: d.app, actions: []string{"write"}}
		routeAccess["POST "+base+"/:id/submit"] = access{app: d.app, actions: []string{"write"}, notFoundOK: true}
		routeAccess["GET "+base] = access{app: d.app, actions: []string{"read"}}
		routeAccess["GET "+base+"/:id"] = access{app: d.app, actions: []string{"read"}, notFoundOK: true}
	}
}

// allowed says whether a principal passes the route's check. People name the app of
// "own" routes with ?app=pay, the app the matrix requests them in.
func (a access) allowed(t *testing.T, reach reachTable, p *auth.Principal) bool {
	if p == nil {
		return false
	}
	if a.channel {
		// Listening needs read: a tk_ holds it, or is a signing device's key.
		return p.Kind == auth.KindSecret || p.Kind == auth.KindPublishable || p.Kind == auth.KindAccessToken ||
			(p.Kind == auth.KindResource && (slices.Contains(p.Actions, auth.ActionRead) || p.SigningDevice()))
	}
	if a.session {
		return p.Kind == auth.KindUser
	}
	if a.owner && p.Role != auth.RoleOwner {
		return false
	}
	if a.appCredential && p.Kind == auth.KindUser {
		return false
	}
	if a.person && p.Kind != auth.KindUser {
		return false
	}
	holds := func(app string) bool {
		return slices.ContainsFunc(a.actions, func(x string) bool { return p.Can(app, x) })
	}
	switch a.app {
	case "own":
		if p.Kind == auth.KindUser {
			return holds("pay")
		}
		return holds(p.App)
	case "any":
		return slices.ContainsFunc(p.Apps(), func(app string) bool {
			// Records of its own app, or, for treasury, the cross-app ones the table gives.
			column := reachOwnApp
			if app == "treasury" {
				column = reachTreasury
			}
			return reach.reaches(t, a.records, column, held(p, app), a.actions)
		})
	default:
		return holds(a.app)
	}
}

// credential is how a request proves who it is: a bearer token, or a session cookie with
// (or, to forge a cross-site write, without) its CSRF token.
type credential struct {
	bearer  string
	session string
	noCSRF  bool
	// app is what a person names in ?app= on /developer/ routes; pay when empty.
	app string
}

func (cr credential) principal(ctx context.Context, authn *auth.Authenticator) *auth.Principal {
	var p *auth.Principal
	if cr.session != "" {
		p, _ = authn.AuthenticateSession(ctx, cr.session)
	} else {
		p, _ = authn.Authenticate(ctx, cr.bearer)
	}
	return p
}

func (cr credential) request(method, path string) *http.Request {
	return cr.requestWith(method, path, "{}")
}

// requestWith sends body with any method but GET.
func (cr credential) requestWith(method, path, body string) *http.Request {
	if cr.session != "" && strings.Contains(path, "/developer/") {
		app := cr.app
		if app == "" {
			app = "pay"
		}
		path += "?app=" + app
	}
	req := newRequest(method, path, cr.bearer, body)
	if cr.session != "" {
		req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: cr.session})
		if !cr.noCSRF {
			req.Header.Set(auth.CSRFHeader, auth.CSRFToken(cr.session))
		}
	}
	return req
}

// matrixSessionLike opens another session of the person signed in with token.
func matrixSessionLike(t *testing.T, f *fixture, token string) string {
	t.Helper()
	_, u, _, err := f.store.SessionByHash(context.Background(), auth.HashSecret(token))
	if err != nil {
		t.Fatal(err)
	}
	return sessionFor(t, f, u)
}

// sessionFor opens a session of u as signing in would, without the password's slow hash.
func sessionFor(t *testing.T, f *fixture, u *store.User) string {
	t.Helper()
	fresh, sess, _ := auth.NewSession(u.ID, u.OrgID, time.Now(), time.Hour)
	if err := f.store.CreateSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	return fresh
}

// matrixPerson adds a person to org with grants and passwordHash.
func matrixPerson(t *testing.T, f *fixture, org, role string, grants map[string]string, passwordHash string) *store.User {
	t.Helper()
	var perms []store.MemberPermission
	for app, actions := range grants {
		perms = append(perms, store.MemberPermission{App: app, Actions: actions})
	}
	u := &store.User{ID: ids.New(ids.User), OrgID: org, Email: ids.New("usr") + "@example.com", PasswordHash: passwordHash, Role: role,
		CreatedAt: time.Now()}
	if err := f.store.CreateUser(context.Background(), u, perms); err != nil {
		t.Fatal(err)
	}
	return u
}

// matrixSession adds a person to org with grants and signs them in through the API.
func matrixSession(t *testing.T, f *fixture, h http.Handler, org, role string, grants map[string]string) string {
	t.Helper()
	hash, _ := auth.HashPassword("matrix password 1")
	u := matrixPerson(t, f, org, role, grants, hash)
	req := httptest.NewRequest("POST", "/api/v1/sessions", strings.NewReader(`{"email":"`+u.Email+`","password":"matrix password 1"}`))
	req.RemoteAddr = ids.New("ip") + ":1"
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != 201 || len(cookies) != 1 {
		t.Fatalf("sign in: %d %s", rec.Code, rec.Body)
	}
	return cookies[0].Value
}

// walkedRoute is a route of the API with its entry in a test's table.
type walkedRoute[E any] struct {
	method, path, key string
	entry             E
}

// routesIn lists the routes of the API that need an entry in table (those whose path
// needs says so), each with its entry. A route without one fails t, and so does an entry
// naming no route: a new route cannot slip past a test that walks the API from a table.
func routesIn[E any](t *testing.T, engine *gin.Engine, table map[string]E, needs func(path string) bool) []walkedRoute[E] {
	t.Helper()
	var out []walkedRoute[E]
	used := map[string]bool{}
	for _, route := range engine.Routes() {
		if !needs(route.Path) {
			continue
		}
		key := route.Method + " " + strings.Replace(route.Path, developerAlias, "/developer/", 1)
		entry, ok := table[key]
		if !ok {
			t.Errorf("route %s has no entry in the table", key)
			continue
		}
		used[key] = true
		out = append(out, walkedRoute[E]{method: route.Method, path: route.Path, key: key, entry: entry})
	}
	if len(used) != len(table) {
		t.Errorf("the table has %d entries for %d routes: remove the stale ones", len(table), len(used))
	}
	return out
}

// concretePath fills a route's parameters: the pay app, the payment domain, ethereum, and id.
func concretePath(path, id string) string {
	return strings.NewReplacer(":app", "pay", ":domain", "payment", ":deliveryId", "dlv_nothing", ":chain", "ethereum", ":id", id).Replace(path)
}

// unlimitedRouter serves f's store with Temporal faked (every submit allowed) and no rate
// limit in the way of a test that makes many requests; f's requests go to it.
func unlimitedRouter(f *fixture) *gin.Engine {
	f.handler = NewRouter(Config{
		Store:     f.store,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		RateBurst: 1 << 20,
		RateLimit: 1 << 20,
		Service: &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Workflows: &fakeWorkflows{decision: workflows.PolicyDecision{Allowed: true}}, Webhooks: f.webhooks,
			DryRuns:            inlineDryRuns{&activities.Policies{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}},
			Recoveries:         inlineRecoveries{&activities.WebhookRecoveries{Store: f.store}},
			AuditVerifications: inlineAuditVerifications{&activities.Audit{Store: f.store}}, Payouts: &fakePayouts{}},
	})
	return f.handler.(*gin.Engine)
}

func TestAuthorisationMatrix(t *testing.T) {
	f := newFixture(t)
	engine := unlimitedRouter(f)
	h := f.handler
	authn := auth.NewAuthenticator(f.store)
	reach := readReachTable(t)

	creds := map[string]credential{"none": {}, "malformed": {bearer: "not-a-token"},
		"unknown": {bearer: "sk_unknownunknownunknownunknownunknownunk"}}
	for app, k := range f.creds.Keys {
		creds[app+" sk"], creds[app+" pk"], creds[app+" read"] = credential{bearer: k.SK}, credential{bearer: k.PK}, credential{bearer: k.Read}
		if k.Approve != "" {
			creds[app+" approve"], creds[app+" sign"] = credential{bearer: k.Approve}, credential{bearer: k.Sign}
		}
	}
	creds["other org pay sk"] = credential{bearer: f.creds.OtherOrg.Keys["pay"]["sk"]}
	creds["treasury sign (a signing device)"] = credential{bearer: f.newKey(t, f.creds.Keys["treasury"].SK,
		`{"kind":"tk","actions":["sign"],"resourceIds":["`+f.creds.Wallets[0].ID+`"]}`).Secret}
	creds["treasury sign, unrestricted (no device)"] = credential{bearer: f.newKey(t, f.creds.Keys["treasury"].SK, `{"kind":"tk","actions":["sign"]}`).Secret}
	// OAuth access tokens: one per app and scope, as clients of the organisation get them.
	for _, app := range auth.Apps {
		for _, action := range auth.AllActions {
			creds["oauth "+app+":"+action] = credential{bearer: matrixAccessToken(t, f, app, app+":"+action)}
		}
	}
	// People, signed in: the owner, members with a grant each, one with none, and the
	// owner of another organisation.
	org := f.creds.OrgID
	creds["owner session"] = credential{session: f.signIn(t, f.creds.Owner.Email, f.creds.Owner.Password).token}
	for _, g := range []struct{ app, actions string }{{"pay", "read,approve"}, {"pay", "write"}, {"pay", "sign"}, {"pay", "developer"},
		{"trade", "read,write,approve,sign,developer"}, {"treasury", "read"}, {"treasury", "sign"}} {
		creds["member "+g.app+":"+g.actions] = credential{session: matrixSession(t, f, h, org, auth.RoleMember, map[string]string{g.app: g.actions})}
	}
	creds["member without permissions"] = credential{session: matrixSession(t, f, h, org, auth.RoleMember, nil)}
	creds["other org owner session"] = credential{session: matrixSession(t, f, h, f.creds.OtherOrg.OrgID, auth.RoleOwner, nil)}
	// A forged cross-site request carries the owner's cookie but cannot know the CSRF token.
	forged := creds["owner session"]
	forged.noCSRF = true

	// Credentials that must be refused whatever the route: expired, revoked, or of a
	// revoked client; a signed-out or expired session.
	refused := map[string]credential{}
	expired, _ := auth.NewSecret(auth.KindAccessToken)
	clientID := matrixClient(t, f, "pay", "pay:read")
	err := f.store.CreateOAuthToken(context.Background(), &store.OAuthToken{TokenHash: auth.HashSecret(expired), ClientID: clientID,
		OrgID: f.creds.OrgID, App: "pay", Actions: "read", Scope: "pay:read", CreatedAt: time.Now().Add(-time.Hour),
		ExpiresAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	refused["expired oauth token"] = credential{bearer: expired}
	var revokedKey createdKey
	_ = json.Unmarshal(f.post(t, "/developer/api-keys", f.creds.Keys["pay"].SK, `{"kind":"sk"}`).body, &revokedKey)
	f.do(t, "DELETE", "/developer/api-keys/"+revokedKey.ID, f.creds.Keys["pay"].SK, nil)
	refused["revoked sk"] = credential{bearer: revokedKey.Secret}
	revokedClientToken := matrixAccessToken(t, f, "pay", "pay:write")
	f.do(t, "DELETE", "/developer/oauth-clients/"+lastMatrixClient, f.creds.Keys["pay"].SK, nil)
	refused["token of a revoked oauth client"] = credential{bearer: revokedClientToken}
	signedOut := f.signIn(t, f.creds.Owner.Email, f.creds.Owner.Password)
	f.as(t, signedOut, "DELETE", "/api/v1/session", "")
	refused["signed-out session"] = credential{session: signedOut.token}
	ownerUser, _ := f.store.UserByEmail(context.Background(), f.creds.Owner.Email)
	expiredSession, sess, _ := auth.NewSession(ownerUser.ID, ownerUser.OrgID, time.Now().Add(-13*time.Hour), 12*time.Hour)
	if err := f.store.CreateSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	refused["expired session"] = credential{session: expiredSession}
	refused["session token as a bearer token"] = credential{bearer: creds["owner session"].session}
	for name, cr := range refused {
		creds[name] = cr
	}

	for _, route := range routesIn(t, engine, routeAccess, func(string) bool { return true }) {
		key, rule := route.key, route.entry
		path := concretePath(route.path, "nothing_here")
		for name, cr := range creds {
			_, isRefused := refused[name]
			if key == "DELETE /api/v1/session" && cr.session != "" && !isRefused {
				// Signing out ends the session: sign out a fresh one of the same person.
				cr.session = matrixSessionLike(t, f, cr.session)
			}
			req := cr.request(route.method, path)
			p := cr.principal(req.Context(), authn)
			if rule.channel && cr.session != "" {
				// The channel takes a token in its URL, never a session cookie.
				p = nil
			}
			got := serve(t, h, req).Code
			if isRefused && !rule.public && (p != nil || got != 401) {
				t.Errorf("%s with %s: want 401, got %d", key, name, got)
				continue
			}
			switch {
			case rule.public:
				if got == 401 || got == 403 {
					t.Errorf("%s with %s: public route answered %d", key, name, got)
				}
			case p == nil:
				if got != 401 {
					t.Errorf("%s with %s: want 401, got %d", key, name, got)
				}
			case rule.allowed(t, reach, p):
				if got == 401 || got == 403 {
					t.Errorf("%s with %s: allowed caller got %d", key, name, got)
				}
			default:
				if got != 403 && !(rule.notFoundOK && got == 404) {
					t.Errorf("%s with %s: want 403, got %d", key, name, got)
				}
			}
		}
		if !rule.public {
			rec := serve(t, h, forged.request(route.method, path))
			if want := route.method == "GET" && !rule.channel; want != (rec.Code != 401 && rec.Code != 403) {
				t.Errorf("%s with the owner's cookie and no CSRF token: %d", key, rec.Code)
			}
		}
	}
}

func newRequest(method, path, token, body string) *http.Request {
	req := httptestRequest(method, path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

func httptestRequest(method, path, body string) *http.Request {
	rd := io.Reader(nil)
	if method != "GET" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func httpRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// lastMatrixClient is the id of the client matrixAccessToken made last.
var lastMatrixClient string

// matrixClient registers an OAuth client of app with the scope and returns its id.
func matrixClient(t *testing.T, f *fixture, app, scope string) string {
	t.Helper()
	secret, _ := auth.NewSecret("ocs")
	id := ids.New(ids.OAuthClient)
	err := f.store.CreateOAuthClient(context.Background(), &store.OAuthClient{ID: id, OrgID: f.creds.OrgID, App: app,
		SecretHash: auth.HashSecret(secret), Scopes: scope, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	matrixSecrets[id] = secret
	return id
}

var matrixSecrets = map[string]string{}

// matrixAccessToken gets a token with exactly scope through the token endpoint.
func matrixAccessToken(t *testing.T, f *fixture, app, scope string) string {
	t.Helper()
	id := matrixClient(t, f, app, scope)
	lastMatrixClient = id
	status, body, _ := f.token(t, url.Values{"grant_type": {"client_credentials"}}, id, matrixSecrets[id])
	token, _ := body["access_token"].(string)
	if status != 200 || token == "" {
		t.Fatalf("token for %s: %d %v", scope, status, body)
	}
	return token
}
