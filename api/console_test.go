package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/console"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/workflows"
)

// consoleIsolationTable says which of org A pay's resources each console route that takes
// an id is tried with. A route added without an entry fails the test.
var consoleIsolationTable = map[string][]string{
	"GET /console/{app}/policy/drafts/{id}":                             {"policy draft"},
	"POST /console/{app}/policy/drafts/{id}":                            {"policy draft"},
	"POST /console/{app}/policy/drafts/{id}/approve":                    {"policy draft"},
	"POST /console/{app}/policy/drafts/{id}/publish":                    {"policy draft"},
	"POST /console/{app}/policy/drafts/{id}/discard":                    {"policy draft"},
	"POST /console/{app}/policy/drafts/{id}/dry-runs":                   {"policy draft"},
	"GET /console/{app}/policy/dry-runs/{id}":                           {"policy dry run"},
	"GET /console/{app}/orders/{id}":                                    {"draft order", "submitted order"},
	"POST /console/{app}/orders/{id}/submit":                            {"draft order"},
	"GET /console/{app}/payouts/{id}":                                   {"payout schedule"},
	"POST /console/{app}/payouts/{id}/pause":                            {"payout schedule"},
	"POST /console/{app}/payouts/{id}/delete":                           {"payout schedule"},
	"POST /console/{app}/approvals/{id}/decide":                         {"approval item"},
	"POST /console/{app}/api-keys/{id}/revoke":                          {"api key"},
	"POST /console/{app}/oauth-clients/{id}/revoke":                     {"oauth client"},
	"POST /console/{app}/websockets/{id}/enabled":                       {"websocket config"},
	"POST /console/{app}/websockets/{id}/delete":                        {"websocket config"},
	"POST /console/{app}/websockets/{id}/test":                          {"websocket config"},
	"GET /console/{app}/webhooks/{id}":                                  {"webhook"},
	"POST /console/{app}/webhooks/{id}":                                 {"webhook"},
	"POST /console/{app}/webhooks/{id}/delete":                          {"webhook"},
	"POST /console/{app}/webhooks/{id}/rotate":                          {"webhook"},
	"POST /console/{app}/webhooks/{id}/test":                            {"webhook"},
	"POST /console/{app}/webhooks/{id}/recover":                         {"webhook"},
	"POST /console/{app}/webhooks/{id}/deliveries/{delivery}/redeliver": {"webhook"},
	"POST /console/{app}/team/{id}":                                     {"member"},
	"POST /console/{app}/team/{id}/remove":                              {"member"},
	// The organisation's wallets: TestAWalletIsRegisteredWithProofOfItsKey.
	"POST /console/{app}/wallets/{id}/label":   nil,
	"POST /console/{app}/wallets/{id}/archive": nil,
	// A person's own passkeys: service.TestPasskeysArePeoplesOwn.
	"POST /console/{app}/passkeys/{id}/revoke": nil,
}

// consoleForm is the body each console form is tried with: one that would change the
// resource if the person could.
var consoleForm = map[string]url.Values{
	"POST /console/{app}/approvals/{id}/decide":       {"decision": {"APPROVE"}},
	"POST /console/{app}/websockets/{id}/enabled":     {"enabled": {"false"}},
	"POST /console/{app}/webhooks/{id}":               {"enabled": {"false"}},
	"POST /console/{app}/payouts/{id}/pause":          {"paused": {"true"}},
	"POST /console/{app}/webhooks/{id}/recover":       {"since": {"2020-01-01T00:00"}},
	"POST /console/{app}/team/{id}":                   {"actions": {"read", "write", "approve", "sign", "developer"}},
	"POST /console/{app}/policy/drafts/{id}":          {"rules": {`{}`}},
	"POST /console/{app}/policy/drafts/{id}/dry-runs": {"days": {"7"}},
}

