package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/console"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// signedIn is a person's session as a browser holds it: the cookie and the CSRF token.
type signedIn struct {
	token, csrf, userID string
}

// signIn signs a person in and checks the cookie is one a browser keeps to itself.
func (f *fixture) signIn(t *testing.T, email, password string) signedIn {
	t.Helper()
	r := f.trySignIn(t, "192.0.2.1:1234", email, password)
	if r.status != 201 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("sign in %s: %d %s", email, r.status, r.body)
	}
	cookies := (&http.Response{Header: r.header}).Cookies()
	// Plain http: not Secure, or browsers would drop it (TestSessionCookieFollowsTheScheme).
	if len(cookies) != 1 || cookies[0].Name != auth.SessionCookie || !cookies[0].HttpOnly || cookies[0].Secure ||
		cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Path != "/" || cookies[0].MaxAge <= 0 {
		t.Fatalf("session cookie %+v", cookies)
	}
	var body apitypes.Session
	if err := json.Unmarshal(r.body, &body); err != nil || body.CSRFToken == "" || body.User.Email != strings.ToLower(email) {
		t.Fatalf("sign-in answer %s", r.body)
	}
	if strings.Contains(string(r.body), cookies[0].Value) {
		t.Fatal("the session token is in the body, where scripts can read it")
	}
	return signedIn{token: cookies[0].Value, csrf: body.CSRFToken, userID: body.User.ID}
}

// setPassword opens a one-time sign-in link as a browser would, sets a new password with
// it, and returns the password.
func (f *fixture) setPassword(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	page := f.do(t, "GET", u.RequestURI(), "", nil)
	if page.status != 200 || !strings.Contains(string(page.body), "Set your password") {
		t.Fatalf("the link's page: %d %s", page.status, page.body)
	}
	password := "correct horse battery staple"
	r := f.welcome(t, u.Query().Get("token"), password, password)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/" ||
		!strings.Contains(r.header.Get("Set-Cookie"), auth.SessionCookie+"=ses_") {
		t.Fatalf("setting the password: %d %v %s", r.status, r.header, r.body)
	}
	return password
}

// welcome posts the form of a sign-in link's page.
func (f *fixture) welcome(t *testing.T, token, password, confirm string) response {
	t.Helper()
	form := url.Values{"token": {token}, "password": {password}, "confirm": {confirm}}
	return f.do(t, "POST", "/console/welcome", "", strings.NewReader(form.Encode()),
		"Content-Type", "application/x-www-form-urlencoded")
}

// trySignIn sends a sign-in from a client address, as a browser's fetch would.
func (f *fixture) trySignIn(t *testing.T, from, email, password string, headers ...string) response {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	req := httptest.NewRequest("POST", "/api/v1/sessions", strings.NewReader(string(body)))
	req.RemoteAddr = from
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	r := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	_ = json.Unmarshal(r.body, &r.problem)
	return r
}

// as makes a request with the session; writes carry the CSRF token.
func (f *fixture) as(t *testing.T, s signedIn, method, target, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return f.do(t, method, target, "", rd, "Cookie", auth.SessionCookie+"="+s.token, auth.CSRFHeader, s.csrf)
}

func newPeopleFixture(t *testing.T) (*fixture, signedIn) {
	t.Helper()
	return newPeopleFixtureOn(t, storetest.NewSQLite(t))
}

// newPeopleFixtureOn is newPeopleFixture on a store of the test's choice.
func newPeopleFixtureOn(t *testing.T, s *store.Store) (*fixture, signedIn) {
	t.Helper()
	f := newFixtureOn(t, s)
	f.handler = NewRouter(withPages(t, Config{
		Store:   f.store,
		Log:     slog.New(slog.NewJSONHandler(f.logs, nil)),
		Service: &service.Service{Store: f.store, Log: slog.New(slog.NewJSONHandler(f.logs, nil)), Workflows: &fakeWorkflows{decision: workflows.PolicyDecision{Allowed: true}}},
	}, console.Options{}))
	return f, f.signIn(t, f.creds.Owner.Email, f.creds.Owner.Password)
}

