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

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/workflows"
)

// access says who may call a route.
type access struct {
	public bool
	// app and actions: the principal needs one of actions on app; app "own" means the
	// principal's own app; "any" means read on the own app or treasury read.
	app     string
	actions []string
	// notFoundOK: a route about one resource may answer 404 instead of 403 to a caller
	// who may not see it (existence is never revealed).
	notFoundOK bool
	// channel: the WebSocket upgrade, open to sk_, pk_ and OAuth tokens of any app.
	channel bool
}

// routeAccess is the authorisation table: every route of the API must have an entry.
// A route added without one fails TestAuthorisationMatrix.
var routeAccess = map[string]access{
	"GET /healthz":                                {public: true},
	"GET /readyz":                                 {public: true},
	"POST /api/v1/oauth/token":                    {public: true},
	"GET /api/v1/treasury/portfolio":              {app: "treasury", actions: []string{"read"}},
	"GET /api/v1/treasury/wallets":                {app: "treasury", actions: []string{"read"}},
	"GET /api/v1/treasury/positions":              {app: "treasury", actions: []string{"read"}},
	"GET /api/v1/policies/:app":                   {app: "pay", actions: []string{"developer"}},
	"PUT /api/v1/policies/:app":                   {app: "pay", actions: []string{"developer"}},
	"POST /api/v1/policies/:app/evaluate":         {app: "pay", actions: []string{"write", "developer"}},
	"GET /api/v1/approvals":                       {app: "any", actions: []string{"read", "approve"}},
	"POST /api/v1/approvals/:domain/:id/decide":   {app: "pay", actions: []string{"approve"}, notFoundOK: true},
	"GET /api/v1/signing-requests":                {app: "any", actions: []string{"read", "sign"}},
	"GET /api/v1/signing-requests/:id":            {app: "any", actions: []string{"read", "sign"}, notFoundOK: true},
	"POST /api/v1/signing-requests/:id/signature": {app: "any", actions: []string{"read", "sign"}, notFoundOK: true},
	"GET /api/v1/developer/api-keys":              {app: "own", actions: []string{"developer"}},
	"POST /api/v1/developer/api-keys":             {app: "own", actions: []string{"developer"}},
	"DELETE /api/v1/developer/api-keys/:id":       {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"GET /api/v1/developer/logs":                  {app: "own", actions: []string{"developer"}},
	"GET /api/v1/developer/oauth-clients":         {app: "own", actions: []string{"developer"}},
	"POST /api/v1/developer/oauth-clients":        {app: "own", actions: []string{"developer"}},
	"DELETE /api/v1/developer/oauth-clients/:id":  {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"GET /api/v1/developer/websockets":            {app: "own", actions: []string{"developer"}},
	"POST /api/v1/developer/websockets":           {app: "own", actions: []string{"developer"}},
	"GET /api/v1/developer/websockets/:id":        {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"PATCH /api/v1/developer/websockets/:id":      {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"DELETE /api/v1/developer/websockets/:id":     {app: "own", actions: []string{"developer"}, notFoundOK: true},
	"POST /api/v1/developer/websockets/:id/test":  {app: "own", actions: []string{"developer"}, notFoundOK: true},
	// The channel: sk_ and pk_ keys and OAuth tokens of the config's app (wshub tests
	// cover the 403 of another app or organisation with a real config).
	"GET /api/v1/ws":         {channel: true, notFoundOK: true},
	"GET /api/v1/events":     {app: "own", actions: []string{"read"}},
	"GET /api/v1/audit-logs": {app: "own", actions: []string{"read"}},
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

// allowed says whether a principal passes the route's check.
func (a access) allowed(p *auth.Principal) bool {
	if p == nil {
		return false
	}
	if a.channel {
		return p.Kind == auth.KindSecret || p.Kind == auth.KindPublishable || p.Kind == auth.KindAccessToken
	}
	switch a.app {
	case "own":
		return slices.ContainsFunc(a.actions, func(x string) bool { return p.Can(p.App, x) })
	case "any":
		return p.Can("treasury", "read") || slices.ContainsFunc(a.actions, func(x string) bool { return p.Can(p.App, x) })
	default:
		return slices.ContainsFunc(a.actions, func(x string) bool { return p.Can(a.app, x) })
	}
}

func TestAuthorisationMatrix(t *testing.T) {
	f := newFixture(t)
	h := NewRouter(Config{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Workflows: &fakeWorkflows{decision: workflows.PolicyDecision{Allowed: true}}, RateBurst: 1 << 20, RateLimit: 1 << 20})
	engine := h.(*gin.Engine)
	authn := auth.NewAuthenticator(f.store)

	tokens := map[string]string{"none": "", "malformed": "not-a-token", "unknown": "sk_unknownunknownunknownunknownunknownunk"}
	for app, k := range f.creds.Keys {
		tokens[app+" sk"], tokens[app+" pk"], tokens[app+" read"] = k.SK, k.PK, k.Read
		if k.Approve != "" {
			tokens[app+" approve"], tokens[app+" sign"] = k.Approve, k.Sign
		}
	}
	tokens["other org pay sk"] = f.creds.OtherOrg.Keys["pay"]["sk"]
	// OAuth access tokens: one per app and scope, as clients of the organisation get them.
	for _, app := range auth.Apps {
		for _, action := range auth.AllActions {
			tokens["oauth "+app+":"+action] = matrixAccessToken(t, f, app, app+":"+action)
		}
	}
	// Credentials that must be refused whatever the route: expired, revoked, or of a
	// revoked client.
	refused := map[string]string{}
	expired, _ := auth.NewSecret(auth.KindAccessToken)
	clientID := matrixClient(t, f, "pay", "pay:read")
	err := f.store.CreateOAuthToken(context.Background(), &store.OAuthToken{TokenHash: auth.HashSecret(expired), ClientID: clientID,
		OrgID: f.creds.OrgID, App: "pay", Actions: "read", Scope: "pay:read", CreatedAt: time.Now().Add(-time.Hour),
		ExpiresAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	refused["expired oauth token"] = expired
	var revokedKey keyResponse
	_ = json.Unmarshal(f.post(t, "/api/v1/developer/api-keys", f.creds.Keys["pay"].SK, `{"kind":"sk"}`).body, &revokedKey)
	f.do(t, "DELETE", "/api/v1/developer/api-keys/"+revokedKey.ID, f.creds.Keys["pay"].SK, nil)
	refused["revoked sk"] = revokedKey.Secret
	revokedClientToken := matrixAccessToken(t, f, "pay", "pay:write")
	f.do(t, "DELETE", "/api/v1/developer/oauth-clients/"+lastMatrixClient, f.creds.Keys["pay"].SK, nil)
	refused["token of a revoked oauth client"] = revokedClientToken
	for name, token := range refused {
		tokens[name] = token
	}

	seen := 0
	for _, route := range engine.Routes() {
		key := route.Method + " " + route.Path
		rule, ok := routeAccess[key]
		if !ok {
			t.Errorf("route %s has no entry in the authorisation table", key)
			continue
		}
		seen++
		path := strings.NewReplacer(":app", "pay", ":domain", "payment", ":id", "nothing_here").Replace(route.Path)
		for name, token := range tokens {
			req := newRequest(route.Method, path, token)
			rec := httpRecorder()
			h.ServeHTTP(rec, req)
			got := rec.Code
			p, _ := authn.Authenticate(req.Context(), token)
			if _, ok := refused[name]; ok && !rule.public && (p != nil || got != 401) {
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
			case rule.allowed(p):
				if got == 401 || got == 403 {
					t.Errorf("%s with %s: allowed caller got %d", key, name, got)
				}
			default:
				if got != 403 && !(rule.notFoundOK && got == 404) {
					t.Errorf("%s with %s: want 403, got %d", key, name, got)
				}
			}
		}
	}
	if seen != len(routeAccess) {
		t.Errorf("the table has %d entries for %d routes: remove the stale ones", len(routeAccess), seen)
	}
}

func newRequest(method, path, token string) *http.Request {
	req := httptestRequest(method, path)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

func httptestRequest(method, path string) *http.Request {
	body := io.Reader(nil)
	if method != "GET" {
		body = strings.NewReader("{}")
	}
	req := httptest.NewRequest(method, path, body)
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