// consoleIsolation is TestDataIsolation's walk of the console: the people of another app
// of org A and of another organisation reach none of org A pay's resources through any
// page or form, in pay or in their own app, and no page lists one; org A's owner sees
// each of them there.
func consoleIsolation(t *testing.T, f *fixture, a map[string]string, orgWide map[string]bool, people map[string]credential, owner credential) {
	t.Helper()
	pages := NewRouter(withPages(t, Config{
		Store:     f.store,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		RateBurst: 1 << 20,
		RateLimit: 1 << 20,
		Service: &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Workflows: &fakeWorkflows{decision: workflows.PolicyDecision{Allowed: true}}, Webhooks: f.webhooks,
			DryRuns:    inlineDryRuns{&activities.Policies{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}},
			Recoveries: inlineRecoveries{&activities.WebhookRecoveries{Store: f.store}}},
	}, console.Options{}))
	open := func(cr credential, method, path string, form url.Values) *httptest.ResponseRecorder {
		if form == nil {
			form = url.Values{}
		}
		form.Set("csrf", auth.CSRFToken(cr.session))
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(form.Encode())
		}
		req := httptest.NewRequest(method, path, body)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: cr.session})
		rec := httptest.NewRecorder()
		pages.ServeHTTP(rec, req)
		return rec
	}
	// refused: a status that refuses, or the form's way back saying why.
	refused := func(rec *httptest.ResponseRecorder) bool {
		if rec.Code == http.StatusForbidden || rec.Code == http.StatusNotFound {
			return true
		}
		loc := rec.Header().Get("Location")
		return rec.Code == http.StatusSeeOther && strings.Contains(loc, "error=") && !strings.Contains(loc, "notice=")
	}

	var idRoutes, listPages []string
	covered := map[string]bool{}
	for _, pattern := range console.Routes() {
		if !strings.Contains(pattern, "{id}") {
			if strings.HasPrefix(pattern, "GET ") {
				listPages = append(listPages, pattern)
			}
			continue
		}
		if _, ok := consoleIsolationTable[pattern]; !ok {
			t.Errorf("console route %s has no entry in consoleIsolationTable", pattern)
		}
		covered[pattern] = true
		idRoutes = append(idRoutes, pattern)
	}
	if len(covered) != len(consoleIsolationTable) {
		t.Errorf("consoleIsolationTable has %d entries for %d routes: remove the stale ones", len(consoleIsolationTable), len(covered))
	}
	fill := func(pattern, app, id string) (string, string) {
		method, path, _ := strings.Cut(pattern, " ")
		path = strings.NewReplacer("{app}", app, "{id}", id, "{delivery}", "dlv_nothing", "{$}", "").Replace(path)
		return method, path
	}

	for name, cr := range people {
		apps := []string{"pay", cr.app}
		if cr.app == "" || cr.app == "pay" {
			apps = []string{"pay", "trade"}
		}
		for _, app := range apps {
			for _, pattern := range idRoutes {
				for _, res := range consoleIsolationTable[pattern] {
					method, path := fill(pattern, app, a[res])
					if rec := open(cr, method, path, consoleForm[pattern]); !refused(rec) {
						t.Errorf("%s: %s %s on org A pay's %s: %d %s, want a refusal", name, method, path, res, rec.Code, rec.Header().Get("Location"))
					}
				}
			}
			for _, pattern := range listPages {
				_, path := fill(pattern, app, "")
				rec := open(cr, "GET", path, nil)
				for res, id := range a {
					if strings.Contains(rec.Body.String(), id) && !(orgWide[res] && !strings.HasPrefix(name, "other org")) {
						t.Errorf("%s: %s shows org A pay's %s %s", name, path, res, id)
					}
				}
			}
		}
	}

	// The owner of org A sees them, so their absence above means something; and they are
	// unchanged by all of the above.
	var seen strings.Builder
	for _, pattern := range listPages {
		_, path := fill(pattern, "pay", "")
		rec := open(owner, "GET", path, nil)
		seen.WriteString(rec.Body.String())
	}
	for _, pattern := range []string{"GET /console/{app}/orders/{id}"} {
		_, path := fill(pattern, "pay", a["submitted order"])
		if rec := open(owner, "GET", path, nil); rec.Code != http.StatusOK {
			t.Errorf("the owner on %s: %d", path, rec.Code)
		}
	}
	for res, id := range a {
		if res != "signing request" && !strings.Contains(seen.String(), id) {
			t.Errorf("no console page shows pay's own %s %s to org A's owner", res, id)
		}
	}
	for _, check := range []struct{ path, absent string }{
		{"/console/pay/api-keys", "revoked"},
		{"/console/pay/oauth-clients", "revoked"},
		{"/console/pay/websockets", "disabled"},
	} {
		if body := open(owner, "GET", check.path, nil).Body.String(); strings.Contains(body, check.absent) {
			t.Errorf("%s after the others' attempts: something was %s", check.path, check.absent)
		}
	}
}

// withPages puts the console's pages beside the routes, as the process does: on the
// router's service, authenticator and sign-in service.
func withPages(t testing.TB, cfg Config, opts console.Options) Config {
	t.Helper()
	cfg.Authn = auth.NewAuthenticator(cfg.Store)
	cfg.Sessions = NewSessions(cfg)
	pages, err := console.New(console.Config{Service: cfg.Service, Sessions: cfg.Sessions, Authn: cfg.Authn, Log: cfg.Log, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pages = pages
	return cfg
}