func TestSignInAndSessions(t *testing.T) {
	f, owner := newPeopleFixture(t)
	wrong := f.trySignIn(t, "192.0.2.1:1", "owner@example.com", "not the password")
	wrong.wantProblem(t, 401, apitypes.CodeUnauthenticated)
	unknown := f.trySignIn(t, "192.0.2.1:1", "nobody@example.com", "not the password")
	unknown.wantProblem(t, 401, apitypes.CodeUnauthenticated)
	if wrong.problem.Detail != unknown.problem.Detail {
		t.Fatalf("an unknown address is told apart from a wrong password: %q / %q", unknown.problem.Detail, wrong.problem.Detail)
	}
	f.trySignIn(t, "192.0.2.1:1", "", "").wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "POST", "/api/v1/sessions", "", strings.NewReader(`{"email":"a@b.c","password":"x","remember":true}`),
		"Content-Type", "application/json").wantProblem(t, 422, apitypes.CodeValidationFailed)
	// Login CSRF: a cross-site form cannot send JSON, and a browser names a cross-site request.
	good := `{"email":"owner@example.com","password":"` + f.creds.Owner.Password + `"}`
	f.do(t, "POST", "/api/v1/sessions", "", strings.NewReader(good), "Content-Type", "text/plain").wantProblem(t, 415, apitypes.CodeUnsupportedMediaType)
	f.trySignIn(t, "192.0.2.1:1", f.creds.Owner.Email, f.creds.Owner.Password, "Sec-Fetch-Site", "cross-site").
		wantProblem(t, 403, apitypes.CodePermissionDenied)
	// Addresses are matched whatever their case.
	f.signIn(t, "Owner@Example.com", f.creds.Owner.Password)

	r := f.as(t, owner, "GET", "/api/v1/session", "")
	var me apitypes.Session
	if err := json.Unmarshal(r.body, &me); err != nil || r.status != 200 || me.User.Role != "owner" || me.CSRFToken != owner.csrf ||
		len(me.Permissions) != len(auth.Apps) || len(me.Permissions["borrow"]) != len(auth.AllActions) {
		t.Fatalf("session %d %s", r.status, r.body)
	}
	if r := f.as(t, owner, "GET", "/api/v1/treasury/portfolio", ""); r.status != 200 {
		t.Fatalf("owner reads the portfolio: %d %s", r.status, r.body)
	}

	// A write with the cookie alone is what a forged cross-site request looks like.
	payment := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"10","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	cookieOnly := []string{"Cookie", auth.SessionCookie + "=" + owner.token}
	f.do(t, "POST", "/api/v1/payments", "", strings.NewReader(payment), cookieOnly...).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "POST", "/api/v1/payments", "", strings.NewReader(payment), append(cookieOnly, auth.CSRFHeader, auth.CSRFToken("ses_other"))...).
		wantProblem(t, 403, apitypes.CodePermissionDenied)
	created := f.as(t, owner, "POST", "/api/v1/payments", payment)
	if created.status != 201 || decodeOrder(t, created)["app"] != "pay" {
		t.Fatalf("owner creates a payment: %d %s", created.status, created.body)
	}
	// The session token is no bearer token, and a key's requests have no session.
	f.do(t, "GET", "/api/v1/session", owner.token, nil).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	f.do(t, "GET", "/api/v1/session", f.creds.Keys["pay"].SK, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	// With both, the Authorization header decides.
	if r := f.do(t, "GET", "/api/v1/trade-orders", f.creds.Keys["pay"].SK, nil, cookieOnly...); r.status != 403 {
		t.Fatalf("a pay key with an owner's cookie reads trade orders: %d", r.status)
	}

	// The audit log names the person.
	audit, _ := f.store.ListAudit(context.Background(), f.creds.OrgID, []string{"pay"}, nil, "", 5)
	if len(audit) == 0 || audit[0].ActorType != "user" || audit[0].ActorID != owner.userID {
		t.Fatalf("audit %+v", audit)
	}

	// Signing out ends that session only.
	second := f.signIn(t, f.creds.Owner.Email, f.creds.Owner.Password)
	out := f.as(t, owner, "DELETE", "/api/v1/session", "")
	if out.status != 204 || !strings.Contains(out.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("sign out %d %v", out.status, out.header)
	}
	f.as(t, owner, "GET", "/api/v1/session", "").wantProblem(t, 401, apitypes.CodeUnauthenticated)
	if r := f.as(t, second, "GET", "/api/v1/session", ""); r.status != 200 {
		t.Fatalf("the other session ended too: %d", r.status)
	}

	// An expired session is refused.
	token, sess, _ := auth.NewSession(owner.userID, f.creds.OrgID, time.Now().Add(-2*time.Hour), time.Hour)
	if err := f.store.CreateSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	f.as(t, signedIn{token: token, csrf: auth.CSRFToken(token)}, "GET", "/api/v1/session", "").wantProblem(t, 401, apitypes.CodeUnauthenticated)
}

func TestFailedSignInsAreLimited(t *testing.T) {
	f, _ := newPeopleFixture(t)
	// The clock stands still: a slow machine's bcrypt must not refill the buckets.
	stopped := time.Now()
	clock := func() time.Time { return stopped }
	f.handler = NewRouter(Config{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock, Service: &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	for range 10 {
		f.trySignIn(t, "198.51.100.1:1", "owner@example.com", "guess guess guess").wantProblem(t, 401, apitypes.CodeUnauthenticated)
	}
	// The address is being guessed at: from anywhere, even with the right password, it waits.
	limited := f.trySignIn(t, "198.51.100.2:1", "owner@example.com", f.creds.Owner.Password)
	limited.wantProblem(t, 429, apitypes.CodeRateLimited)
	if limited.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	// The guessing client waits for any address; another client and address do not.
	f.trySignIn(t, "198.51.100.1:1", "someone@example.com", "guess guess guess").wantProblem(t, 429, apitypes.CodeRateLimited)
	f.trySignIn(t, "198.51.100.3:1", "someone@example.com", "guess guess guess").wantProblem(t, 401, apitypes.CodeUnauthenticated)

	// Behind a trusted balancer, X-Forwarded-For names the client: clients do not share
	// the balancer's limit.
	f.handler = NewRouter(Config{
		Store:          f.store,
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		TrustedProxies: []string{"10.0.0.1"},
		Now:            clock,
		Service:        &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
	})
	for range 10 {
		f.trySignIn(t, "10.0.0.1:1", "a@example.com", "guess guess guess", "X-Forwarded-For", "203.0.113.1")
	}
	f.trySignIn(t, "10.0.0.1:1", "b@example.com", "guess guess guess", "X-Forwarded-For", "203.0.113.1").wantProblem(t, 429, apitypes.CodeRateLimited)
	f.signIn(t, f.creds.Owner.Email, f.creds.Owner.Password)
}

// The owner grants a member per-app permissions on the app's team page; the member's
// sessions follow every change at once, and maker-checker binds the person.
func TestTeamAndMemberPermissions(t *testing.T) {
	f, owner := newPeopleFixture(t)
	added := f.as(t, owner, "POST", "/developer/team?app=pay", `{"email":"Approver@Example.com","actions":["read","approve","read"]}`)
	var member addedMember
	if err := json.Unmarshal(added.body, &member); err != nil || added.status != 201 || added.header.Get("Cache-Control") != "no-store" ||
		member.Email != "approver@example.com" || member.Role != "member" || !strings.HasPrefix(member.SignInLink, "http://example.com/console/welcome?token=sil_") ||
		strings.Join(member.Actions, ",") != "approve,read" || member.App != "pay" {
		t.Fatalf("add member %d %s", added.status, added.body)
	}
	f.as(t, owner, "POST", "/developer/team?app=pay", `{"email":"approver@example.com","actions":["read"]}`).wantProblem(t, 409, apitypes.CodeConflict)
	f.as(t, owner, "POST", "/developer/team?app=pay", `{"email":"not an address","actions":["fly"]}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.as(t, owner, "POST", "/developer/team", `{"email":"x@example.com","actions":["read"]}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.as(t, owner, "POST", "/developer/team?app=bank", `{"email":"x@example.com","actions":["read"]}`).wantProblem(t, 422, apitypes.CodeValidationFailed)

	team := f.do(t, "GET", "/developer/team", f.creds.Keys["pay"].SK, nil)
	if team.status != 200 || !strings.Contains(string(team.body), `"email":"approver@example.com"`) ||
		strings.Contains(string(team.body), "sil_") || !strings.Contains(string(team.body), `"role":"owner"`) {
		t.Fatalf("team %d %s", team.status, team.body)
	}
	// Keys read the team but never change it: only the owner grants.
	f.post(t, "/developer/team", f.creds.Keys["pay"].SK, `{"email":"y@example.com","actions":["developer"]}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/developer/team?app=trade", f.creds.Keys["pay"].SK, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	if r := f.do(t, "GET", "/developer/team?app=pay", f.creds.Keys["pay"].SK, nil); r.status != 200 {
		t.Fatalf("a key naming its own app: %d", r.status)
	}

	m := f.signIn(t, "approver@example.com", f.setPassword(t, member.SignInLink))
	if r := f.as(t, m, "GET", "/api/v1/payments", ""); r.status != 200 {
		t.Fatalf("member lists payments: %d %s", r.status, r.body)
	}
	payment := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"10","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	f.as(t, m, "POST", "/api/v1/payments", payment).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.as(t, m, "GET", "/api/v1/trade-orders", "").wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.as(t, m, "GET", "/api/v1/treasury/portfolio", "").wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.as(t, m, "GET", "/developer/api-keys?app=pay", "").wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.as(t, m, "PATCH", "/developer/team/"+m.userID+"?app=pay", `{"actions":["developer"]}`).wantProblem(t, 403, apitypes.CodePermissionDenied)

	// Maker-checker binds people: the owner made the order, so the owner may not decide
	// it, whichever session they use; the member may.
	order := decodeOrder(t, f.as(t, owner, "POST", "/api/v1/payments", payment))["id"].(string)
	item := &store.ApprovalItem{ID: "apr_people", OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: order, Status: "pending",
		RequiredApprovals: 1, Reason: "r", PayloadHash: "h", Summary: "{}", CreatedBy: owner.userID,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.store.CreateApprovalItem(context.Background(), item); err != nil {
		t.Fatal(err)
	}
	decide := "/api/v1/approvals/payment/apr_people/decide"
	f.as(t, f.signIn(t, f.creds.Owner.Email, f.creds.Owner.Password), "POST", decide, `{"decision":"APPROVE"}`).wantProblem(t, 403, apitypes.CodeMakerChecker)
	if r := f.as(t, m, "GET", "/api/v1/approvals?status=pending", ""); !strings.Contains(string(r.body), "apr_people") {
		t.Fatalf("the member's approvals %s", r.body)
	}
	if r := f.as(t, m, "POST", decide, `{"decision":"APPROVE"}`); r.status != 202 || !strings.Contains(string(r.body), `"decidedBy":"`+m.userID+`"`) {
		t.Fatalf("member approves: %d %s", r.status, r.body)
	}

	// The owner grants write and developer: the member's open session has them at once.
	r := f.as(t, owner, "PATCH", "/developer/team/"+m.userID+"?app=pay", `{"actions":["read","write","developer"]}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"actions":["developer","read","write"]`) {
		t.Fatalf("grant %d %s", r.status, r.body)
	}
	if r := f.as(t, m, "POST", "/api/v1/payments", payment); r.status != 201 {
		t.Fatalf("member creates after the grant: %d %s", r.status, r.body)
	}
	key := f.as(t, m, "POST", "/developer/api-keys?app=pay", `{"kind":"tk","actions":["read"]}`)
	if key.status != 201 || !strings.Contains(string(key.body), `"app":"pay"`) {
		t.Fatalf("member with developer creates a key: %d %s", key.status, key.body)
	}
	f.as(t, m, "GET", "/developer/api-keys", "").wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.as(t, m, "GET", "/developer/api-keys?app=trade", "").wantProblem(t, 403, apitypes.CodePermissionDenied)
	if r := f.as(t, m, "GET", "/developer/team?app=pay", ""); r.status != 200 {
		t.Fatalf("a member with developer reads the team: %d", r.status)
	}
	f.as(t, m, "POST", "/developer/team?app=pay", `{"email":"z@example.com","actions":["read"]}`).wantProblem(t, 403, apitypes.CodePermissionDenied)

	// Removed from the app: nothing there any more, at once.
	if r := f.as(t, owner, "DELETE", "/developer/team/"+m.userID+"?app=pay", ""); r.status != 200 || !strings.Contains(string(r.body), `"actions":[]`) {
		t.Fatalf("remove %d %s", r.status, r.body)
	}
	f.as(t, m, "GET", "/api/v1/payments", "").wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.as(t, m, "GET", "/api/v1/events", "").wantProblem(t, 403, apitypes.CodePermissionDenied)

	// The owner's own permissions do not change; people of other organisations are not found.
	f.as(t, owner, "PATCH", "/developer/team/"+owner.userID+"?app=pay", `{"actions":[]}`).wantProblem(t, 409, apitypes.CodeConflict)
	stranger := &store.User{ID: "usr_stranger", OrgID: f.creds.OtherOrg.OrgID, Email: "s@other.example", PasswordHash: "x",
		Role: auth.RoleMember, CreatedAt: time.Now()}
	if err := f.store.CreateUser(context.Background(), stranger, nil); err != nil {
		t.Fatal(err)
	}
	f.as(t, owner, "PATCH", "/developer/team/usr_stranger?app=pay", `{"actions":["read"]}`).wantProblem(t, 404, apitypes.CodeNotFound)
	if r := f.as(t, owner, "GET", "/developer/team?app=pay", ""); strings.Contains(string(r.body), "usr_stranger") {
		t.Fatal("another organisation's person is listed")
	}
	audit, _ := f.store.ListAudit(context.Background(), f.creds.OrgID, []string{"pay"}, nil, "", 50)
	var changes []string
	for _, a := range audit {
		if strings.HasPrefix(a.Action, "member.") && a.CorrelationID != "seed" {
			changes = append(changes, a.Action)
		}
	}
	if strings.Join(changes, ",") != "member.removed,member.permissions_changed,member.added" {
		t.Fatalf("audited team changes %v", changes)
	}
}

func TestChangingThePasswordEndsEverySession(t *testing.T) {
	f, owner := newPeopleFixture(t)
	other := f.signIn(t, f.creds.Owner.Email, f.creds.Owner.Password)
	f.as(t, owner, "POST", "/api/v1/session/password", `{"currentPassword":"wrong wrong wrong","newPassword":"a new long password"}`).
		wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.as(t, owner, "POST", "/api/v1/session/password", `{"currentPassword":"`+f.creds.Owner.Password+`","newPassword":"short"}`).
		wantProblem(t, 422, apitypes.CodeValidationFailed)
	r := f.as(t, owner, "POST", "/api/v1/session/password", `{"currentPassword":"`+f.creds.Owner.Password+`","newPassword":"a new long password"}`)
	cookies := (&http.Response{Header: r.header}).Cookies()
	var fresh apitypes.Session
	if err := json.Unmarshal(r.body, &fresh); err != nil || r.status != 200 || len(cookies) != 1 || cookies[0].Value == owner.token || fresh.CSRFToken == owner.csrf {
		t.Fatalf("change %d %s", r.status, r.body)
	}
	f.as(t, owner, "GET", "/api/v1/session", "").wantProblem(t, 401, apitypes.CodeUnauthenticated)
	f.as(t, other, "GET", "/api/v1/session", "").wantProblem(t, 401, apitypes.CodeUnauthenticated)
	if r := f.as(t, signedIn{token: cookies[0].Value, csrf: fresh.CSRFToken}, "GET", "/api/v1/session", ""); r.status != 200 {
		t.Fatalf("the replacing session: %d", r.status)
	}
	f.trySignIn(t, "192.0.2.1:1", f.creds.Owner.Email, f.creds.Owner.Password).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	f.signIn(t, f.creds.Owner.Email, "a new long password")

	// A sign-in that checked the old password just before the change gets no session.
	u, _ := f.store.UserByEmail(context.Background(), f.creds.Owner.Email)
	token, sess, _ := auth.NewSession(u.ID, u.OrgID, u.PasswordChangedAt.Add(-time.Millisecond), time.Hour)
	if err := f.store.CreateSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	f.as(t, signedIn{token: token, csrf: auth.CSRFToken(token)}, "GET", "/api/v1/session", "").wantProblem(t, 401, apitypes.CodeUnauthenticated)
}

// A credential never carries more than its creator holds, and what a person does through
// a key they made is still theirs for maker-checker.
func TestPeopleHandOutOnlyWhatTheyHold(t *testing.T) {
	f, owner := newPeopleFixture(t)
	added := f.as(t, owner, "POST", "/developer/team?app=pay", `{"email":"dev@example.com","actions":["developer","write","approve"]}`)
	var member addedMember
	_ = json.Unmarshal(added.body, &member)
	m := f.signIn(t, "dev@example.com", f.setPassword(t, member.SignInLink))

	f.as(t, m, "POST", "/developer/api-keys?app=pay", `{"kind":"sk"}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.as(t, m, "POST", "/developer/api-keys?app=pay", `{"kind":"tk","actions":["approve","sign"]}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.as(t, m, "POST", "/developer/oauth-clients?app=pay", `{"scopes":"pay:read"}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
	if r := f.as(t, m, "POST", "/developer/oauth-clients?app=pay", `{"scopes":"pay:write"}`); r.status != 201 ||
		!strings.Contains(string(r.body), `"createdBy":"`+m.userID+`"`) {
		t.Fatalf("a client within the member's grants: %d %s", r.status, r.body)
	}
	r := f.as(t, m, "POST", "/developer/api-keys?app=pay", `{"kind":"tk","actions":["approve"]}`)
	var key createdKey
	if err := json.Unmarshal(r.body, &key); err != nil || r.status != 201 || key.CreatedBy == nil || *key.CreatedBy != m.userID {
		t.Fatalf("a key within the member's grants: %d %s", r.status, r.body)
	}
	// A key may not mint what it does not hold either: a tk key with developer alone
	// cannot mint an sk key.
	devOnly := f.post(t, "/developer/api-keys", f.creds.Keys["pay"].SK, `{"kind":"tk","actions":["developer"]}`)
	var dk createdKey
	_ = json.Unmarshal(devOnly.body, &dk)
	f.post(t, "/developer/api-keys", dk.Secret, `{"kind":"sk"}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
	if r := f.post(t, "/developer/api-keys", dk.Secret, `{"kind":"pk"}`); r.status != 201 {
		t.Fatalf("a developer key mints a pk key (no actions): %d %s", r.status, r.body)
	}

	payment := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"10","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	order := decodeOrder(t, f.as(t, m, "POST", "/api/v1/payments", payment))
	if order["createdBy"] != m.userID || order["createdByUser"] != m.userID {
		t.Fatalf("createdBy %v, createdByUser %v", order["createdBy"], order["createdByUser"])
	}
	item := &store.ApprovalItem{ID: "apr_minted", OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: order["id"].(string),
		Status: "pending", RequiredApprovals: 1, Reason: "r", PayloadHash: "h", Summary: "{}", CreatedBy: m.userID,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.store.CreateApprovalItem(context.Background(), item); err != nil {
		t.Fatal(err)
	}
	f.post(t, "/api/v1/approvals/payment/apr_minted/decide", key.Secret, `{"decision":"APPROVE"}`).wantProblem(t, 403, apitypes.CodeMakerChecker)
	if r := f.post(t, "/api/v1/approvals/payment/apr_minted/decide", f.creds.Keys["pay"].Approve, `{"decision":"APPROVE"}`); r.status != 202 {
		t.Fatalf("another approver: %d %s", r.status, r.body)
	}

	// An order made through a key names the key as createdBy, on the order and on its
	// Order.Created event alike, and the person behind it as createdByUser; maker-checker
	// compares the person, so the same person's approve key may not decide it.
	var writer createdKey
	if r := f.as(t, m, "POST", "/developer/api-keys?app=pay", `{"kind":"tk","actions":["write"]}`); json.Unmarshal(r.body, &writer) != nil || r.status != 201 {
		t.Fatalf("a write key: %d %s", r.status, r.body)
	}
	byKey := decodeOrder(t, f.post(t, "/api/v1/payments", writer.Secret, payment))
	if byKey["createdBy"] != writer.ID || byKey["createdByUser"] != m.userID {
		t.Fatalf("an order made by a key: createdBy %v, createdByUser %v (key %s, person %s)", byKey["createdBy"], byKey["createdByUser"], writer.ID, m.userID)
	}
	evs := f.do(t, "GET", "/api/v1/events?orderId="+byKey["id"].(string), f.creds.Keys["pay"].SK, nil)
	if evs.status != 200 || !strings.Contains(string(evs.body), `"createdBy":"`+writer.ID+`"`) || !strings.Contains(string(evs.body), `"createdByUser":"`+m.userID+`"`) {
		t.Fatalf("Order.Created of an order made by a key: %d %s", evs.status, evs.body)
	}
	if bySK := decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, payment)); bySK["createdByUser"] != nil || !strings.HasPrefix(bySK["createdBy"].(string), "key_") {
		t.Fatalf("an order made by a key no person made: createdBy %v, createdByUser %v", bySK["createdBy"], bySK["createdByUser"])
	}
	item = &store.ApprovalItem{ID: "apr_by_key", OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: byKey["id"].(string),
		Status: "pending", RequiredApprovals: 1, Reason: "r", PayloadHash: "h", Summary: "{}", CreatedBy: writer.ID,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.store.CreateApprovalItem(context.Background(), item); err != nil {
		t.Fatal(err)
	}
	f.post(t, "/api/v1/approvals/payment/apr_by_key/decide", key.Secret, `{"decision":"APPROVE"}`).wantProblem(t, 403, apitypes.CodeMakerChecker)
	f.as(t, m, "POST", "/api/v1/approvals/payment/apr_by_key/decide", `{"decision":"APPROVE"}`).wantProblem(t, 403, apitypes.CodeMakerChecker)
}
